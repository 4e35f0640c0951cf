"""The claims' checks (zoo.papers) can fail: a best LR on the grid's edge is no transfer, one settled depth cannot
show an LR staying put, a phase diagram that compared nothing fails, and the width claims' page states each transfer
score as a number."""

from __future__ import annotations

import numpy as np

from zoo.papers import dhg_phase, lr_sweep, tp4b_adam_width, tp6_depth_transfer
from zoo.sweeps import report


def _records(arm: str, best: dict[tuple[int, int], int], log2_lrs: list[int]) -> list[dict]:
    """One seed per (size, LR); the loss is lowest at best[size] and rises by 0.1 per grid step away from it."""
    return [{"arm": arm, "width": w, "depth": d, "lr": 2.0**x, "log2_lr": float(x), "seed": 0,
             "train_loss": 1.0 + 0.1 * abs(x - b), "diverged": False, "eval_accuracy": None}
            for (w, d), b in best.items() for x in log2_lrs]


def test_a_best_lr_on_the_grid_edge_at_every_width_is_no_transfer():
    """A sweep whose loss still falls at the largest LR (best on the grid's edge at every width) located no optimum:
    tp4b's 'muP's best LR stays put' passed it (transfer score 0), as it would pass SP's on too narrow a grid."""
    grid = [-8, -7, -6, -5]
    edge = _records("muP", {(w, 1): -5 for w in (16, 32, 64)}, grid)
    inside = _records("muP", {(16, 1): -7, (32, 1): -7, (64, 1): -6}, grid)
    sp = _records("SP", {(16, 1): -7, (32, 1): -7, (64, 1): -7}, grid)
    coord = {"g": {tp4b_adam_width.CAVEAT_ARM: {"slopes": {"output": [0.5, 0.5]},
                                                "rms": {"output": [[1.0, 1.0], [1.4, 1.4], [2.0, 2.0]]}}}}
    setting = {"image": {"data": "img"}, "text": {"data": "txt"}, "coord": {"inputs": ["g"], "widths": [16, 32, 64]}}
    n = {"setting": setting, "image": edge + sp, "text": inside + sp, "coord": coord}
    stays = {c.claim.split(":")[0]: c for c in tp4b_adam_width.checks(n) if "stays put" in c.claim}
    assert not stays["img"].passed and "grid's edge" in stays["img"].why_not
    assert stays["txt"].passed  # one step of a located best is within the rule
    assert lr_sweep.best_spread(report.summarize(inside), "width") == (1.0, "")


def test_depth_mups_lr_cannot_stay_put_over_one_settled_depth():
    """tp6-depth-transfer's 'stays put from depth 4 L0 on' read a spread of 0 over one settled depth (the quick
    setting: depths 2, 8 at base 2 leave only 8), a check that could not fail; two depths are needed."""
    s = {**tp6_depth_transfer.QUICK, "depths": [2, 8], "base_depth": 2}
    grid = s["log2_lrs"]
    arms = [{"label": label, "alpha": a, "gamma": g, "branch_mult": m,
             "records": _records(label, {(16, 2): grid[1], (16, 8): grid[1]}, grid)}
            for label, a, g, m in tp6_depth_transfer.ARMS]
    check = tp6_depth_transfer.checks({"setting": s, "arms": arms})[0]
    assert "stays put" in check.claim and not check.passed and "one depth" in check.why_not
    s2 = {**s, "depths": [2, 8, 16]}
    for arm in arms:
        arm["records"] = _records(arm["label"], {(16, 2): grid[1], (16, 8): grid[1], (16, 16): grid[1]}, grid)
    assert tp6_depth_transfer.checks({"setting": s2, "arms": arms})[0].passed


def test_dhg_phase_fails_a_grid_that_compared_nothing():
    """dhg-phase passed both checks on a grid where every point sits on the critical line (|chi* - 1| <= 0.05) and
    the analytic line crosses no column: agreement read 100% of no points, and all() of no gaps was True."""
    grid = np.full((2, 2), 1.01)
    panels = [{"variant": v, "activation": "tanh", "chi_star": grid.tolist(), "chi": grid.tolist(),
               "chi_at_depth": grid.tolist(), "line": [None, None]} for v in dhg_phase.VARIANTS]
    n = {"setting": {"depth": 6, "width": 16, "sigma_w": [1.0, 1.1], "sigma_b": [0.0, 0.5]}, "panels": panels}
    checks = dhg_phase.checks(n)
    assert len(checks) == 4 and not any(c.passed for c in checks)
    assert all("nothing was compared" in c.why_not for c in checks)


def test_the_width_claims_page_states_each_transfer_score_as_a_number():
    """0c39988 made tp4b-adam-width's _best return the sweep's summary where the page's result line took its transfer
    score, and the page then printed 'transfer score Summary(curves=[Curve(...), ...]) grid steps'. Read from the
    committed numbers, each arm's score is a number of grid steps again."""
    from cli_utils import ROOT

    from zoo.papers.page import read

    numbers = read(ROOT / "docs" / "papers" / tp4b_adam_width.NAME)["numbers"]
    text = tp4b_adam_width.result(numbers)
    assert "Summary(" not in text
    assert text.count("transfer score ") == 4 and "(transfer score 3.0 grid steps)" in text, text
