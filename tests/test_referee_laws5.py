"""Referee pass 5 over the laws, the optimizers and Muon, at settings the other tests do not use (odd widths, depths
3/5/7, non-default alpha): each test fails without the fix it names."""

from __future__ import annotations

import pytest

import zoo.param as P
from zoo.diagnostics import coord_sweep, verdict
from zoo.param.tags import Tag


@pytest.mark.parametrize("alpha", [0.5, 0.75])
def test_completep_takes_gamma_1_minus_alpha(alpha):
    """CompleteP's family (Dey et al. 2025): branch multiplier L^-alpha, branch LR L^(alpha - 1). completep with
    alpha=0.5 kept gamma = 0 (alpha + gamma = 0.5: updates growing like L^0.5, unstable by TP VI) where the paper's
    rule, and depth_mup, give gamma = 1/2."""
    plugin = P.get("completep", alpha=str(alpha))
    tag = Tag("hidden", 96, 96, width_mult=1.5, branch=True, depth=7, base_depth=3)
    assert plugin.gamma == pytest.approx(1 - alpha)
    assert plugin.lr_mult(tag) == pytest.approx(1.5**-1 * (7 / 3) ** (alpha - 1))
    assert plugin.grad_scale(tag) == pytest.approx(1.5 * (7 / 3) ** alpha)  # eps * m^-1 (L/L0)^-alpha
    assert plugin.instabilities("depth") == []
    assert P.get("completep", alpha=0.5).lr_mult(tag, "spectral") == P.get("depth_mup").lr_mult(tag, "spectral")


def test_completep_keeps_a_gamma_given():
    """An explicit gamma is the user's: completep alpha=1 gamma=0.25 (a TP VI family point) keeps it."""
    assert P.get("completep", gamma="0.25").gamma == 0.25
    assert P.get("completep").gamma == 0.0


def _result(unstable: list[str], expected_output: float, slopes: dict[str, float]) -> dict:
    """A width sweep's result as coord_sweep gives it: one verdict per layer at tolerance 0.15."""
    expected = {"output": expected_output, "hidden": 0.0, "stream": 0.0}
    verdicts = [verdict.LayerVerdict(layer, verdict.group_of(layer), [s] * 3, expected[verdict.group_of(layer)],
                                     abs(s - expected[verdict.group_of(layer)]) <= 0.15, False)
                for layer, s in slopes.items()]
    return {"axis": "width", "verdicts": verdicts, "branch_verdicts": [],
            "expected": verdict.Expectation(expected, {}, unstable)}


@pytest.mark.parametrize("unstable, expected_output, slopes, hinted", [
    ([], 0.0, {"output": -0.3, "pre/0": -0.05}, True),  # muP under SGD at widths 40..320: the n^-1/2 transient
    (["the output change grows like width^+1.00"], 1.0, {"output": -0.11, "pre/0": -0.2}, False),  # critical + muon
    ([], 0.0, {"output": -0.3, "pre/0": -0.4}, False),  # the hidden layers fail too: not "only" the output
])
def test_the_readout_hint_only_where_only_the_output_shrinks(unstable, expected_output, slopes, hinted):
    """`coord_check --param critical --optimizer muon --widths 48,96 --seeds 1` (unstable: output expected +1.00,
    measured -0.11, hidden and stream layers failing too) printed 'hint: only shrinking output changes fail ... tilts
    the slope below 0', on a run where the output was not the only failure and its prediction was growth."""
    hint = coord_sweep.readout_hint(coord_sweep.CoordSpec(param="mup"), _result(unstable, expected_output, slopes))
    assert (hint is not None) == hinted


@pytest.mark.parametrize("name, options, sgd_like", [("ntk", {}, -1.0), ("ntk_mup", {"s": "0.3"}, -0.7),
                                                      ("mup", {}, 0.0)])
def test_a_zero_readout_predicts_sgds_slower_features(name, options, sgd_like):
    """With V0 = 0 the backprop goes through the readout's own update, entries n^-c_out, not n^-b_out: under SGD and
    momentum the input and hidden changes of ntk (c_out = 1/2) shrink like n^-1 (measured -0.95..-0.99, tanh, depth
    3, widths 48..200), of ntk_mup s=0.3 like n^-0.7 (measured -0.68, -0.69), where the prediction said n^-1/2 and
    n^-0.35 and the coordinate check failed every layer of a correct run. Adam's and Muon's normalised updates do not
    see it (measured -0.48..-0.52 for ntk under Adam); muP's c_out = b_out = 0 is unchanged."""
    plugin = P.get(name, zero_init="true", **options)
    plain = P.get(name, **options).expected_slopes("adam")
    for optimizer in ("sgd", "momentum"):
        slopes = plugin.expected_slopes(optimizer)
        assert (slopes["input"], slopes["hidden"], slopes["output"]) == pytest.approx((sgd_like, sgd_like, 0.0))
    for optimizer in ("adam", "muon"):
        assert plugin.expected_slopes(optimizer)["hidden"] == pytest.approx(plain["hidden"])

