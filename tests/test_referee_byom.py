"""Referee checks of "Bring your own model" (zoo.param.infer_tags, multiplier_free, rescale_init, coord_any) at
settings the other tests do not use: rules whose regex matches more than it means, axes growing by another ratio,
bad arguments, and the base width itself."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo.param as P
from zoo import optim


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
    updates, _ = tx.update(jax.tree.map(lambda p: 0.5 * p, params), tx.init(params), params)
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


def tiny_init(key: jax.Array, width: int, depth: int) -> dict:
    """A plain-pytree relu MLP 6 -> width -> 3 (SP init), depth unused."""
    k1, k2 = jax.random.split(key)
    return {"w_in": jax.random.normal(k1, (6, width)) / 6**0.5,
            "w_out": jax.random.normal(k2, (width, 3)) / width**0.5}


def tiny_apply(params: dict, x: jax.Array, width: int, depth: int):
    h = x @ params["w_in"]
    return jax.nn.relu(h) @ params["w_out"], {"embed": h}


def tiny_batch(n: int = 8, labels: int | None = None) -> dict:
    kx, ky = jax.random.split(jax.random.key(0))
    return {"x": jax.random.normal(kx, (n, 6)), "y": jax.random.randint(ky, (labels or n,), 0, 3)}


@pytest.mark.parametrize("change,error,needle", [
    (dict(widths=[32, 32]), ValueError, "the widths of a sweep must increase, got [32, 32]"),
    (dict(widths=[64, 32]), ValueError, "the widths of a sweep must increase, got [64, 32]"),
    (dict(widths=[32.0, 64.0]), ValueError, "at least two positive integer widths, got [32.0, 64.0]"),
    (dict(seeds=0), ValueError, "seeds must be a positive integer, got 0"),
    (dict(steps=0), ValueError, "steps must be a positive integer, got 0"),
    (dict(tol=-1.0), ValueError, "tol must be a positive number, got -1.0"),
    (dict(batch=tiny_batch(8, labels=4)), ValueError, "batch 'x' (8, 6) and 'y' (4,) must have the same leading"),
    (dict(batch={"x": tiny_batch()["x"]}), ValueError, "batch must be a dict with 'x' (inputs) and 'y'"),
    (dict(rules={"^w_in$": "query"}), ValueError, "a 'query' rule needs the attention head dim: coord_check(..., "
     "head_dim=d)"),
    (dict(apply=lambda p, x, w, d: tiny_apply(p, x, w, d)[0]), TypeError,
     "apply must return (output, intermediates), intermediates a dict of arrays; got one array"),
    (dict(apply=lambda p, x, w, d: (tiny_apply(p, x, w, d)[0], [x])), TypeError,
     "got a tuple of 2 with list intermediates"),
])
def test_bad_coord_checks_are_one_line(change, error, needle):
    """A repeated width "passed" (slopes fitted to log 1 = 0, numpy's RankWarning); decreasing widths ran; the rest
    raised from inside jax or numpy (broadcasting, unpacking, a zero-size max, a float shape), or named arguments of
    multiplier_free, which coord_check calls (a query without head dims)."""
    from zoo.diagnostics.coord_any import coord_check

    kwargs = dict(init=tiny_init, apply=tiny_apply, plugin=P.get("mup"), batch=tiny_batch(), widths=[32, 64],
                  seeds=1, lr=1e-3)
    kwargs.update(change)
    with pytest.raises(error) as err:
        coord_check(**kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("plugin", [P.get("mup", readout_mult=2.0), P.get("depth_mup"), P.get("ntk_mup", s=0.5),
                                    P.get("mean_field")])
def test_at_the_base_width_the_examples_run_and_every_plugin_is_sp(plugin, capsys):
    """The base width is where the LR is tuned, but infer_tags cannot see which axes grow there: the examples raised
    ValueError at --width = --base-width. infer_tags_from reads the kinds against twice the width with multiplier 1:
    the Haiku MLP's kinds are right, every width factor (init, LR, gradient pre-scale) is 1 (readout_mult still acts
    on the readout), the tags elsewhere equal infer_tags', and the example trains (2 steps) at width 48 = base."""
    from param_helpers import example

    m = example("haiku_mlp")

    def shapes(w):
        return jax.eval_shape(lambda k: m.init(k, w, 1), jax.random.key(0))

    tags = P.infer_tags_from(shapes, base_width=48, width=48)
    got = {f"{k}/{n}": (t.kind, t.fan_in, t.width_mult) for k, v in tags.items() for n, t in v.items()}
    assert got == {"embed/w": ("input", 3072, 1.0), "embed/b": ("vector", 1, 1.0), "hidden_0/w": ("hidden", 48, 1.0),
                   "hidden_0/b": ("vector", 1, 1.0), "readout/w": ("output", 48, 1.0), "readout/b": ("scalar", 1, 1.0)}
    free = P.multiplier_free(plugin, tags)
    for t in jax.tree.leaves(tags):
        c = 2.0 if (t.kind == "output" and plugin.readout_mult == 2.0) else 1.0
        assert [float(f) for f in (free.init_factor(t), free.lr_mult(t), free.grad_scale(t))] == [c, c, c], t
    assert P.infer_tags_from(shapes, base_width=48, width=80) == P.infer_tags(shapes(48), shapes(80), base_width=48,
                                                                              width=80)
    loss = m.main(["--width", "48", "--base-width", "48", "--depth", "1", "--batch-size", "8", "--steps", "2",
                   "--param", "depth_mup"])
    assert np.isfinite(loss) and "step 2: train loss" in capsys.readouterr().out


def embed_init(key: jax.Array, width: int, depth: int, std: float | None = None) -> dict:
    """tiny_init with an embedding table [50, width] of std `std` (None: Flax Linen nn.Embed's 1/sqrt(width))."""
    k1, k2 = jax.random.split(key)
    std = width**-0.5 if std is None else std
    return {**tiny_init(k2, width, depth), "table": std * jax.random.normal(k1, (50, width))}


def embed_apply(params: dict, x: jax.Array, width: int, depth: int):
    e = params["table"][x[:, 0]] + x[:, 1:].astype(jnp.float32) @ params["w_in"]
    return jax.nn.relu(e) @ params["w_out"], {"embed": e}


def test_coord_check_refuses_an_init_that_is_not_sp():
    """The multiplier-free form rescales the model's own init, assumed SP's. Linen's nn.Embed draws std
    1/sqrt(features): an input-kind table whose RMS falls like n^-1/2 (measured -0.49 between widths 32 and 256,
    seed 0), so under muP the embedding is not Theta(1). coord_check ran and failed with slopes that blamed the
    plugin; it now names the leaf. A width-independent std (Haiku's hk.Embed, std 1) passes the check and runs."""
    from zoo.diagnostics.coord_any import coord_check

    kx, ky = jax.random.split(jax.random.key(3))
    batch = {"x": jnp.concatenate([jax.random.randint(kx, (8, 1), 0, 50), jax.random.randint(ky, (8, 6), -2, 3)],
                                  axis=1), "y": jax.random.randint(ky, (8,), 0, 3)}
    kwargs = dict(apply=embed_apply, plugin=P.get("mup"), batch=batch, widths=[32, 256], seeds=1, lr=1e-3)
    with pytest.raises(ValueError) as err:
        coord_check(embed_init, **kwargs)
    msg = str(err.value)
    assert "'table' (input)" in msg and "like n^-0.49" in msg and "\n" not in msg, msg
    result = coord_check(lambda k, w, d: embed_init(k, w, d, std=1.0), **kwargs)
    assert set(result["slopes"]) == {"embed", "output"}


def test_critical_biases_with_no_multiplier_free_form_are_refused():
    """critical with mu = 1 passed multiplier_free, but its sigma_b (std of residual-branch biases, N(0, sigma_b^2))
    was dropped: the free form's factor on such a bias was 1, so the model's zero biases stayed zero (std 0, not
    0.4). Now one line; sigma_b = 0 still has a free form, whose hidden factor is sigma_w."""
    with pytest.raises(ValueError) as err:
        P.multiplier_free(P.get("critical", sigma_w=1.4, sigma_b=0.4, mu=1.0))
    assert "residual-branch biases with std 0.4" in str(err.value) and "\n" not in str(err.value)
    free = P.multiplier_free(P.get("critical", sigma_w=1.4, sigma_b=0.0, mu=1.0))
    hidden = P.Tag("hidden", 64, 64, width_mult=2.0, branch=True, depth=4, base_depth=1)
    assert float(free.init_factor(hidden)) == pytest.approx(1.4)


def eqx_init(key: jax.Array, width: int, depth: int) -> dict:
    """An Equinox-style model: Embedding weight [50, width] (std 1), Linear weight [3, width] (fan-in std)."""
    k1, k2 = jax.random.split(key)
    return {"embed": {"weight": jax.random.normal(k1, (50, width))},
            "head": {"weight": jax.random.normal(k2, (3, width)) / width**0.5}}


def eqx_apply(params: dict, x: jax.Array, width: int, depth: int):
    e = params["embed"]["weight"][x[:, 0]]
    return jax.nn.relu(e) @ params["head"]["weight"].T, {"embed": e}


def test_an_equinox_embedding_under_out_in_needs_its_layout_and_coord_check_says_so():
    """Under layout="out_in" an Equinox embedding [vocab, width] reads as a readout [classes, width]: output kind,
    under muP LR x m^-1 and init x m^-1/2, silently. Shapes cannot tell (README: give it 'in_out'); coord_check's
    init check now catches it (std 1 at every width, slope 0, where an output's SP init falls like n^-1/2) and names
    the layout rule; with the rule it is input, fan-in 50, and runs."""
    from zoo.diagnostics.coord_any import coord_check

    kx, ky = jax.random.split(jax.random.key(5))
    batch = {"x": jax.random.randint(kx, (8, 1), 0, 50), "y": jax.random.randint(ky, (8,), 0, 3)}
    kwargs = dict(apply=eqx_apply, plugin=P.get("mup"), batch=batch, widths=[32, 256], seeds=1, lr=1e-3,
                  layout="out_in")
    with pytest.raises(ValueError) as err:
        coord_check(eqx_init, **kwargs)
    assert "'embed/weight' (output)" in str(err.value) and "under out_in: 'in_out'" in str(err.value)
    rules = {r"^embed/weight$": "in_out"}
    tags = P.infer_tags_from(lambda w: jax.eval_shape(lambda k: eqx_init(k, w, 1), jax.random.key(0)),
                             base_width=32, width=256, layout="out_in", rules=rules)
    assert (tags["embed"]["weight"].kind, tags["embed"]["weight"].fan_in) == ("input", 50)
    assert set(coord_check(eqx_init, rules=rules, **kwargs)["slopes"]) == {"embed", "output"}


def test_the_readout_bias_is_no_kind_before_the_readout():
    """coord_check predicts each layer's slope from the kinds before the readout; the readout's bias (a scalar beside
    its weight, unmarked: the examples give no readout rule; infer_tags now marks it readout_bias, as zoo's own heads
    are) was counted among them, which turned NTK's predicted
    hidden slope from -1/2 into 0 (zoo.param.predict: a scalar's gradient sums over the width). The Equinox MLP under
    NTK at widths 96 and 480 (seed 3, 2 seeds) measures -0.50 +- 0.03 in every hidden layer: it FAILED against 0, and
    passes against -1/2 at the default tol 0.15."""
    from param_helpers import example, images

    from zoo.audit.laws import faithful_d
    from zoo.diagnostics.coord_any import coord_check, inner_kinds

    m = example("equinox_mlp")
    tags = P.infer_tags_from(lambda w: jax.eval_shape(lambda k: m.init(k, w, 2), jax.random.key(0)), base_width=96,
                             width=480, layout="out_in")
    assert [tags.layers[3].bias.kind, tags.layers[3].bias.role] == ["scalar", "readout_bias"]  # as zoo's heads
    assert inner_kinds(tags) == {"input", "vector", "hidden"}
    assert faithful_d(P.get("ntk"), tags.layers[3].bias) == 0.0  # the audit's d* of a readout bias (was -1/2)
    result = coord_check(m.init, m.apply, P.get("ntk"), images(12), widths=[96, 480], depth=2, layout="out_in",
                         seed=3, seeds=2)
    assert result["expected"].total["hidden"] == -0.5
    for layer in ("hidden_0", "hidden_1"):
        assert np.all(np.abs(result["slopes"][layer] + 0.5) <= 0.05), result["slopes"][layer]
    assert result["passed"]
