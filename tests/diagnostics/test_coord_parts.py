"""The coordinate check and the audit judge a plugin against the rules it states, never against the rule methods
that apply them (zoo.param.base; issue 41)."""

from __future__ import annotations

import dataclasses

from zoo.param.mup import MuP
from zoo.param.tags import Tag

KINDS = ("input", "vector", "hidden")


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
    for kind in ("input", "hidden", "output"):
        stated = wrong.spectral_c(kind)
        assert stated == laws.spectral_c(wrong, float(wrong.table_for(kind)[2]), kind) == mup.spectral_c(kind)
        assert float(wrong.lr_exponent(Tag(kind=kind, fan_in=8, fan_out=8), "spectral")) == stated + (
            1.0 if kind == "hidden" else 0.5)  # applied: what both checks measure
