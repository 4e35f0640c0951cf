"""The width coordinate check judges the change each part's parameters cause alone (zoo.diagnostics.coord), so a
rule off by a power of n shows even where another part's change swamps every layer's total (issue 41): each part's
predicted slope, from the rules a plugin states. The measurement: test_coord_check.py's
test_verdict_and_exit_status (a hidden Adam LR with an extra 1/m) and test_coord_any.py's
test_same_verdict_as_the_cli (the any-model check's parts are the CLI's)."""

from __future__ import annotations

import dataclasses

import pytest

import zoo.param as P
from zoo.param.mup import MuP
from zoo.param.tags import Tag

KINDS = ("input", "vector", "hidden")


@pytest.mark.parametrize("name, opts, optimizer, muon_io, want", [
    # muP: every part moves every layer it reaches by n^0, under every optimizer family (TP IVb Delta W x = n^-r_l,
    # r_l = 0; Muon's spectral map keeps r; spectral_optimizers.md section 2)
    ("mup", {}, "adam", False, {p: {"hidden": 0, "stream": 0, "output": 0} for p in ("input", "hidden", "vector")}),
    ("mup", {}, "sgd", False, {"input": {"input": 0, "output": 0}, "hidden": {"hidden": 0}, "output": {"output": 0}}),
    ("mup", {}, "muon", True, {"input": {"input": 0, "output": 0}, "hidden": {"hidden": 0}, "output": {"output": 0}}),
    # NTK: r = 1/2 for input, vector and hidden; the readout r_out = 0, and the logits' V0 . Delta h is
    # n^(1 - a_out - b_out - r) = n^0
    ("ntk", {}, "adam", False, {"input": {"input": -0.5, "hidden": -0.5, "output": 0}, "hidden": {"hidden": -0.5},
                                "output": {"output": 0}}),
    # UP_1/4 (ntk_mup s = 1/2): r = 1/4 in every part before the readout
    ("ntk_mup", {"s": 0.5}, "adam", False, {"hidden": {"hidden": -0.25, "attention": 0}, "input": {"input": -0.25}}),
    # SP + Adam: the hidden part's r = c + a - 1 = -1 grows like n (TP IVb 6: Delta h^2 +1), the input part's is flat
    ("sp", {}, "adam", False, {"input": {"input": 0, "hidden": 0}, "hidden": {"hidden": 1}, "output": {"output": 1}}),
    # a zero readout kept at V0 = 0 passes nothing to the logits: only the readout's own part moves them
    ("mup", {"zero_init": "true"}, "adam", False, {"hidden": {"output": float("nan")}, "output": {"output": 0}}),
    # the readout's bias: its own update, n^0 for every shipped plugin's scalar (0, 0, 0, 0)
    ("ntk", {}, "sgd", False, {"readout_bias": {"output": 0, "hidden": float("nan")}}),
])
def test_each_parts_predicted_slope_is_its_own_rules(name, opts, optimizer, muon_io, want):
    """zoo.param.predict.part_slopes against TP IVb's feature-learning exponents, part by part (seed_tp4b_adam.md
    sections 3 and 6)."""
    plugin = P.get(name, **opts)
    for part, groups in want.items():
        got = plugin.expected_slopes(optimizer, kinds=KINDS, head_dim_slope=1.0, muon_io=muon_io, part=part)
        assert {g: got[g] for g in groups} == pytest.approx(groups, nan_ok=True), (part, got)


@dataclasses.dataclass(frozen=True)
class AdamExponentUnderMuon(MuP):
    """muP whose optimizer builder forgets the spectral map on every matrix (Adam's c under Muon), its stated
    table muP's: what it applies disagrees with what it states."""

    name = "mup_adam_exponent_under_muon"

    def lr_exponent(self, tag: Tag, family: str = "adam") -> float:
        return self.abcd(tag)[2]


def test_the_coordinate_check_judges_against_the_stated_table_as_the_audit_does():
    """The audit's laws came from the plugin's stated table, the coordinate check's Muon predictions from its
    lr_exponent, the rule the optimizer builder applies: a plugin whose applied Muon exponents are Adam's (input
    layer m^0, hidden m^-1 where the map gives m^+1/2 and m^0) was predicted its input layer's slope -1/2 under
    --muon-io, what it applies, so the check measured what it predicted and passed. Both checks now read the stated
    rules: the prediction is muP's, and the gap between stated and applied is what they measure."""
    from zoo.audit import laws

    wrong, mup = AdamExponentUnderMuon(), MuP()
    for muon_io in (False, True):
        assert wrong.expected_slopes("muon", kinds=KINDS, muon_io=muon_io) == mup.expected_slopes(
            "muon", kinds=KINDS, muon_io=muon_io)
        for part in ("input", "hidden", "output"):
            assert wrong.expected_slopes("muon", kinds=KINDS, muon_io=muon_io, part=part) == mup.expected_slopes(
                "muon", kinds=KINDS, muon_io=muon_io, part=part)
    for kind in ("input", "hidden", "output"):
        stated = wrong.spectral_c(kind)
        assert stated == laws.spectral_c(wrong, float(wrong.table_for(kind)[2]), kind) == mup.spectral_c(kind)
        assert float(wrong.lr_exponent(Tag(kind=kind, fan_in=8, fan_out=8), "spectral")) == stated + (
            1.0 if kind == "hidden" else 0.5)  # applied: what both checks measure

