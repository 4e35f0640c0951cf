"""Kernels whose fan-out spans several axes (Flax DenseGeneral, attention query/key/value [n, heads, head_dim]): the
rule "out_axes=k" gives fan_in n and fan_out heads * head_dim, the init follows m^-1/2 and Muon sees [n, heads *
head_dim]; without it a growing head count is an error naming the rule."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn
from flax import nnx
from param_helpers import flat_tags, kinds, s

import zoo.param as P
from zoo import optim
from zoo.models.layers import tagged_param
from zoo.optim import OptimConfig, Route
from zoo.train.step import run_once_options

N0, HEADS0, HEAD_DIM = 64, 4, 16  # base width n0 = heads0 * head_dim; the head count grows with width
QKV = {r"^q/": "out_axes=2"}


def attention(width: int, head_dim: int = HEAD_DIM, bias: bool = True) -> dict:
    """Abstract Flax MultiHeadDotProductAttention-like params: query [n, heads, d] (+ bias [heads, d], which shows
    the kernel's two fan-out axes), out [heads, d, n] (+ bias [n]), with heads = width / head_dim."""
    heads, s = width // head_dim, lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    return {"q": {"kernel": s(width, heads, head_dim), **({"bias": s(heads, head_dim)} if bias else {})},
            "out": {"kernel": s(heads, head_dim, width), "bias": s(width)}}


def tags_at(width: int, rules: dict | None = None, head_dim: int = HEAD_DIM, base_head_dim: int = HEAD_DIM,
            bias: bool = True) -> dict:
    return P.infer_tags(attention(N0, base_head_dim, bias), attention(width, head_dim, bias), base_width=N0,
                        width=width, rules=rules)


def fans(tag) -> tuple:
    return tag.kind, tag.fan_in, tag.fan_out, tag.out_axes


def init_rms(width: int, rules: dict, bias: bool = True) -> float:
    """The RMS of the query kernel drawn with muP's std from its tag (std0 = base fan_in^-1/2, zoo's tagged_param)."""
    tag = tags_at(width, rules, bias=bias)["q"]["kernel"]

    def rms(key):
        return jnp.sqrt(jnp.mean(jnp.square(tagged_param(key, P.get("mup"), tag,
                                                         (width, width // HEAD_DIM, HEAD_DIM))[...])))

    return float(run_once(rms, jax.random.key(0)))


def run_once(fn, *args):
    """fn(*args) as one program compiled to run once (XLA backend optimisation off), not op by op."""
    return jax.jit(fn).lower(*args).compile(compiler_options=run_once_options())(*args)


def test_the_rule_gives_the_true_fans_and_the_m_minus_half_init():
    """[n, heads, 16] with heads = n/16, n0 = 64, at n = 256: fan_in 256, fan_out 256, hidden (the output kernel as
    before, the bias a vector). muP's init RMS measured at n = 256 and 1024 is 1/sqrt(n) within 1% and its slope in m
    is -1/2 within 0.01 (std0 (n0)^-1/2 times m^-1/2)."""
    tags = tags_at(256, QKV)
    assert fans(tags["q"]["kernel"]) == ("hidden", 256, 256, 2)
    assert fans(tags["q"]["bias"]) == ("vector", 1, 256, 2)
    assert fans(tags["out"]["kernel"]) == ("hidden", 256, 256, 1)
    assert (tags["q"]["kernel"].base_fan_in, tags["q"]["kernel"].base_fan_out) == (64, 64)
    rms = {n: init_rms(n, QKV) for n in (256, 1024)}
    for n, r in rms.items():
        assert math.isclose(r, n**-0.5, rel_tol=0.01), (n, r)
    slope = math.log(rms[1024] / rms[256]) / math.log(1024 / 256)
    assert abs(slope + 0.5) < 0.01, slope
    cfg = OptimConfig(name="muon", muon_io=True)  # Muon's base-shape constant: the same at every width
    assert optim.spectral_constant(cfg, tags["q"]["kernel"]) == \
        optim.spectral_constant(cfg, tags_at(1024, QKV)["q"]["kernel"]) == 0.2 * 8


def test_without_the_rule_a_growing_head_count_is_an_error_and_a_kind_rule_keeps_the_old_reading():
    """Unruled and without a bias (none shows its fan-out axes), [n, heads, d] with a growing head count has both
    width axes in the fan-in (no kind): one line naming out_axes=2. A kind rule keeps the last-axis reading, fan_in
    n * heads = 4096 and fan_out 16 at n = 256, whose init RMS falls like m^-1 (the bug). A growing head dim at a fixed
    head count reads as before (documented). With its bias [heads, d] the kernel needs no rule."""
    with pytest.raises(ValueError) as err:
        tags_at(256, bias=False)
    assert "'^q/kernel$': 'out_axes=2'" in str(err.value) and "\n" not in str(err.value), str(err.value)
    old = {r"^q/kernel$": "hidden"}
    assert fans(tags_at(256, old, bias=False)["q"]["kernel"]) == ("hidden", 4096, 16, 1)
    slope = math.log(init_rms(1024, old, False) / init_rms(256, old, False)) / math.log(4)
    assert abs(slope + 1.0) < 0.01, slope
    fixed_heads = tags_at(256, head_dim=64, bias=False)["q"]["kernel"]  # [256, 4, 64] over [64, 4, 16]
    assert fans(fixed_heads) == ("hidden", 1024, 64, 1)
    assert fans(tags_at(256)["q"]["kernel"]) == fans(tags_at(256, head_dim=64)["q"]["kernel"]) == \
        ("hidden", 256, 256, 2)
    assert fans(tags_at(256, QKV, head_dim=64)["q"]["kernel"]) == ("hidden", 256, 256, 2)


def test_out_in_stacked_and_conflicting_rules():
    """out_in [heads, d, n] with out_axes=2 and a stacked [L, n, heads, d]: the same fans; two out_axes rules on one
    leaf conflict."""
    s = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
    base, wide = {"w": s(4, 16, 64), "st": s(3, 64, 4, 16)}, {"w": s(16, 16, 256), "st": s(3, 256, 16, 16)}
    tags = P.infer_tags(base, wide, base_width=64, width=256, layout="out_in",
                        rules={"^w$": "out_axes=2", "^st$": ("stacked", "in_out", "out_axes=2")})
    assert fans(tags["w"]) == fans(tags["st"]) == ("hidden", 256, 256, 2)
    with pytest.raises(ValueError, match="conflicting roles"):
        P.infer_tags({"w": base["w"]}, {"w": wide["w"]}, base_width=64, width=256,
                     rules={"^w$": "out_axes=2", "w": "out_axes=3"})
    with pytest.raises(ValueError, match="unknown role 'out_axes=0'"):
        P.infer_tags({"w": base["w"]}, {"w": wide["w"]}, base_width=64, width=256, rules={"^w$": "out_axes=0"})


@pytest.mark.parametrize("shape, layout, want", [
    ((64, 4, 16), "in_out", ((-3,), (-2, -1))),
    ((3, 64, 4, 16), "in_out", ((-3,), (-2, -1))),  # a stack of 3 layers
    ((4, 16, 64), "out_in", ((-1,), (-3, -2))),
    ((3, 4, 16, 64), "out_in", ((-1,), (-3, -2))),
])
def test_matrix_axes_reduce_the_fan_in_and_output_the_fan_out_axes(shape, layout, want):
    dims = Route("spectral", 64, layout, out_axes=2).matrix_axes(shape)
    assert (tuple(dims.reduction_axis), tuple(dims.output_axis)) == want


@pytest.mark.parametrize("layout, stacked", [("in_out", False), ("in_out", True), ("out_in", False),
                                             ("out_in", True)])
def test_muon_update_equals_the_2d_kernels(layout, stacked):
    """optax's Muon on [n, heads, d] (out_in [heads, d, n]; stacked on 3 layers) with the routes of the inferred tags
    equals Muon on the kernel reshaped to [n, heads * d] ([heads * d, n]), to 1e-6, over two steps. In float64: in
    float32 the two orders of the same sums differ by up to 1.4e-6 on entries of 0.16 after Newton-Schulz."""
    n, heads, d, layers = 64, 4, 16, 3
    core = (n, heads, d) if layout == "in_out" else (heads, d, n)
    lead = (layers,) if stacked else ()
    s = lambda shape: jax.ShapeDtypeStruct(lead + shape, jnp.float32)  # noqa: E731
    grow = (4 * n, 4 * heads, d) if layout == "in_out" else (4 * heads, d, 4 * n)
    rules = {"^w$": ("out_axes=2",) + (("stacked",) if stacked else ())}
    tags = P.infer_tags({"w": s(core)}, {"w": s(grow)}, base_width=n, width=4 * n, layout=layout, rules=rules)
    route = optim.routes(OptimConfig(name="muon"), tags)["w"]
    assert (route.family, route.fan_in, route.out_axes) == ("spectral", 4 * n, 2)
    flat = (4 * n, 4 * heads * d) if layout == "in_out" else (4 * heads * d, 4 * n)
    flat_dims = optax.contrib.MuonDimensionNumbers(*((-2, -1) if layout == "in_out" else (-1, -2)))
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        grads = [jnp.asarray(rng.standard_normal(lead + grow)) for _ in range(2)]
        w = jnp.zeros(lead + grow, jnp.float64)
        three = optax.contrib.scale_by_muon(weight_dimension_numbers={"w": route.matrix_axes(w.shape)})
        two = optax.contrib.scale_by_muon(weight_dimension_numbers={"w": flat_dims})

        def both(grads, w):  # the two steps of both, one program (op by op, each eager op compiled on its own)
            s3, s2, out = three.init({"w": w}), two.init({"w": w.reshape(lead + flat)}), []
            for g in grads:
                u3, s3 = three.update({"w": g}, s3, {"w": w})
                u2, s2 = two.update({"w": g.reshape(lead + flat)}, s2, {"w": w.reshape(lead + flat)})
                out.append((u3["w"], u2["w"]))
            return out

        for u3, u2 in run_once(both, grads, w):
            assert u3.dtype == jnp.float64
            np.testing.assert_allclose(u3.reshape(lead + flat), u2, atol=1e-6, rtol=0)
        assert float(jnp.abs(u2).max()) > 0.1  # a real update, not zeros


def test_the_audit_sees_the_matrix_muon_sees():
    """zoo.audit's spectral measures of a [n, heads, d] kernel with out_axes=2: the matrix is [n, heads * d] (its
    largest singular value and Muon's step size as the 2-D kernel's); before, the audit's route left out out_axes
    and its reshape took one output axis."""
    from zoo.audit import measure
    from zoo.optim import Route

    x = jax.random.normal(jax.random.key(0), (32, 4, 8))
    flat = x.reshape(32, 32)
    route, flat_route = Route("spectral", 32, "in_out", out_axes=2), Route("spectral", 32, "in_out")
    np.testing.assert_array_equal(measure.as_matrices(x, route)[0], flat)
    top = float(np.linalg.svd(np.asarray(flat), compute_uv=False)[0])
    g = jax.random.normal(jax.random.key(2), x.shape)

    def measures(x, flat, g, key):  # one program (op by op, each eager op compiled on its own)
        return (measure.spectral_norm(x, route, key), measure.spectral_step(-0.5 * x, g, route, 5),
                measure.spectral_step(-0.5 * flat, g.reshape(32, 32), flat_route, 5))

    norm, step, flat_step = map(float, run_once(measures, x, flat, g, jax.random.key(1)))
    np.testing.assert_allclose(norm, top, rtol=1e-4)
    np.testing.assert_allclose(step, flat_step, rtol=1e-5)


def linen_attention(n: int, heads: int, head_dim: int, bias: bool) -> dict:
    module = nn.MultiHeadDotProductAttention(heads, qkv_features=heads * head_dim, out_features=n, use_bias=bias)
    return jax.eval_shape(lambda: module.init(jax.random.key(0), jnp.ones((1, 3, n))))


@pytest.mark.parametrize("bias", [True, False])
def test_flax_attention_kernels_with_a_growing_head_dim_have_their_true_fans(bias):
    """Linen's MultiHeadDotProductAttention at 3 heads, head_dim 4 -> 12 (n 12 -> 36): query/key/value kernels
    [n, 3, d] were read with one fan-out axis, hidden of fan-in 3n = 108 and fan-out d = 12 (a fan-in init std off
    by sqrt(3), Muon orthogonalising [108, 12]), and the biases [3, d] input layers of fan-in 3, silently. Their
    bias [3, d] (the kernel's end) or, bias-free, Flax's names now give 2 fan-out axes: hidden (36, 36), the biases
    vectors of 36; out [3, d, n] stays (36, 36) with one."""
    got = flat_tags(P.infer_tags(linen_attention(12, 3, 4, bias), linen_attention(36, 3, 12, bias), base_width=12,
                                 width=36))
    for name in ("query", "key", "value"):
        assert got[f"params/{name}/kernel"] == ("hidden", 36, 36, "in_out", 2)
        assert not bias or got[f"params/{name}/bias"] == ("vector", 1, 36, "in_out", 2)
    assert got["params/out/kernel"] == ("hidden", 36, 36, "in_out", 1)


def test_nnx_linear_general_is_read_by_its_bias():
    """nnx.LinearGeneral(n, (2, n / 2)) kernel [n, 2, n / 2] with bias [2, n / 2] (n 10 -> 30, the head dim a width
    axis): hidden of fan-in 30 and fan-out 30, its bias a vector (before: fan-in 60, fan-out 15; the bias an input
    layer of fan-in 2); and back, (2, n / 2) -> n over axes (-2, -1), hidden (30, 30) with one fan-out axis."""
    def params(n):
        model = nnx.eval_shape(lambda: nnx.Sequential(
            nnx.LinearGeneral(n, (2, n // 2), rngs=nnx.Rngs(0)),
            nnx.LinearGeneral((2, n // 2), n, axis=(-2, -1), rngs=nnx.Rngs(0))))
        return nnx.state(model, nnx.Param)

    got = flat_tags(P.infer_tags(params(10), params(30), base_width=10, width=30))
    assert got["layers/0/kernel"] == ("hidden", 30, 30, "in_out", 2)
    assert got["layers/0/bias"] == ("vector", 1, 30, "in_out", 2)
    assert got["layers/1/kernel"] == ("hidden", 30, 30, "in_out", 1)


def test_a_conv_named_query_keeps_one_fan_out_axis():
    """Flax's attention names give a bias-free query/key/value kernel [n, heads, d] two fan-out axes; a conv so named,
    [3, n, n] (fixed first axis), is no such kernel: hidden of fan-in 3n and fan-out n (n 8 -> 24), not an error
    asking for the out_axes=2 it would have been given."""
    def conv(n):
        return {"query": {"kernel": s(3, n, n)}, "key": {"kernel": s(n, 2, n // 2)}}

    got = flat_tags(P.infer_tags(conv(8), conv(24), base_width=8, width=24))
    assert got == {"query/kernel": ("hidden", 72, 24, "in_out", 1), "key/kernel": ("hidden", 24, 24, "in_out", 2)}


def test_an_attentions_value_module_keeps_its_name():
    """zoo.tree.key_path dropped every path part named "value" (meant for nnx's and orbax's leaf key), so Flax
    attention's `value` module lost its name: 'attn/value/kernel' read 'attn/kernel', the README's rule
    r"/(query|key|value)/": "out_axes=2" missed it, and at width 72 with 4 heads its kernel [72, 4, 18] read hidden
    with fan-in 288 and fan-out 18 (80 and 80 at width 80 are right) and its bias [4, 18] as an input layer."""
    from flax import nnx

    class Net(nnx.Module):
        def __init__(self, n: int):
            self.attn = nnx.MultiHeadAttention(num_heads=4, in_features=n, decode=False, rngs=nnx.Rngs(0))

    def params(n: int):
        return nnx.state(nnx.eval_shape(lambda: Net(n)), nnx.Param)

    tags = kinds(P.infer_tags(params(40), params(72), base_width=40, width=72,
                              rules={r"/(query|key|value)/": "out_axes=2"}))
    for role in ("query", "key", "value"):
        assert tags[f"attn/{role}/kernel/.value"] == ("hidden", 72, 72), tags
        assert tags[f"attn/{role}/bias/.value"][0] == "vector", tags
