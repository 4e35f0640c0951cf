"""Referee checks of "Bring your own model" tagging and the audit, fifth round: kernels stored [..., out, in]
(Haiku's ConvTranspose without a bias), kernels whose fan-out spans several axes (Flax's DenseGeneral and attention,
Linen and NNX), and the audit's laws on a model of both, at widths the other tests do not use."""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn
from param_helpers import haiku_deconvs

import zoo.param as P
from zoo.audit import AnyRun, audit
from zoo.optim import OptimConfig
from zoo.param import families
from zoo.param.tags import Tag


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
    up = hk.transform(lambda x: haiku_deconvs(x, width)).init(k1, jnp.zeros((1, 1, 1, 3)))
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
    assert params["params/up/conv2_d_transpose/w"].kind == "input"
    assert params["params/up/conv2_d_transpose_1/w"].kind == "hidden"
    attention = "params/head/params/MultiHeadDotProductAttention_0/"
    assert {params[attention + f"{name}/bias"].kind for name in ("query", "key", "value")} == {"vector"}
    for name, slope in (("params/up/conv2_d_transpose_1/w", 0.0), (attention + "query/kernel", -0.5)):
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
