"""Laws re-checked by a referee at settings the other tests do not use (widths, gauges, optimizers, tied readouts),
each against theory's numbers."""

from __future__ import annotations

import math

import jax.numpy as jnp
import pytest

import zoo.param as P
from zoo.audit import ZooRun, audit, laws, measure
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.param.tags import Tag

TIED_GPT = {"num_heads": 2, "scale_heads": False, "seq_len": 8, "tie_embeddings": True, "depth": 1}


def tied_tags(m: float) -> tuple[Tag, Tag]:
    return (Tag("output", int(16 * m), 65, width_mult=m, role="readout"),
            Tag("input", 65, int(16 * m), width_mult=m, role="token_embed"))


@pytest.mark.parametrize("plugin, slope", [
    (P.get("mup"), -1.0), (P.get("mup", gauge="table3"), -1.0), (P.get("mean_field"), -1.0),
    (P.get("ntk"), -0.5), (P.get("ntk_mup", s=0.0), -0.5), (P.get("sp"), 0.0)])
def test_the_tied_readout_law_is_the_output_rule_gauge_shifted(plugin, slope):
    """The law the audit judges a tied readout's multiplier by, m^-(a_out + theta) (TP IVb Prop 2.2.3): muP's m^-1
    in every gauge (table3's own a_out is 0), NTK's m^-1/2, sp's m^0 (no shift maps its output rule onto the
    input's). Where a shift exists, the tied effective readout (multiplier times E's init m^-b_in) starts at the
    untied output's m^-(a_out + b_out)."""
    sizes = [tied_tags(m) for m in (1.0, 4.0)]
    logs = [laws.free_multiplier_law(plugin, {"rule": "tied", "tag": r, "ties": e}) for r, e in sizes]
    assert (logs[1] - logs[0]) / math.log(4.0) == pytest.approx(slope, abs=1e-12)
    readout, table = sizes[1]
    a_out, b_out = (float(v) for v in plugin.abcd(readout)[:2])
    if plugin.name != "sp":
        assert float(plugin.tied_exponent(readout, table)) + float(plugin.abcd(table)[1]) == a_out + b_out


@pytest.mark.parametrize("power", [1.0, 2.0, -1.0])
def test_output_power_is_the_power_the_logits_carry(power):
    g = jnp.arange(1.0, 7.0).reshape(2, 3)
    c = {"m": jnp.asarray(0.7)}
    p = measure.output_power(lambda t: t["m"] ** power * g, c, c)
    assert float(p) == pytest.approx(power, rel=1e-5)


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


@pytest.mark.parametrize("plugin, alpha", [(P.get("depth_mup"), 0.5), (P.get("completep"), 1.0), (P.get("mup"), 0.0)])
def test_the_branch_multiplier_law_is_depth_mups(plugin, alpha):
    """a (L / L0)^-alpha (Depth-muP eq. (1)): log slope -alpha in L; the attention scale q.k / d^e: -e in d."""
    logs = [laws.free_multiplier_law(plugin, {"rule": "branch", "depth": d, "base_depth": 4}) for d in (4, 64)]
    assert (logs[1] - logs[0]) / math.log(16.0) == pytest.approx(-alpha, abs=1e-12)
    logs = [laws.free_multiplier_law(plugin, {"rule": "attention", "head_dim": d, "base_head_dim": 8}) for d in (8, 32)]
    assert (logs[1] - logs[0]) / math.log(4.0) == pytest.approx(-float(plugin.attn_exponent), abs=1e-12)


MLP = {"in_shape": (8,), "num_classes": 4, "pre_ln": True, "bias": True, "block_depth": 2}


@pytest.mark.slow
def test_the_audit_judges_the_branch_multiplier(monkeypatch):
    """Depth-muP on the MLP-ResNet at depths 4 and 16 (width 32): the branch multiplier (L/4)^-1/2 (1 -> 0.5) passes;
    one that forgets the depth (a only) fails on it alone. Before, no rule the audit measured saw it (Adam's update
    and SGD's step per unit of gradient are blind to the forward multiplier) and both passed."""
    run = ZooRun("mlp_resnet", P.get("depth_mup"), OptimConfig("adam", lr=1e-2), MLP, batch_size=8)
    good = audit(run, depths=(4, 16), width=32)
    check = good.axes[0].params["stack/blocks/branch"].checks[0]
    assert good.passed and check.values == pytest.approx([1.0, 0.5], rel=1e-6)
    monkeypatch.setattr(Parametrization, "branch_multiplier", lambda self, depth, base_depth: self.branch_mult)
    bad = audit(run, depths=(4, 16), width=32)
    assert bad.failures() == ["depth stack/blocks/branch: multiplier slope +0.00, theory -0.50"]
