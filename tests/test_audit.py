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

import jax
import pytest
from cli_utils import ROOT, child_env
from flax import nnx
from param_helpers import example

import zoo.param as P
from zoo import optim
from zoo.audit import AnyRun, ZooRun, audit
from zoo.audit.rundir import from_config
from zoo.config import resolve
from zoo.models import layers
from zoo.optim import OptimConfig
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


def gpt_run(**kw) -> ZooRun:
    """The run the CLI audits for GPT's flags (the GPT recipe: cosine schedule, clipping, weight decay; then the
    flags)."""
    flags = {"model": "gpt", "param": "mup", "optimizer": "muon", "model_opt": {"head_dim": 8, "seq_len": 8}}
    return dataclasses.replace(from_config(resolve(flags), 16).run, **kw)


def numbers(result) -> dict[tuple[str, str], list]:
    return {(path, c.quantity): c.values for a in result.axes for path, p in a.params.items() for c in p.checks}


@pytest.mark.long
def test_mesh_and_accumulation_change_no_realized_rule(tmp_path):
    """The GPT recipe under Muon (clipping, cosine schedule, weight decay), audited on one device, with
    --grad-accum 4, and on 8 CPU devices under --mesh fsdp=4,tensor=2 (the CLI in a subprocess): all PASS, with the
    same realized numbers (rtol 1e-5). One exception, at rtol 1e-4: the top singular value of a Muon update (reported,
    not judged); Newton-Schulz multiplies the gradient's rounding (another summation order) by up to 3.4445^5 ~ 480
    in its small directions, and the flat top of its output spectrum moves by up to 8e-5."""
    out = tmp_path / "mesh.json"
    proc = subprocess.run([sys.executable, "-m", "zoo.audit", *GPT, "--mesh", "fsdp=4,tensor=2", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=child_env(EIGHT))
    one, accum = audit(gpt_run(), (32, 64), depth=1), audit(gpt_run(grad_accum=4), (32, 64), depth=1)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert one.passed and accum.passed, one.failures() + accum.failures()
    mesh = json.loads(out.read_text())
    assert mesh["passed"] and mesh["run"]["mesh"] == "fsdp=4,tensor=2"
    mesh_numbers = {(path, q): c["values"] for path, p in mesh["axes"]["width"]["params"].items()
                    for q, c in p["checks"].items()}
    want = numbers(one)
    for got in (numbers(accum), mesh_numbers):
        assert got.keys() == want.keys()
        for key, values in want.items():
            for a, b in zip(got[key], values, strict=True):
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
