"""The width coordinate check judges the change each part's parameters cause alone (zoo.diagnostics.coord), so a
rule off by a power of n shows even where another part's change swamps every layer's total (issue 41)."""

from __future__ import annotations

import dataclasses

import jax
import pytest

import zoo.param as P
from zoo.diagnostics.coord_any import coord_check
from zoo.diagnostics.coord_sweep import CoordSpec, coord_sweep, passed
from zoo.param.mup import MuP
from zoo.param.tags import Tag

# 192 inputs into widths 16 and 64: the input layer's change is the larger part of every hidden and stream layer's,
# as the default MLP-ResNet's 3072 inputs make it at widths 96..1536 (one compiled program per width and optimizer,
# shared by the plugins; lr 1e-4 keeps every change within 10% of its activation, as the check's own choice does)
MODEL = {"in_shape": (8, 8, 3), "depth": 1}


@dataclasses.dataclass(frozen=True)
class SlowHidden(MuP):
    """muP whose optimizer builder gives the hidden matrices of one family an LR exponent one higher than the stated
    table's (an extra 1/m: 4x too small at width 64 over base 16), the stated table muP's."""

    name = "mup_slow_hidden"
    family: str = "spectral"

    def lr_exponent(self, tag: Tag, family: str = "adam") -> float:
        c = super().lr_exponent(tag, family)
        return c + 1 if family == self.family and tag.kind == "hidden" else c


def sweep(param: str, optimizer: str, **param_opt: str) -> dict:
    spec = CoordSpec(param=param, param_opt=param_opt, optimizer=optimizer, model_opt=MODEL, lr=1e-4, steps=2,
                     seeds=2, batch=4)
    return coord_sweep(spec, "width", [32, 128], {})


@pytest.mark.slow
@pytest.mark.parametrize("optimizer, family", [("muon", "spectral"), ("adam", "adam")])
def test_a_hidden_lr_off_by_one_over_m_fails_in_the_hidden_part(optimizer, family, monkeypatch):
    """A hidden LR 1/m too small (Muon's, or Adam's) left every total at muP's slopes, the input layer's change
    swamping the hidden ones, and PASSed; the hidden parameters' own part moves like n^-1 against muP's n^0 and FAILs
    at every layer it reaches, while correct muP passes in the total and in every part."""
    monkeypatch.setitem(P.PLUGINS.entries, SlowHidden.name, SlowHidden)
    wrong = sweep(SlowHidden.name, optimizer, family=family)
    assert all(v.matches for v in wrong["verdicts"] if v.group in ("hidden", "stream"))  # the totals cannot see it
    hidden = wrong["part_verdicts"]["hidden"]
    assert hidden and not any(v.matches for v in hidden)
    assert all(-1.15 < s < -0.8 for v in hidden for s in v.slopes if v.group in ("hidden", "stream"))
    assert not passed(wrong)
    right = sweep("mup", optimizer)
    assert passed(right), [v for vs in right["part_verdicts"].values() for v in vs if not v.matches]
    assert set(right["part_verdicts"]) == {"input", "hidden", "output"}
    assert set(right["parts"]["hidden"]) == {"pre/0", "blocks/0"}  # not the embedding below it, nor the logits
    assert set(right["parts"]["output"]) == {"output"}


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


def plain_init(key, width: int, depth: int) -> dict:
    """A plain-JAX MLP in SP form: 192 inputs -> width -> width -> 10 classes, fan-in std."""
    k1, k2, k3 = jax.random.split(key, 3)
    return {"embed": jax.random.normal(k1, (192, width)) / 192**0.5,
            "hidden": jax.random.normal(k2, (width, width)) / width**0.5,
            "readout": jax.random.normal(k3, (width, 10)) / width**0.5}


def plain_apply(params: dict, x: jax.Array, width: int, depth: int) -> tuple[jax.Array, dict]:
    h0 = x.reshape(x.shape[0], -1) @ params["embed"]
    h1 = jax.nn.relu(h0) @ params["hidden"]
    return jax.nn.relu(h1) @ params["readout"], {"embed": h0, "pre": h1}


@pytest.mark.slow
def test_any_model_judges_its_parts_too():
    """The coordinate check of a model zoo does not build (zoo.diagnostics.coord_any) judges the same parts: muP
    whose hidden Adam LR has an extra 1/m keeps its totals and FAILs in its hidden part, muP passes (a zero readout,
    as muP allows: a random one's V0 . Delta h tilts the total's logits by its n^-1/2 term at these widths)."""
    kx, ky = jax.random.split(jax.random.key(0))
    batch = {"x": jax.random.normal(kx, (4, 192)), "y": jax.random.randint(ky, (4,), 0, 10)}
    kwargs = dict(widths=[32, 128], depth=1, lr=1e-4, steps=2, seeds=2)
    wrong = coord_check(plain_init, plain_apply, SlowHidden(family="adam", zero_init=True), batch, **kwargs)
    assert all(v.matches for v in wrong["verdicts"] if v.group == "hidden")
    assert not wrong["passed"] and not any(v.matches for v in wrong["part_verdicts"]["hidden"])
    right = coord_check(plain_init, plain_apply, MuP(zero_init=True), batch, **kwargs)
    assert right["passed"] and set(right["parts"]) == {"input", "hidden", "output"}
    assert set(right["parts"]["hidden"]) == {"pre"} and set(right["parts"]["output"]) == {"output"}
