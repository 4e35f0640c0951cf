"""zoo.audit (issue 18): it finds nothing wrong with a correct run and catches each injected fault, naming the
parameter and the rule. Runs on a small MLP-ResNet (pre-LN and biases: every kind, stacked vectors) at widths 32
and 128 (m = 4) and depth 2."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import subprocess
import sys

import haiku as hk
import jax
import jax.numpy as jnp
import pytest
from cli_utils import ROOT, child_env
from flax import linen as nn
from flax import nnx
from param_helpers import example, haiku_deconvs

import zoo.param as P
from zoo import optim
from zoo.audit import AnyRun, ZooRun, audit
from zoo.audit.rundir import from_config
from zoo.config import resolve
from zoo.models import layers
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.param.mup import MuP

WIDTHS = (32, 128)
EIGHT = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
MODEL = {"in_shape": (8,), "num_classes": 4, "pre_ln": True, "bias": True}


def run_of(plugin=None, optimizer="adam", weight_decay=0.1, **kw) -> ZooRun:
    return ZooRun("mlp_resnet", plugin or P.get("mup"), OptimConfig(optimizer, lr=1e-2, weight_decay=weight_decay),
                  MODEL, batch_size=8, **kw)


@functools.cache
def correct(optimizer: str):
    return audit(run_of(optimizer=optimizer), WIDTHS)


def failing(result) -> dict[str, set[str]]:
    """Parameter -> the rules it fails."""
    return {path: {c.quantity for c in p.checks if c.passed is False}
            for a in result.axes for path, p in a.params.items() if not p.passed}


@pytest.mark.parametrize("optimizer", ["adam", "sgd", "muon"])
def test_a_correct_run_passes(optimizer):
    result = correct(optimizer)
    assert result.passed, result.failures()
    assert len(result.axes[0].params) == 9  # embed + bias; per block norm gain and bias, w1 + bias, the branch
    # multiplier; head + bias


class GrowingDecay(MuP):
    def wd_mult(self, tag):
        return super().wd_mult(tag) * tag.width_mult


def test_weight_decay_growing_with_width_fails():
    bad = failing(audit(run_of(GrowingDecay()), WIDTHS))
    assert bad and all(rules == {"wd_shrink"} for rules in bad.values())
    assert set(bad) == {"embed/kernel", "stack/blocks/w1/kernel", "head/kernel"}


def _decays_biases_with_width(cfg, plugin, params, horizon):
    """zoo's chain, but every bias decayed m^2 times as fast (under --decay-vectors)."""
    grad_scale, lr, _ = optim.rules(plugin, params, cfg)

    def decay(tag):
        if tag.kind in ("vector", "scalar"):
            return tag.width_mult**2 if tag.role.endswith("bias") else 1.0
        return plugin.wd_mult(tag)

    return optim.chain(cfg, grad_scale, lr, optim.per_param(params, decay), route=optim.routes(cfg, params, plugin),
                       horizon=horizon)


def test_weight_decay_on_a_zero_init_bias_is_measured():
    """The shrink was read at the initial weights, -<u, w0>/<w0, w0>: every bias starts at 0, so a bias decayed
    m^2 times as fast read 'no decay' and passed (under --decay-vectors the biases decay). It is read at ones where a
    parameter starts at 0: the biases fail, alone."""
    cfg = OptimConfig("adamw", lr=1e-2, weight_decay=0.1, decay_vectors=True)
    assert audit(ZooRun("mlp_resnet", P.get("mup"), cfg, MODEL, batch_size=8), WIDTHS).passed
    bad = failing(audit(ZooRun("mlp_resnet", P.get("mup"), cfg, MODEL, batch_size=8,
                               chain=_decays_biases_with_width), WIDTHS))
    assert set(bad) == {"embed/bias", "stack/blocks/norm/bias", "stack/blocks/w1/bias", "head/bias"}, bad
    assert all(rules == {"wd_shrink"} for rules in bad.values()), bad


class UnscaledEpsilon(MuP):
    def grad_scale(self, tag):
        return tag.depth_ratio ** self.alpha  # the width part m^d of the pre-scale forgotten


def test_unscaled_adam_epsilon_fails():
    """Adam's update is scale-invariant, so only the epsilon rule can see it (a coordinate check cannot)."""
    bad = failing(audit(run_of(UnscaledEpsilon()), WIDTHS))
    assert bad and all(rules == {"eps_scale"} for rules in bad.values())
    assert "stack/blocks/w1/kernel" in bad and "head/kernel" in bad


def test_readout_tagged_hidden_fails(monkeypatch):
    init = layers.Dense.__init__

    def mistagged(self, fan_in, fan_out, *, kind, **kw):
        init(self, fan_in, fan_out, kind="hidden" if kind == "output" else kind, **kw)

    monkeypatch.setattr(layers.Dense, "__init__", mistagged)
    result = audit(run_of(), WIDTHS)
    bad = failing(result)
    assert set(bad) == {"head/kernel", "head/bias"} and {"kind", "multiplier", "init_rms"} <= bad["head/kernel"]
    assert {"kind", "eps_scale"} == bad["head/bias"]  # a hidden layer's bias is a vector (epsilon m^-1), a readout's
    # a scalar (epsilon m^0)
    assert any("head/kernel" in line and "tagged hidden, shapes say output" in line for line in result.failures())


def test_multiplier_applied_twice_fails(monkeypatch):
    def twice(self, x, axis=-1):
        y = (x @ self.kernel[...].T.astype(x.dtype)) * self.mult[...] * self.mult[...]
        return y if self.bias is None else y + self.bias[...]

    monkeypatch.setattr(layers.Dense, "__call__", twice)
    bad = failing(audit(run_of(), WIDTHS))
    assert set(bad) == {"head/kernel"}  # the only multiplier that is not 1 under muP
    assert {"multiplier", "init_rms", "update_rms"} <= bad["head/kernel"]


def shape_factor_on_top(cfg, plugin, params, horizon):
    """Megatron-LM #3177: Muon's shape factor taken at the actual shape (Moonlight's sqrt(max(fan_in, fan_out)))
    on top of the plugin's Muon LR, which already has the width scaling: a second m^(1/2) on hidden matrices."""
    factor = optim.per_param(params, lambda t: math.sqrt(max(t.fan_in, t.fan_out) / max(t.base_fan_in, t.base_fan_out))
                             if optim.family_of(cfg, t) == "spectral" else 1.0)
    rules = optim.rules(plugin, params, cfg)
    lr_mult = jax.tree.map(lambda a, b: a * b, rules.lr_mult, factor)
    return optim.chain(cfg, rules.grad_scale, lr_mult, rules.wd_mult, route=optim.routes(cfg, params),
                       horizon=horizon)


def test_muon_shape_factor_on_top_of_mup_fails():
    bad = failing(audit(run_of(optimizer="muon", chain=shape_factor_on_top), WIDTHS))
    assert bad == {"stack/blocks/w1/kernel": {"spectral_step"}}


def two_dims_to_muon(cfg, plugin, params, horizon):
    """optax.contrib.muon's default routing: every 2-D array to Muon, so the stacked (L, n) norm gains and biases of
    scanned blocks go to Muon as L x n matrices (and the stacked (L, n, n) hidden matrices to Adam)."""
    def route(v):
        shape = v.get_value().shape
        return v.replace(optim.Route("spectral" if len(shape) == 2 else "adam", shape[0] if shape else 1))

    routes = jax.tree.map(route, params, is_leaf=lambda x: isinstance(x, nnx.Variable))
    return optim.chain(cfg, *optim.rules(plugin, params, cfg), route=routes, horizon=horizon)


def test_vector_parameter_sent_to_muon_fails():
    bad = failing(audit(run_of(optimizer="muon", chain=two_dims_to_muon), WIDTHS))
    for vector in ("stack/blocks/norm/gain", "stack/blocks/norm/bias", "stack/blocks/w1/bias"):
        assert {"family", "update_rms"} <= bad[vector], bad
    assert {"family", "spectral_step"} <= bad["stack/blocks/w1/kernel"]


GPT = ["--model", "gpt", "--param", "mup", "--optimizer", "muon", "--widths", "32,64", "--depth", "1",
       "--batch-size", "16", "--model-opt", "head_dim=8", "--model-opt", "seq_len=8"]


def gpt_run() -> ZooRun:
    """The run the CLI audits for GPT's flags (the GPT recipe: cosine schedule, clipping, weight decay; then the
    flags)."""
    flags = {"model": "gpt", "param": "mup", "optimizer": "muon", "model_opt": {"head_dim": 8, "seq_len": 8}}
    return from_config(resolve(flags), 16).run


def numbers(result) -> dict[tuple[str, str], list]:
    return {(path, c.quantity): c.values for a in result.axes for path, p in a.params.items() for c in p.checks}


@pytest.mark.long
def test_a_mesh_changes_no_realized_rule(tmp_path):
    """The GPT recipe under Muon (clipping, cosine schedule, weight decay), audited on one device and on 8 CPU
    devices under --mesh fsdp=4,tensor=2 (the CLI in a subprocess): both PASS, with the same realized numbers (rtol
    1e-5). One exception, at rtol 1e-4: the top singular value of a Muon update (reported, not judged); Newton-Schulz
    multiplies the gradient's rounding (another summation order) by up to 3.4445^5 ~ 480 in its small directions,
    and the flat top of its output spectrum moves by up to 8e-5. (The probe's step is the run's train step, which
    gradient accumulation leaves unchanged: tests/optim/test_muon.py, test_accumulation_and_remat_change_nothing.)"""
    out = tmp_path / "mesh.json"
    proc = subprocess.run([sys.executable, "-m", "zoo.audit", *GPT, "--mesh", "fsdp=4,tensor=2", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=child_env(EIGHT))
    one = audit(gpt_run(), (32, 64), depth=1)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert one.passed, one.failures()
    mesh = json.loads(out.read_text())
    assert mesh["passed"] and mesh["run"]["mesh"] == "fsdp=4,tensor=2"
    mesh_numbers = {(path, q): c["values"] for path, p in mesh["axes"]["width"]["params"].items()
                    for q, c in p["checks"].items()}
    want = numbers(one)
    assert mesh_numbers.keys() == want.keys()
    for key, values in want.items():
        for a, b in zip(mesh_numbers[key], values, strict=True):
            assert (a is None) == (b is None), key
            if a is not None:
                rtol = 1e-4 if key[1] == "update_spectral" and "kernel" in key[0] else 1e-5
                assert math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12), (key, a, b)


@pytest.mark.slow
def test_any_model_through_infer_tags():
    """The Haiku pre-LN transformer of examples/ (scanned blocks, query and branch-output rules), through infer_tags
    and depth_mup's multiplier-free form, under Muon: widths 64 and 128, depths 1 and 4 (stacked: the blocks' leading
    axis grows with depth). Every parameter passes; the branch multiplier r^-1/2 folded into the branch-ending
    matrices shows in their init (r^-1/2) and their Muon step (r^-1/2 r^-1/2)."""
    m = example("haiku_transformer")
    kx, ky = jax.random.split(jax.random.key(0))
    batch = {"x": jax.random.randint(kx, (4, 8), 0, 65), "y": jax.random.randint(ky, (4, 8), 0, 65)}
    run = AnyRun(m.init, m.apply, P.get("depth_mup"), OptimConfig("muon", lr=1e-2, weight_decay=0.1), batch,
                 rules=m.RULES, head_dim=m.HEAD_DIM)
    result = audit(run, (64, 128), (1, 4), depth=1)
    assert result.passed, result.failures()
    depth = {path: {c.quantity: c for c in p.checks} for path, p in result.axes[1].params.items()}
    out = next(p for p in depth if "attn_out/w" in p)
    assert math.isclose(depth[out]["init_rms"].expected, -0.5)
    assert math.isclose(depth[out]["spectral_step"].expected, -1.0)


TIED_GPT = {"num_heads": 2, "scale_heads": False, "seq_len": 8, "tie_embeddings": True, "depth": 1}


@pytest.mark.slow
def test_the_audit_judges_a_tied_readout_and_the_attention_scale(monkeypatch):
    """GPT with a tied readout and a head dim that grows with width (2 heads) under muP's table3 gauge at widths 16
    and 64: the readout multiplier m^-1 (1 -> 0.25) and the attention scale 1/d (d = 8 -> 32) are measured and pass.
    The bug of da4de1d (the readout's own m^-a_out, 1 in table3: logits n/n0 too large) fails on readout_mult alone,
    SP's 1/sqrt(d) under muP on logit_scale alone. Before, the audit had no row for either (neither multiplier sits
    on a parameter) and passed all three runs."""
    run = ZooRun("gpt", P.get("mup", gauge="table3"), OptimConfig("adam", lr=1e-2), TIED_GPT, batch_size=4)
    good = audit(run, (16, 64), depth=1)
    tied, attn = (good.axes[0].params[p].checks[0] for p in ("readout_mult", "stack/blocks/attn/logit_scale"))
    assert good.passed and tied.values == pytest.approx([1.0, 0.25], rel=1e-5)
    assert tied.measured == pytest.approx(-1.0, abs=1e-6) and attn.measured == pytest.approx(-1.0, abs=1e-6)
    with monkeypatch.context() as patch:
        patch.setattr(Parametrization, "tied_multiplier", lambda self, readout, table: self.multiplier(readout))
        assert audit(run, (16, 64), depth=1).failures() == ["width readout_mult: multiplier slope +0.00, theory -1.00"]
    monkeypatch.setattr(Parametrization, "attn_scale", lambda self, d, d0: self.attn_mult / d**0.5)
    assert audit(run, (16, 64), depth=1).failures() == [
        "width stack/blocks/attn/logit_scale: multiplier slope -0.50, theory -1.00"]


@pytest.mark.slow
def test_the_audit_judges_the_branch_multiplier(monkeypatch):
    """Depth-muP on the MLP-ResNet at depths 4 and 16 (width 32): the branch multiplier (L/4)^-1/2 (1 -> 0.5) passes;
    one that forgets the depth (a only) fails on it alone. Before, no rule the audit measured saw it (Adam's update
    and SGD's step per unit of gradient are blind to the forward multiplier) and both passed."""
    run = ZooRun("mlp_resnet", P.get("depth_mup"), OptimConfig("adam", lr=1e-2),
                 {**MODEL, "block_depth": 2}, batch_size=8)
    good = audit(run, depths=(4, 16), width=32)
    check = good.axes[0].params["stack/blocks/branch"].checks[0]
    assert good.passed and check.values == pytest.approx([1.0, 0.5], rel=1e-6)
    monkeypatch.setattr(Parametrization, "branch_multiplier", lambda self, depth, base_depth: self.branch_mult)
    bad = audit(run, depths=(4, 16), width=32)
    assert bad.failures() == ["depth stack/blocks/branch: multiplier slope +0.00, theory -0.50"]


PLAIN = {"in_shape": (8,), "num_classes": 4}  # no pre-LN, no biases


def _unfreezes_input(cfg, plugin, params, horizon):
    """zoo's chain built as if the plugin froze the output layer only: LR and decay on the input layer."""
    return optim.build(cfg, dataclasses.replace(plugin, freeze="output"), params, horizon)


def test_the_audit_fails_a_frozen_kind_that_moves():
    """depth_mup with freeze=input,output (TP VI's experiments train only the blocks) under AdamW with decay, MLP-ResNet
    at widths 24 and 48, under a chain that ignores the input's freeze: it moves the input layer by lr (update RMS
    0.01) and decays it, and the audit passed it (its laws were the unfrozen ones: update m^0, shrink m^0, both met).
    Now a frozen kind's law is that it does not move: the input layer fails alone, the still readout passes."""
    plugin = P.get("depth_mup", freeze="input,output")
    run = ZooRun("mlp_resnet", plugin, OptimConfig("adamw", lr=1e-2, weight_decay=0.1), PLAIN, batch_size=8,
                 chain=_unfreezes_input)
    result = audit(run, (24, 48), depth=3)
    assert result.failures() == ["width embed/kernel: frozen: the plugin freezes it, yet it moves (update RMS or decay "
                                 "shrink up to 0.01)"]
    params = result.axes[0].params
    assert [c.passed for c in params["head/kernel"].checks if c.quantity == "frozen"] == [True]
    assert params["stack/blocks/w1/kernel"].passed  # trained: its own laws, no frozen check
    assert all(c.quantity != "frozen" for c in params["stack/blocks/w1/kernel"].checks)


def test_the_audit_measures_the_multipliers_of_a_zero_init_run():
    """muP allows a zero readout (zero_init, TP-V). The audit reads each multiplier's power from Euler's relation at
    the init, 0/0 at a zero readout, and a zero readout zeroes every other parameter's derivative too: mean_field with
    zero_init at widths 24 and 48 read its readout's m^-1 and its hidden matrices' m^-1/2 as m^0 and failed both
    (readout: multiplier and update +0.00 against -1; hidden: multiplier +0.00 against -0.50, effective init -0.03
    against -0.50). The powers are now read where zero weight matrices are drawn at their SP scale; the biases beside
    them keep their zeros (drawn too, the readout's bias read the kernel's multiplier, slope -0.92 against 0)."""
    run = ZooRun("mlp_resnet", P.get("mean_field", zero_init=True), OptimConfig("adam", lr=1e-2),
                 {**PLAIN, "bias": True}, batch_size=8)
    result = audit(run, (24, 48), depth=2)
    assert result.passed, result.failures()
    params = result.axes[0].params
    paths = ("head/kernel", "stack/blocks/w1/kernel", "head/bias", "stack/blocks/w1/bias")
    assert all(params[p].checks[0].quantity == "multiplier" for p in paths)
    assert [params[p].checks[0].measured for p in paths] == pytest.approx([-1.0, -0.5, 0.0, 0.0], abs=1e-4)


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
    assert params["up/conv2_d_transpose/w"].kind == "input"  # the model's own paths (issue 41)
    assert params["up/conv2_d_transpose_1/w"].kind == "hidden"
    attention = "head/params/MultiHeadDotProductAttention_0/"
    assert {params[attention + f"{name}/bias"].kind for name in ("query", "key", "value")} == {"vector"}
    for name, slope in (("up/conv2_d_transpose_1/w", 0.0), (attention + "query/kernel", -0.5)):
        step = {c.quantity: c for c in params[name].checks}["spectral_step"]
        assert abs(step.expected - slope) < 1e-9 and abs(step.measured - slope) < 0.05, (name, step.measured)


@pytest.mark.long
def test_audit_sgd_step_size_is_exact_under_weight_decay():
    """SGD's step per unit of gradient is lr m^(d-c) exactly: the probe read it as (chain(TINY g) - decay) / TINY,
    where the decay lr wd w dwarfs the tiny step and float32 kept mostly rounding. A GPT under muP with SGD and the
    recipe's wd 0.1 measured step-size slopes +0.23..+0.31 for q, k and fc1 at widths 64..256 (theory 0); here, wd 10
    at widths 16 and 64, q's step read 0.0125 and 0.0215 (slope +0.39, theory 0; at depth 1, +0.58, and k, fc1 +0.55,
    +0.51). The tiny step is now taken at w = 0, where the chain adds no decay. One block: the model's depth=1 is the
    run's only through audit's `depth` (a ZooRun's default depth is the model's default, 6)."""
    from zoo.audit import ZooRun, audit

    model = dict(depth=1, head_dim=16, seq_len=8, vocab_size=32, dropout=0.0)
    run = ZooRun("gpt", P.get("mup"), OptimConfig("sgd", lr=1e-3, weight_decay=10.0), model, batch_size=2)
    params = audit(run, (16, 64), depth=1).axes[0].params
    for name in ("stack/blocks/attn/q/kernel", "stack/blocks/attn/k/kernel", "stack/blocks/mlp/fc1/kernel"):
        check = next(c for c in params[name].checks if c.quantity == "step_size")
        assert check.passed and abs(check.measured) < 0.02, (name, check)
