"""zoo.param.predict: the coordinate-check slopes theory expects (seed_tp4b_adam.md) where a kind is frozen (it
does not move) and under a zero readout (SGD's backprop goes through the readout's own update)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import zoo.param as P
from zoo.diagnostics import verdict


def test_frozen_kinds_are_predicted_not_to_move():
    """freeze (TP VI's depth experiments train only the residual blocks): a group nothing trained moves is predicted
    not to move (NaN) and passes when its change is exactly 0; r runs over the trained kinds. Before, the frozen input
    layer was expected at L^0 and its zero change FAILED every such coordinate check, and with every parameter
    outside the branches frozen the totals kept the Theta(1) floor those parameters would have added."""
    kinds, outside = ("hidden", "input"), ("input", "output")
    plugin = P.get("depth_mup", gamma=1.0, freeze="input,output")
    total = plugin.expected_slopes("adam", "depth", kinds, outside=outside)
    assert math.isnan(total["input"]) and total["stream"] == total["output"] == -0.5  # L^(1 - alpha - gamma)
    assert P.get("depth_mup", gamma=1.0).expected_slopes("adam", "depth", kinds, outside=outside)["stream"] == 0.0
    width = P.get("mup", freeze="input,hidden").expected_slopes("adam", "width", kinds)
    assert all(math.isnan(width[g]) for g in ("input", "hidden", "stream", "attention")) and width["output"] == 0.0
    assert P.get("ntk", freeze="hidden").expected_slopes("sgd", "width", kinds)["hidden"] == -0.5  # r_in = 1/2
    data = {"embed": np.zeros((2, 3)), "blocks/0": np.ones((2, 3))}
    slopes = {"embed": np.full(3, np.nan), "blocks/0": np.zeros(3)}
    verdicts = verdict.judge(slopes, data, {"input": math.nan, "stream": math.nan})
    assert [v.passed for v in verdicts] == [True, False]  # the stream moved where nothing should have moved it


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

