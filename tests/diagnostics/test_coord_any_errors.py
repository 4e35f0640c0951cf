"""zoo.diagnostics.coord_any.coord_check refuses in one line, before anything is compiled, what it cannot check:
bad sizes, batches and arguments, an apply that returns no intermediates, and an init that is not SP's (which the
multiplier-free form assumes), naming the leaf and the rule or layout that fixes it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
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


def embed_init(key: jax.Array, width: int, depth: int, std: float | None = None) -> dict:
    """tiny_init with an embedding table [50, width] of std `std` (None: Flax Linen nn.Embed's 1/sqrt(width))."""
    k1, k2 = jax.random.split(key)
    std = width**-0.5 if std is None else std
    return {**tiny_init(k2, width, depth), "table": std * jax.random.normal(k1, (50, width))}


def embed_apply(params: dict, x: jax.Array, width: int, depth: int):
    e = params["table"][x[:, 0]] + x[:, 1:].astype(jnp.float32) @ params["w_in"]
    return jax.nn.relu(e) @ params["w_out"], {"embed": e}


def eqx_init(key: jax.Array, width: int, depth: int) -> dict:
    """An Equinox-style model: Embedding weight [50, width] (std 1), Linear weight [3, width] (fan-in std)."""
    k1, k2 = jax.random.split(key)
    return {"embed": {"weight": jax.random.normal(k1, (50, width))},
            "head": {"weight": jax.random.normal(k2, (3, width)) / width**0.5}}


def eqx_apply(params: dict, x: jax.Array, width: int, depth: int):
    e = params["embed"]["weight"][x[:, 0]]
    return jax.nn.relu(e) @ params["head"]["weight"].T, {"embed": e}


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


@pytest.mark.parametrize("kwargs,needle", [
    (dict(widths=[32, 64], base_depth=0), "base_depth must be a positive integer, got 0"),
    (dict(depths=[4, 8], width=0), "width must be a positive integer, got 0"),
    (dict(widths=[32, 64], depth=-1), "depth must be a positive integer, got -1"),
])
def test_coord_check_refuses_bad_sizes_before_calling_the_model(kwargs, needle):
    """base_depth=0 ran (and passed) as base depth = depth, `0 or depth`; a width or depth the model cannot be built
    at reached the model's own init first (here its ZeroDivisionError)."""
    from zoo.diagnostics.coord_any import coord_check

    def init(key, width, depth):
        return tiny_init(key, width, depth) if width > 0 and depth > 0 else 1 / 0

    with pytest.raises(ValueError) as err:
        coord_check(init, tiny_apply, P.get("mup"), tiny_batch(), seeds=1, lr=1e-3, **kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def small_init(key, width, depth):
    k1, k2 = jax.random.split(key)
    return {"embed": {"w": jax.random.normal(k1, (5, width)) / jnp.sqrt(5.0)},
            "head": {"w": jax.random.normal(k2, (width, 3)) / jnp.sqrt(width)}}


def small_apply(p, x, width, depth):
    h = jnp.tanh(x @ p["embed"]["w"])
    return h @ p["head"]["w"], {"embed": h}


@pytest.mark.parametrize("kwargs,needle", [
    (dict(head_dim=0), "head_dim must be a positive integer (or a function of the width giving one), got 0 at width "
     "32"),
    (dict(head_dim=lambda w: w // 64), "got 0 at width 32"),
    (dict(lr="1e-3"), "lr must be a positive number, got '1e-3'"),
    (dict(seed=0.5), "seed must be an integer, got 0.5"),
    (dict(y=jnp.zeros(8)), "batch 'y' must hold integer labels for the cross-entropy loss, got float32"),
    (dict(y=jnp.full((8,), 7)), "batch 'y' holds labels from 7 to 7, but the output has 3 classes (its last axis): "
     "labels must lie in [0, 3)"),
    (dict(y=jnp.arange(8) - 1), "labels from -1 to 6"),
    (dict(y=jnp.zeros((8, 2), int)), "batch 'y' (8, 2) must have the output's shape (8, 3) less its last (class) "
     "axis"),
])
def test_coord_check_refuses_bad_arguments_in_one_line(kwargs, needle):
    """Before anything is compiled: head_dim=0 (no query rule) divided by zero in the head-dim slope
    (ZeroDivisionError); lr='1e-3' a TypeError "'<' not supported"; seed=0.5 jax's "PRNG key seed must be an
    integer; got JitTracer"; float labels optax's dtype TypeError, labels (8, 2) for logits (8, 3) its shape error;
    and labels out of [0, classes) ran with no word (optax's cross-entropy: NaN for 7 of 3 classes, and -1 read as
    class 2)."""
    from zoo.diagnostics.coord_any import coord_check

    y = kwargs.pop("y", jnp.arange(8) % 3)
    batch = {"x": jax.random.normal(jax.random.key(0), (8, 5)), "y": y}
    with pytest.raises(ValueError) as err:
        coord_check(small_init, small_apply, P.get("mup"), batch, widths=[32, 64], seeds=1, steps=1, **kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)
