"""Equivalent parametrizations train identically (TP IVb Prop 2.2.3): the cheapest detector of a rule applied
twice or not at all. All at n = 8/3 n0 (not a power of 2, so the rescalings round), fp32, with an Adam epsilon
that matters (3e-3: 2-10% of the faithful gradients m^d g, 0.03-0.15 here), so epsilon has to move with the gauge.
Trajectories: 3 steps from one init on one batch, compared by logits and losses."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from param_helpers import batch, program, trajectory

import zoo.models as M
import zoo.param as P
from zoo.optim import OptimConfig
from zoo.param.tags import Tag
from zoo.train.step import build_program

EPS = 3e-3
MUP_ABCD = {"input": "0,0,0,1", "hidden": "0,0.5,1,1", "output": "1,0,0,1", "vector": "0,0,0,1"}


@functools.cache
def run(plugin, optim="adam", lr=1e-2):
    return trajectory(program(plugin, optim, lr=lr, eps=EPS, base_width=24, base_depth=2), batch())


def deviation(a, b) -> float:
    """Largest difference of logits over the trajectory, relative to their scale, and of the losses."""
    scale = max(np.abs(s["logits"]).max() for s in a)
    dl = max(np.abs(x["logits"] - y["logits"]).max() for x, y in zip(a, b, strict=True)) / scale
    return max(dl, max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a[1:], b[1:], strict=True)))


@pytest.mark.parametrize("optim,lr", [("adam", 1e-2), ("sgd", 0.1), ("muon", 2e-2)])
def test_mup_gauges_train_identically(optim, lr):
    """TP IVb Prop 2.2.3: (a, b, c, d) -> (a+t, b-t, c-t, d+t) leaves training unchanged with epsilon moving as
    m^-d (Rem 2.2.6; for SGD only c - d matters): muP in the IVb, TP-V Table 3 (t = -1 on the readout) and
    mean-field (t = 1/2 on hidden weights) gauges, and the mean_field plugin, agree over 3 steps to 1e-4. Under
    Muon too: its LR exponent c - k/2 shifts with c, and the pre-scale keeps its epsilon in place."""
    ref = run(P.get("mup"), optim, lr)
    for plugin in (P.get("mup", gauge="table3"), P.get("mup", gauge="mean_field"), P.get("mean_field")):
        assert deviation(ref, run(plugin, optim, lr)) < 1e-4, plugin


def test_unshifted_epsilon_is_detected():
    """The gauge test has power: the same shifts with d left unshifted (epsilon not moving with the gauge) change
    the Adam trajectory by over 10x the 1e-4 tolerance, while the correct shift (via `abcd`) does not."""
    ref = run(P.get("mup"))
    good = {**MUP_ABCD, "output": "0,1,1,0"}
    wrong = [{**MUP_ABCD, "output": "0,1,1,1"}, {**MUP_ABCD, "hidden": "0.5,0,0.5,1"}]
    assert deviation(ref, run(P.get("abcd", **good))) < 1e-4
    for exps in wrong:
        assert deviation(ref, run(P.get("abcd", **exps))) > 1e-3, exps


def test_abcd_with_mup_exponents_is_mup():
    """The general abcd plugin given muP's table (TP IVb Def 2.5.1) is muP exactly."""
    assert deviation(run(P.get("mup")), run(P.get("abcd", **MUP_ABCD))) == 0


@pytest.mark.parametrize("optim,lr", [("adam", 1e-2), ("muon", 2e-2)])
def test_abcd_with_a_global_lr_is_sp_in_every_gauge(optim, lr):
    """`sp` is one global LR under every optimizer; abcd takes the spectral map c - k/2 under Muon unless told
    global_lr=true. With it, abcd at SP's exponents, shifted by a gauge on each kind (input +0.2, hidden +0.5, output
    -0.5), trains as `sp` does (1e-4); without it, under Muon, the hidden matrices' LR is m^(1/2) apart (m = 8/3)."""
    shifted = {"input": "0.2,-0.2,-0.2,0.2", "hidden": "0.5,0,-0.5,0.5", "output": "-0.5,1,0.5,-0.5"}
    ref = run(P.get("sp"), optim, lr)
    assert deviation(ref, run(P.get("abcd", global_lr=True, **shifted), optim, lr)) < 1e-4
    assert deviation(ref, run(P.get("abcd", global_lr=True), optim, lr)) == 0
    if optim == "muon":
        assert deviation(ref, run(P.get("abcd"), optim, lr)) > 1e-3


@pytest.mark.parametrize("s,name", [(1.0, "mup"), (0.0, "ntk")])
def test_ntk_mup_ends_are_mup_and_ntk(s, name):
    """seed_yaida_and_lecture.md 1.2 / TP IVb Rem 2.8.25: ntk_mup at s = 1 is muP's table and at s = 0 NTK's up
    to a gauge shift of 1/2 on hidden weights, so both train identically (3 Adam steps, rtol 1e-4)."""
    assert deviation(run(P.get(name)), run(P.get("ntk_mup", s=s))) < 1e-4


def test_tied_readout_keeps_the_gauge():
    """A GPT readout tied to the token embedding (f = mult * h E^T, E input kind) trains identically in the IVb,
    Table 3 and mean-field gauges of muP: the tied multiplier is the output rule shifted onto E's init (TP IVb Prop
    2.2.3), m^-1 in every gauge, not the gauge's own readout multiplier (1 in Table 3, whose logits then start 2.7x
    too large at n = 8/3 n0 and move like n). Adam, 3 steps, logits and losses within 1e-4."""
    cfg = M.config("gpt", width=64, base_width=24, depth=1, head_dim=8, seq_len=8, vocab_size=16,
                   tie_embeddings=True, scan=False, dropout=0.0)  # dropout (its masks equal in every gauge) is not
    # what this checks, and its RNG program compiles slowly
    tokens = jax.random.randint(jax.random.key(1), (4, 9), 0, 16)
    data = {"x": tokens[:, :-1], "y": tokens[:, 1:]}

    def tied(plugin):
        return trajectory(build_program(lambda r: M.create("gpt", cfg, plugin, r), plugin,
                                        OptimConfig(name="adam", lr=1e-2, eps=EPS)), data, jit=True)

    ref = tied(P.get("mup"))
    for plugin in (P.get("mup", gauge="table3"), P.get("mup", gauge="mean_field")):
        assert deviation(ref, tied(plugin)) < 1e-4, plugin


@pytest.mark.parametrize("plugin, other", [
    (P.get("ntk_mup", s=1.0), P.get("mup")), (P.get("ntk_mup", s=0.0), P.get("ntk")),
    (P.get("mean_field"), P.get("mup", gauge="table3")), (P.get("completep", gauge="mean_field"), P.get("completep"))])
@pytest.mark.parametrize("m", [0.5, 3.0, 5.5])
def test_gauge_equal_plugins_train_alike_at_any_width(plugin, other, m):
    """Plugins one gauge shift apart (TP IVb Prop 2.2.3; ntk_mup's ends are muP and NTK, seed_yaida_and_lecture.md
    1.2) have the same multiplier-free form: init std, gradient pre-scale, LR multiplier of every optimizer family,
    weight decay and attention scale, at widths off the powers of 2 the other tests use (rel 1e-9)."""
    forms = [P.multiplier_free(p, head_dim=int(8 * m), base_head_dim=8) for p in (plugin, other)]
    for kind in ("input", "hidden", "output", "vector", "scalar"):
        for role in ("", "query", "branch_output"):
            fan_in, fan_out = (int(7 * m) if kind in ("hidden", "output") else 7,
                               int(9 * m) if kind in ("input", "hidden", "vector") else 9)
            tag = Tag(kind, fan_in, fan_out, width_mult=m, branch=True, depth=12, base_depth=4, role=role)
            rules = [[f.init_std(tag, 0.3), f.grad_scale(tag), f.wd_mult(tag),
                      *(f.lr_mult(tag, family) for family in ("adam", "sgd", "spectral"))] for f in forms]
            assert rules[0] == pytest.approx(rules[1], rel=1e-9), (kind, role)
    assert plugin.attn_scale(int(8 * m), 8) == pytest.approx(other.attn_scale(int(8 * m), 8), rel=1e-9)
