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

TIED_GPT = {"head_dim": 8, "seq_len": 8, "tie_embeddings": True, "depth": 1}


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
    logs = [laws.log_law("multiplier", plugin, laws.Facts(r, "output", "adam", False, tied=e)) for r, e in sizes]
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
def test_the_audit_judges_a_tied_readouts_multiplier(monkeypatch):
    """GPT with a tied readout under muP's table3 gauge at widths 16 and 64: the readout multiplier is measured
    (m^-1: 1 -> 0.25) and passes; the bug of da4de1d (the readout's own m^-a_out, 1 in table3: logits n/n0 too
    large) fails on it alone. Before, the audit had no row for it and passed both."""
    run = ZooRun("gpt", P.get("mup", gauge="table3"), OptimConfig("adam", lr=1e-2), TIED_GPT, batch_size=4)
    good = audit(run, (16, 64), depth=1)
    check = good.axes[0].params["readout_mult"].checks[0]
    assert good.passed and check.values == pytest.approx([1.0, 0.25], rel=1e-5)
    assert check.measured == pytest.approx(-1.0, abs=1e-6)
    monkeypatch.setattr(Parametrization, "tied_multiplier", lambda self, readout, table: self.multiplier(readout))
    bad = audit(run, (16, 64), depth=1)
    assert bad.failures() == ["width readout_mult: multiplier slope +0.00, theory -1.00"]
