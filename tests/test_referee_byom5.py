"""Referee checks of "Bring your own model" tagging and the audit, fifth round: kernels stored [..., out, in]
(Haiku's ConvTranspose without a bias), kernels whose fan-out spans several axes (Flax's DenseGeneral and attention,
Linen and NNX), and the audit's laws on a model of both, at widths the other tests do not use."""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn
from flax import nnx
from param_helpers import kinds, s

import zoo.param as P
from zoo import optim
from zoo.audit import AnyRun, audit
from zoo.optim import OptimConfig, Route
from zoo.param import families
from zoo.param.tags import Tag
from zoo.tree import key_path


def flat_tags(tags) -> dict:
    return {key_path(p): (t.kind, t.fan_in, t.fan_out, t.layout, t.out_axes)
            for p, t in jax.tree_util.tree_flatten_with_path(tags)[0]}


def deconvs(x: jax.Array, width: int) -> jax.Array:
    """Bias-free transposed convs 2x2, stride 2: 3 channels to n, n to n, n to 5 (Haiku stores w [2, 2, out, in])."""
    h = jax.nn.relu(hk.Conv2DTranspose(width, 2, stride=2, with_bias=False)(x))
    h = jax.nn.relu(hk.Conv2DTranspose(width, 2, stride=2, with_bias=False)(h))
    return hk.Conv2DTranspose(5, 2, stride=2, with_bias=False)(h)


def haiku_shapes(fn, width: int, x_shape: tuple) -> dict:
    return jax.eval_shape(lambda: hk.transform(lambda x: fn(x, width)).init(jax.random.key(0), jnp.zeros(x_shape)))


def test_a_haiku_conv_transpose_without_a_bias_is_read_out_then_in():
    """hk.Conv2DTranspose stores w [kh, kw, out, in]. Without a bias nothing in the shapes told, and infer_tags read
    it [..., in, out]: at widths 12 -> 36 the first layer (3 to n) was tagged output of fan-in 4n = 144 and the last
    (n to 5) input of fan-in 20, swapping their init and LR exponents, without a word. Haiku's module name
    (conv2_d_transpose, _1, _2) now gives the layout spatial_out_in: input (12, 36), hidden (144, 36), output
    (144, 5), as the same layers stored [..., in, out] read."""
    got = flat_tags(P.infer_tags(haiku_shapes(deconvs, 12, (1, 1, 1, 3)), haiku_shapes(deconvs, 36, (1, 1, 1, 3)),
                                 base_width=12, width=36))
    assert got == {"conv2_d_transpose/w": ("input", 12, 36, "spatial_out_in", 1),
                   "conv2_d_transpose_1/w": ("hidden", 144, 36, "spatial_out_in", 1),
                   "conv2_d_transpose_2/w": ("output", 144, 5, "spatial_out_in", 1)}


@pytest.mark.parametrize("module,kernel", [(hk.Conv1DTranspose, 3), (hk.Conv3DTranspose, (2, 1, 3))])
def test_every_haiku_conv_transpose_rank_is_recognised(module, kernel):
    """Conv1DTranspose w [k, out, in] and Conv3DTranspose w [2, 1, 3, out, in], from 2 channels to n (n = 6 -> 10,
    an odd ratio): input layers of fan-in 2 * prod(kernel), not output layers of fan-in prod(kernel) * n."""
    def net(x, width):
        return module(width, kernel, with_bias=False)(x)

    x_shape = (1, 4, 2) if module is hk.Conv1DTranspose else (1, 4, 4, 4, 2)
    (name, tag), = flat_tags(P.infer_tags(haiku_shapes(net, 6, x_shape), haiku_shapes(net, 10, x_shape),
                                          base_width=6, width=10)).items()
    assert tag == ("input", 2 * int(np.prod(kernel)), 10, "spatial_out_in", 1), name


def renamed(n: int) -> dict:
    """A transposed conv in a module not named as Haiku names it, from 3 channels to n with its bias."""
    return {"up": {"w": s(3, 3, n, 3), "b": s(n)}, "mid": {"w": s(3, 3, n, n)}}


def test_the_bias_line_names_the_layout_rule_and_the_rule_reads_the_kernel():
    """A renamed ConvTranspose with a bias is refused by its bias (6a99ee4), but the line said to swap the array's
    axes, which the user's own model cannot; it names the rule now, and the rule (on a bias-free n to n kernel too,
    which reads alike either way but for Muon's matrix) tags them as the layers they are."""
    with pytest.raises(ValueError, match=r"give its layout: rules=\{'\^up/w\$': 'spatial_out_in'\}"):
        P.infer_tags(renamed(8), renamed(20), base_width=8, width=20)
    tags = P.infer_tags(renamed(8), renamed(20), base_width=8, width=20, rules={"^(up|mid)/w$": "spatial_out_in"})
    assert kinds(tags)["up/w"] == ("input", 27, 20) and kinds(tags)["mid/w"] == ("hidden", 180, 20)
    assert Route("spectral", 180, tags["mid"]["w"].layout).matrix_axes((3, 3, 20, 20)) == \
        optax.contrib.MuonDimensionNumbers((-4, -3, -1), -2)


@pytest.mark.parametrize("stacked", [False, True])
def test_muon_on_an_out_in_kernel_equals_muon_on_the_kernel_stored_in_out(stacked):
    """Muon on a [2, 2, out, in] kernel (7 -> 5 channels; a stack of 3 of them) with the inferred route equals Muon on
    the same kernel stored [2, 2, in, out], to 1e-6 in float64 over two steps. Read in_out, its n to n kernel was
    orthogonalised as the matrix [kh * kw * out, in]: another update."""
    lead = (3,) if stacked else ()
    rules = {"^conv2_d_transpose/": "stacked"} if stacked else None

    def tree(n):
        return {"conv2_d_transpose": {"w": s(*lead, 2, 2, n, 7)}}

    tags = P.infer_tags(tree(5), tree(10), base_width=5, width=10, rules=rules)
    route = optim.routes(OptimConfig(name="muon", muon_io=True), tags)["conv2_d_transpose"]["w"]
    rng = np.random.default_rng(0)
    swap = lambda x: jnp.swapaxes(x, -1, -2)  # noqa: E731
    with jax.enable_x64(True):
        w = jnp.zeros((*lead, 2, 2, 10, 7), jnp.float64)
        mine = optax.contrib.scale_by_muon(weight_dimension_numbers={"w": route.matrix_axes(w.shape)})
        flax_like = optax.contrib.scale_by_muon(weight_dimension_numbers={
            "w": Route("spectral", 28, "in_out").matrix_axes(swap(w).shape)})
        s1, s2 = mine.init({"w": w}), flax_like.init({"w": swap(w)})
        for _ in range(2):
            g = jnp.asarray(rng.standard_normal(w.shape))
            u1, s1 = mine.update({"w": g}, s1, {"w": w})
            u2, s2 = flax_like.update({"w": swap(g)}, s2, {"w": swap(w)})
            np.testing.assert_allclose(swap(u1["w"]), u2["w"], atol=1e-6, rtol=0)
        assert float(jnp.abs(u2["w"]).max()) > 0.1


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


class Head(nn.Module):
    """Self-attention at 2 heads of width / 2 (Flax's 1/sqrt(d) logits, biases) on the tokens, a residual, a
    readout to 5 classes of the mean token."""

    width: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        tokens = tokens + nn.MultiHeadDotProductAttention(2, qkv_features=self.width, out_features=self.width)(tokens)
        return nn.Dense(5)(tokens.mean(axis=1))


def both_init(key: jax.Array, width: int, depth: int) -> dict:
    del depth
    k1, k2 = jax.random.split(key)
    up = hk.transform(lambda x: deconvs(x, width)).init(k1, jnp.zeros((1, 1, 1, 3)))
    return {"up": {k: v for k, v in up.items() if k != "conv2_d_transpose_2"},
            "head": Head(width).init(k2, jnp.zeros((1, 4, width)))}


def both_apply(params: dict, x: jax.Array, width: int, depth: int) -> tuple[jax.Array, dict]:
    """Two of the transposed convs (3 to n, n to n: a 1x1 image to 4x4), their 16 pixels the attention's tokens."""
    del depth

    def up(x):
        h = jax.nn.relu(hk.Conv2DTranspose(width, 2, stride=2, with_bias=False)(x))
        return jax.nn.relu(hk.Conv2DTranspose(width, 2, stride=2, with_bias=False)(h))

    h = hk.without_apply_rng(hk.transform(up)).apply(params["up"], x)
    return Head(width).apply(params["head"], h.reshape(x.shape[0], -1, width)), {}


def test_the_audit_measures_mup_laws_on_a_model_of_both():
    """zoo.audit on Haiku's bias-free ConvTranspose layers feeding Flax attention whose head dim grows (widths 10
    and 30, 2 heads of 5 and 15) under muP and Muon: every law holds, the convs are the input and hidden layers they
    are (read in_out, the first was an output layer of fan-in 4n), the attention's biases [2, d] vectors (the audit
    read them with one fan-out axis, as input layers of fan-in 2, and failed them against their tags), and Muon's
    step per unit of its Newton-Schulz output is m^0 on the n to n conv, m^-1/2 on the [n, 2, d] query (muP's
    1/d logits over Flax's 1/sqrt(d), folded into it)."""
    kx, ky = jax.random.split(jax.random.key(3))
    batch = {"x": jax.random.normal(kx, (4, 1, 1, 3)), "y": jax.random.randint(ky, (4,), 0, 5)}
    run = AnyRun(both_init, both_apply, P.get("mup"), OptimConfig("muon", lr=1e-2, weight_decay=0.1), batch,
                 rules={"/query/": "query"}, head_dim=lambda w: w // 2)
    result = audit(run, (10, 30), depth=1)
    assert result.passed, result.failures()
    params = result.axes[0].params
    assert params["up/conv2_d_transpose/w"].kind == "input"  # the model's own paths (issue 41)
    assert params["up/conv2_d_transpose_1/w"].kind == "hidden"
    attention = "head/params/MultiHeadDotProductAttention_0/"
    assert {params[attention + f"{name}/bias"].kind for name in ("query", "key", "value")} == {"vector"}
    for name, slope in (("up/conv2_d_transpose_1/w", 0.0), (attention + "query/kernel", -0.5)):
        step = {c.quantity: c for c in params[name].checks}["spectral_step"]
        assert abs(step.expected - slope) < 1e-9 and abs(step.measured - slope) < 0.05, (name, step.measured)


def scalar_law(plugin: str, quantity: str, optimizer: str, m: float) -> float:
    """The audit's log-law of a token-mixing scalar [8, 8] (the Mixer's, no width axis) at width ratio m."""
    from zoo.audit import laws

    tag = Tag("scalar", 8, 8, width_mult=m)
    p = P.get(plugin)
    aligned = laws.aligned_exponent(p, tag, optimizer, False, {"input", "hidden", "vector", "scalar", "output"})
    return laws.log_law(quantity, p, laws.Facts(tag, "scalar", families.family(optimizer, "scalar", False), False,
                                                aligned=aligned))


def scalar_gradient_rms(width: int) -> float:
    """RMS over 256 draws of d loss / d s = n^-1/2 relu(W x) . V delta at s = 1, for f = n^-1/2 V^T (s relu(W x))
    under NTK's table (V, W ~ N(0, 1), W's n^0 multiplier over 8 inputs) and loss <f, delta> for a fixed delta over 3
    outputs: the sum over the width of the backprop n^-1/2 V delta times features."""
    rng = np.random.default_rng(width)
    w = rng.standard_normal((256, 8, width)) / np.sqrt(8)
    v = rng.standard_normal((256, width, 3))
    x = rng.standard_normal((256, 8))
    features = np.maximum(np.einsum("di,dio->do", x, w), 0.0)
    grads = np.einsum("do,do->d", features, v @ np.array([1.0, -0.5, 0.25])) / np.sqrt(width)
    return float(np.sqrt(np.mean(grads**2)))


def test_a_scalars_gradient_law_under_ntk_is_m0():
    """The audit reported NTK's scalar gradient (SGD's update_rms, Adam's eps_ratio) as m^+1/2: its d* took the
    coherent sum over the width (a + a_out + b_out - 1 = -1/2), but NTK's readout stays at its random init, so the sum
    is a central-limit one, d* = 0 (zoo.param.predict's max(1/2, 1 - r), r = 1/2). Measured at widths 256 and 4096:
    slope +0.01, 0 within 0.1 (the coherent sum's +1/2 is 5 tolerances away). The law now says 0 there; muP's (a
    coherent sum, r = 0) stays 0."""
    slope = np.log(scalar_gradient_rms(4096) / scalar_gradient_rms(256)) / np.log(16)
    assert abs(slope) < 0.1, slope
    for plugin, optimizer, quantity in (("ntk", "sgd", "update_rms"), ("ntk", "adam", "eps_ratio"),
                                        ("mup", "sgd", "update_rms"), ("mup", "adam", "eps_ratio")):
        law = (scalar_law(plugin, quantity, optimizer, 16.0) - scalar_law(plugin, quantity, optimizer, 1.0)) / \
            np.log(16)
        assert abs(law) < 1e-9, (plugin, quantity, law)


@pytest.mark.parametrize("size,base,want", [(1, 1, [1, 2]), (1, None, [1, 2]), (2, 2, [1, 2]), (6, 6, [3, 6]),
                                            (5, 3, [3, 5])])
def test_a_run_at_size_1_is_audited_at_1_and_2(size, base, want):
    """A run dir of depth_mup at depth 1 = its base depth was audited at depths [max(1, 1 // 2), 1] = [1, 1] and
    refused ('an audit needs at least two different positive depths, got [1, 1]'), depths the user never gave; a
    size with no half is measured at it and twice it."""
    from zoo.audit.rundir import around

    assert around(size, base) == want


@pytest.mark.parametrize("argv, line", [
    (["--tol", "-1"], "error: argument --tol: expected a positive number, got '-1'"),
    (["--widths", "64"], "error: an audit needs at least two different positive --widths, each once; got [64]"),
    (["--widths", "32,64,32"], "error: an audit needs at least two different positive --widths, each once; got "
                               "[32, 64, 32]"),
    (["--depths", "3"], "error: an audit needs at least two different positive --depths, each once; got [3]"),
    (["--depths", "2,4", "--depth", "3"], "error: --depth 3 is the width sweep's depth, but --depths alone runs none"),
    (["RUN", "--model", "gpt"], "error: a run dir brings its own settings; --model is not taken with it"),
])
def test_a_bad_audit_command_line_exits_2_not_the_audits_1(argv, line, capsys):
    """python -m zoo.audit exits 1 when a parameter fails and, its docstring says, 2 for a bad command line; but
    --tol -1, one width, a run dir with --model and the like exited 1 too (ValueError), which a script reads as a
    failed audit. They exit 2 now, before any model is built. --depth with --depths alone was taken and ignored (the
    depth sweep measures at --depths); a repeated width was measured twice and weighed twice in the fit."""
    from zoo.cli.audit import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith(line), err


def test_a_conv_named_query_keeps_one_fan_out_axis():
    """Flax's attention names give a bias-free query/key/value kernel [n, heads, d] two fan-out axes; a conv so named,
    [3, n, n] (fixed first axis), is no such kernel: hidden of fan-in 3n and fan-out n (n 8 -> 24), not an error
    asking for the out_axes=2 it would have been given."""
    def conv(n):
        return {"query": {"kernel": s(3, n, n)}, "key": {"kernel": s(n, 2, n // 2)}}

    got = flat_tags(P.infer_tags(conv(8), conv(24), base_width=8, width=24))
    assert got == {"query/kernel": ("hidden", 72, 24, "in_out", 1), "key/kernel": ("hidden", 24, 24, "in_out", 2)}
