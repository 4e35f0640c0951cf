"""Referee checks of "Bring your own model" (zoo.param.infer_tags, multiplier_free, rescale_init, coord_any) at
settings the other tests do not use: rules whose regex matches more than it means, axes growing by another ratio,
bad arguments, and the base width itself."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo.param as P


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
