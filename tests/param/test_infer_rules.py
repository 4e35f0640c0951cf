"""zoo.param.infer_tags' rules and arguments: a kind rule settles what the shapes leave open and never overrules
them (a rule the shapes contradict is one line), a tied table and a readout stored as a vector take the rules meant for
them, and bad sizes or rules are one line before any model is built."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from param_helpers import s, tagged

import zoo.param as P
from zoo import optim
from zoo.train.step import run_once_options


def shapes(**leaves):
    return {k: jax.ShapeDtypeStruct(v, jnp.float32) for k, v in leaves.items()}


def haiku_readout(n: int) -> dict:
    """An hk.Linear named "readout" (w [n, 10], b [10]) after one hidden layer."""
    return {"hidden": shapes(w=(n, n), b=(n,)), "readout": shapes(w=(n, 10), b=(10,))}


def test_a_readout_rule_matching_the_bias_leaves_it_scalar():
    """rules={"^readout/": "readout"} matches hk.Linear's w and b. The bias has no width axis: a scalar, whose muP
    Adam LR is lr at every width, as zoo's own heads have. It was made output kind: LR lr * m^-1 (0.125 at m = 8) and
    init x m^-1/2. Checked on the first Adam step of the built optax chain (sign steps: |update| = lr)."""
    tags = P.infer_tags(haiku_readout(128), haiku_readout(1024), base_width=128, width=1024,
                        rules={"^readout/": "readout"})
    w, b = tags["readout"]["w"], tags["readout"]["b"]
    assert (w.kind, w.role, b.kind, b.role) == ("output", "readout", "scalar", "readout_bias")
    free = P.multiplier_free(P.get("mup"), tags)
    assert float(free.init_factor(b)) == 1.0 and float(free.lr_mult(b)) == 1.0
    params = {k: {n: jnp.ones(s.shape) for n, s in v.items()} for k, v in haiku_readout(1024).items()}
    tx = optim.build(optim.OptimConfig(name="adam", lr=0.1), free, tags)
    # one program compiled to run once (op by op, each eager op of the chain compiled on its own)
    step = jax.jit(lambda p: tx.update(jax.tree.map(lambda q: 0.5 * q, p), tx.init(p), p)[0])
    updates = step.lower(params).compile(compiler_options=run_once_options())(params)
    np.testing.assert_allclose(updates["readout"]["b"], -0.1, rtol=1e-5)
    np.testing.assert_allclose(updates["readout"]["w"], -0.1 / 8, rtol=1e-5)  # muP's readout: m^-1 after the shift


@pytest.mark.parametrize("rules,needle", [
    ({"^readout/": "output"}, "'readout/b' ((10,) -> (10,)) is scalar by its shapes"),
    ({"^hidden/": "hidden"}, "'hidden/b' ((128,) -> (1024,)) is vector by its shapes"),
    ({"^hidden/w$": "input"}, "'hidden/w' ((128, 128) -> (1024, 1024)) is hidden by its shapes"),
])
def test_a_kind_rule_the_shapes_contradict_is_one_line(rules, needle):
    """A kind rule may settle what shapes leave open, not overrule them: an "output" rule on the bias gave it muP's
    output exponents (LR m^-1), a "hidden" one on a bias a fan-in of 1 (base fan-in 1/m)."""
    with pytest.raises(ValueError) as err:
        P.infer_tags(haiku_readout(128), haiku_readout(1024), base_width=128, width=1024, rules=rules)
    assert needle in str(err.value) and "narrow the rule" in str(err.value) and "\n" not in str(err.value)


def test_the_kind_an_odd_ratio_error_names_settles_the_leaf():
    """A SwiGLU MLP width int(8n/3): 96 -> 256, 160 -> 426 (ratio 1.664, not 5/3). The error names a kind rule
    ('hidden', from the axes that change), and that rule now settles it: fan-in 160 and the fan-out 426 (it raised the
    same error again, whatever kind was given). The transposed kernel reads fan-in 426, base fan-in 255.6."""
    base, wide = shapes(up=(96, 256), down=(256, 96)), shapes(up=(160, 426), down=(426, 160))
    with pytest.raises(ValueError, match=r"axis 0 changes from 256 to 426, .* rules=\{'\^down\$': 'hidden'\}"):
        P.infer_tags(base, wide, base_width=96, width=160)
    tags = P.infer_tags(base, wide, base_width=96, width=160, rules={"^(up|down)$": "hidden"})
    assert (tags["up"].kind, tags["up"].fan_in, tags["up"].fan_out) == ("hidden", 160, 426)
    assert (tags["down"].kind, tags["down"].fan_in) == ("hidden", 426)
    assert tags["down"].base_fan_in == pytest.approx(255.6)


@pytest.mark.parametrize("kwargs,needle", [
    (dict(base_width=0), "base_width must be a positive number, got 0"),
    (dict(width=-16), "width must be a positive number, got -16"),
    (dict(depth=4, base_depth=0), "base_depth must be a positive integer, got 0"),
    (dict(depth=2.5, base_depth=1), "depth must be a positive integer, got 2.5"),
    (dict(rules={"w": 3}), "rule 'w': roles must be a string or a tuple of strings, got 3"),
    (dict(rules=["w"]), "rules must map a regex to a role or a tuple of roles, got list"),
])
def test_bad_sizes_and_rules_are_one_line(kwargs, needle):
    """They raised ZeroDivisionError, a misleading "not by the width ratio -2", AttributeError deep inside, or were
    accepted (base depth 0, dividing later)."""
    kwargs = {"base_width": 8, "width": 16, **kwargs}
    with pytest.raises((ValueError, TypeError)) as err:
        P.infer_tags(shapes(w=(8, 8)), shapes(w=(16, 16)), **kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_numpy_sizes_are_sizes():
    """Widths and depths from a numpy array (a sweep's np.int64) are accepted like Python ints."""
    tags = P.infer_tags(shapes(w=(8, 8)), shapes(w=(16, 16)), base_width=np.int64(8), width=np.int64(16),
                        depth=np.int64(4), base_depth=np.int64(2), rules={"w": "branch"})
    assert (tags["w"].kind, tags["w"].width_mult, tags["w"].depth_ratio) == ("hidden", 2.0, 2.0)


def test_a_rule_on_an_empty_tree_names_the_rule():
    """It raised IndexError reading the first path of a tree with none."""
    with pytest.raises(ValueError, match="rule 'x' matches no parameter; the tree has no parameters"):
        P.infer_tags({}, {}, base_width=8, width=16, rules={"x": "hidden"})


TIED_VOCAB, TIED_BASE = 33, 64


def tied_model(plugin):
    """A table E [V, n] used as embedding and readout (logits h E^T) around one tanh layer, with the readout multiplier
    in the forward pass (the documented path)."""
    from zoo.param.infer import tied_readout

    def init(key, width, depth):
        k1, k2 = jax.random.split(key)
        return {"embed": {"embeddings": jax.random.normal(k1, (TIED_VOCAB, width))},
                "h": {"w": jax.random.normal(k2, (width, width)) / jnp.sqrt(width), "b": jnp.zeros(width)}}

    def apply(p, x, width, depth):
        e = p["embed"]["embeddings"][x]
        h = jnp.tanh(e @ p["h"]["w"] + p["h"]["b"])
        table = P.Tag(kind="input", fan_in=TIED_VOCAB, fan_out=width, width_mult=width / TIED_BASE)
        mult = plugin.tied_multiplier(tied_readout(table), table)
        return h @ p["embed"]["embeddings"].T * mult, {"embed": e, "hidden": h}

    return init, apply


def test_infer_tags_from_checks_the_widths_before_building_the_model():
    """infer_tags_from built the model at base_width=-4 before infer_tags checked it: the model's own error came
    first (here a ZeroDivisionError; Haiku's a shape TypeError)."""
    with pytest.raises(ValueError, match="^base_width must be a positive number, got -4$"):
        P.infer_tags_from(lambda w: 1 / 0, base_width=-4, width=8)


def test_a_tied_table_is_input_and_its_readout_multiplier_goes_in_the_forward_pass():
    """A tied embedding reads (shapes) as the input layer it also is; a 'readout' rule on it was refused with advice
    for a mistaken regex or layout only. The line now names the tied path, and that path works: tied_readout(tag)
    is E's transpose (output, fan-in n, fan-out V), and muP's coordinate check on the tied model, widths 64 -> 512,
    passes with the multiplier m^-1 in the forward pass (output slope -0.13, hidden -0.02; without it the check fails,
    output slope +0.83..+0.88: the logits grow like m)."""
    from zoo.diagnostics.coord_any import coord_check
    from zoo.param.infer import tied_readout

    def model(n):
        return {"embed": {"embeddings": s(TIED_VOCAB, n)}, "h": {"w": s(n, n)}}

    with pytest.raises(ValueError, match=r"if it is a table tied to the readout .*tied_readout\(tag\), tag\)$"):
        tagged(model, rules={"^embed/": "readout"})
    table = P.infer_tags(model(TIED_BASE), model(256), base_width=TIED_BASE, width=256)["embed"]["embeddings"]
    readout = tied_readout(table)
    assert (table.kind, readout.kind, readout.fan_in, readout.fan_out, readout.width_mult) == ("input", "output",
                                                                                             256, TIED_VOCAB, 4.0)
    mup = P.get("mup")
    assert mup.tied_multiplier(readout, table) == pytest.approx(0.25)
    kx, ky = jax.random.split(jax.random.key(0))
    batch = {"x": jax.random.randint(kx, (4, 8), 0, TIED_VOCAB), "y": jax.random.randint(ky, (4, 8), 0, TIED_VOCAB)}
    result = coord_check(*tied_model(mup), mup, batch, widths=[TIED_BASE, 512], lr=1e-3)
    assert result["passed"] and all(abs(v).max() < 0.15 for v in result["slopes"].values()), result["slopes"]


def test_a_readout_to_one_output_stored_as_a_vector_takes_a_readout_rule():
    """A regression head h . v with v [n] reads (shapes) as a vector, and coord_check refuses its SP init (RMS like
    n^-1/2, a vector's is flat) naming a kind rule, but a 'readout' or 'output' rule on it was refused too ('vector
    by its shapes, but a rule makes it output'). Now it is output, fan-in n, fan-out 1, and muP's coordinate check,
    widths 64 -> 512, MSE loss, passes (slopes within 0.08 of 0)."""
    from zoo.diagnostics.coord_any import coord_check

    def init(key, width, depth):
        k1, k2, k3 = jax.random.split(key, 3)
        return {"embed": {"w": jax.random.normal(k1, (5, width)) / jnp.sqrt(5.0), "b": jnp.zeros(width)},
                "hidden": {"w": jax.random.normal(k2, (width, width)) / jnp.sqrt(width)},
                "v": jax.random.normal(k3, (width,)) / jnp.sqrt(width)}

    def apply(p, x, width, depth):
        h1 = jnp.tanh(x @ p["embed"]["w"] + p["embed"]["b"])
        h2 = jnp.tanh(h1 @ p["hidden"]["w"])
        return h2 @ p["v"], {"embed": h1, "hidden": h2}

    for role in ("readout", "output"):
        tag = P.infer_tags(init(jax.random.key(0), 40, 1), init(jax.random.key(0), 72, 1), base_width=40, width=72,
                           rules={"^v$": role})["v"]
        assert (tag.kind, tag.fan_in, tag.fan_out) == ("output", 72, 1)
    kx, ky = jax.random.split(jax.random.key(1))
    batch = {"x": jax.random.normal(kx, (16, 5)), "y": jax.random.normal(ky, (16,))}
    result = coord_check(init, apply, P.get("mup"), batch, widths=[64, 512], rules={"^v$": "readout"}, lr=1e-3,
                         loss=lambda out, y: jnp.mean((out - y) ** 2))
    assert result["passed"] and all(abs(v).max() < 0.1 for v in result["slopes"].values()), result["slopes"]
