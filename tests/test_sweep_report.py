"""Sweep grid parsing and the transfer report (best LR per size, score, diverged points kept and marked)."""

import math

import numpy as np
import pytest

from zoo.sweeps import report
from zoo.sweeps.grid import members, parse_ints, parse_lrs
from zoo.sweeps.runner import summarize as summarize_losses


def test_parse_lrs_range_and_list():
    assert parse_lrs("2^-12:2^-4:1") == [2.0**k for k in range(-12, -3)]
    assert parse_lrs("2^-6:2^-4:0.5") == pytest.approx([2.0**-6, 2.0**-5.5, 2.0**-5, 2.0**-4.5, 2.0**-4])
    assert parse_lrs("-6:-4:1") == [2.0**-6, 2.0**-5, 2.0**-4]
    assert parse_lrs("3e-3, 1e-3,2^-8") == [1e-3, 3e-3, 2.0**-8]
    assert parse_lrs("1e-3,1.00000001e-3,3e-3") == [1e-3, 3e-3]  # one float32: one member, not two alike
    for bad in ("", "a,b", "2^-4:2^-8:1", "2^-8:2^-4:0", "1:2", "-1e-3", "2^-4:2^-2:-1"):
        with pytest.raises(ValueError):
            parse_lrs(bad)


def test_parse_ints_and_members():
    assert parse_ints("128,64,64", "--widths") == [64, 128]
    with pytest.raises(ValueError, match="--depths"):
        parse_ints("4,x", "--depths")
    lr, seed = members([0.1, 0.2], 3)
    assert lr.tolist() == [0.1] * 3 + [0.2] * 3 and seed.tolist() == [0, 1, 2] * 2


def test_divergence_rule():
    chance = math.log(10)
    assert summarize_losses(np.array([2.3, 1.0, 0.5, 0.4] * 5), chance) == (pytest.approx(0.45), False)
    assert summarize_losses(np.array([2.3, 1.0, np.nan, np.nan]), chance)[1]
    assert summarize_losses(np.array([2.5, 3.0, 4.0, 5.0]), chance)[1]  # ends well above start and chance
    assert not summarize_losses(np.array([2.5, 2.5, 2.6, 2.6]), chance)[1]  # did not learn (warmup): not diverged
    assert not summarize_losses(np.array([9.0, 3.0, 3.5, 3.0]), chance)[1]  # SP-like large start, improved
    assert summarize_losses(np.array([900.0, 500.0, 400.0, 400.0]), chance)[1]  # exploded forward pass


def records(best_by_depth, diverge_from):
    """Parabolas in log2 LR with minima at best_by_depth[d]; LRs at or above diverge_from[d] diverged."""
    out = []
    for depth, best in best_by_depth.items():
        for k in range(-10, -2):
            for seed in (0, 1):
                div = k >= diverge_from[depth]
                loss = None if div and seed else 0.5 + 0.05 * (k - best) ** 2 + 0.01 * seed + 0.001 * depth
                out.append({"width": 64, "depth": depth, "lr": 2.0**k, "log2_lr": float(k), "seed": seed,
                            "train_loss": loss, "eval_loss": loss, "eval_accuracy": 0.5, "diverged": div})
    return out


def test_summary_best_lrs_and_transfer_score(tmp_path):
    s = report.summarize(records({4: -5, 16: -6, 64: -8}, {4: -3, 16: -3, 64: -4}))
    assert s.axis == "depth" and s.grid_step == 1.0
    assert report.best_log2_lrs(s) == {(64, 4): -5.0, (64, 16): -6.0, (64, 64): -8.0}
    assert s.transfer_score == 3.0
    deep = s.curves[2]
    assert deep.diverged.tolist() == [False] * 6 + [True] * 2 and np.isnan(deep.loss[-2:]).all()
    assert deep.best_loss == pytest.approx(0.5 + 0.005 + 0.064)  # seeds averaged
    png = report.plot(s, tmp_path / "p.png", "title")
    assert png.stat().st_size > 10_000
    t = report.table(s, "t")
    assert t.row_count == 3 and "3 grid steps" in str(t.caption)


def test_all_diverged_size_is_kept_but_not_scored():
    s = report.summarize(records({4: -5, 16: -6, 64: -8}, {4: -3, 16: -3, 64: -20}))
    assert s.curves[2].best is None and s.curves[2].diverged.all()
    assert s.transfer_score == 1.0
    assert report.table(s).row_count == 3


def test_width_axis_edge_and_metric_errors():
    recs = [dict(r, width=r["depth"] * 16, depth=8) for r in records({4: -10, 16: -9}, {4: 0, 16: 0})]
    s = report.summarize(recs, "eval_loss")
    assert s.axis == "width" and s.curves[0].at_edge and not s.curves[1].at_edge
    with pytest.raises(ValueError, match="metric"):
        report.summarize(recs, "accuracy")
    with pytest.raises(ValueError, match="no results"):
        report.summarize([])
