"""The transfer's report: its verdict (ties, the seeds' noise, a proxy whose best LR is on the grid's edge), the
target loss at the transferred LR, and the target configs it writes."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from zoo.config import RunConfig, resolve
from zoo.sweeps import report, transfer_report
from zoo.sweeps.grid import lr_key
from zoo.sweeps.transfer import Arm, TransferSpec
from zoo.sweeps.transfer_report import seed_noise, target_text, verdict


def test_the_target_loss_is_read_at_the_transferred_lr_not_a_check_lr_beside_it():
    """--check-target 1.9531e-3 beside a transferred 2^-9 = 1.953125e-3: two members (other float32s, other rounded
    log2 LRs), but Arm.transferred took the first point within np.isclose's 1e-5 (relative to |log2 LR|) of it, the
    check LR's, so the table's 'target loss at it' was the check member's (here 1.0 instead of 2.0)."""
    def rec(width, lr, loss):
        return {"width": width, "depth": 2, "seed": 0, "lr": lr, "log2_lr": lr_key(lr), "train_loss": loss,
                "diverged": False, "eval_accuracy": None}

    proxy = report.summarize([rec(16, 2.0**-9, 1.5), rec(16, 2.0**-8, 1.7)])
    target = report.summarize([rec(32, 1.9531e-3, 1.0), rec(32, 2.0**-9, 2.0)])
    assert math.isclose(target.curves[0].log2_lr[0], -9.0, rel_tol=1e-5)  # np.isclose's match, not the same member
    arm = Arm("mup", {}, proxy, [-9.0], proxy.curves[0].best_log2_lr, target, [2.0], checked=True)
    assert arm.transferred == 1 and arm.target_loss == 2.0


def test_a_transfer_whose_proxy_all_diverged_leaves_no_earlier_target_config(tmp_path):
    """A transfer rerun into its --out with another grid (--lrs 2^10, every proxy LR diverged) wrote transfer.json
    with no transferred LR but left OUT/mup/target.json of the earlier grid's LR beside it, a train.py config of a
    target this transfer never chose. It is removed now; an arm with an LR still writes its own."""
    run = resolve({"model": "mlp_resnet", "param": "mup", "data": "synthetic", "steps": 3, "batch_size": 8})
    spec = TransferSpec(run=run, lrs=[2.0**10], proxy=(8, 1), target=(16, 1), out=tmp_path, compare=None)
    proxy = report.summarize([{"width": 8, "depth": 1, "lr": 2.0**10, "log2_lr": 10.0, "seed": 0, "train_loss": None,
                               "diverged": True, "eval_accuracy": None}])
    stale = tmp_path / "mup" / "target.json"
    stale.parent.mkdir()
    stale.write_text(json.dumps({"lr": 2.0**-8}))
    written = transfer_report.write([Arm("mup", {}, proxy, [None], None, None, [], False)], spec)
    assert not stale.exists() and written == [tmp_path / "transfer.png", tmp_path / "transfer.json"]
    assert json.loads((tmp_path / "transfer.json").read_text())["arms"][0]["transferred_lr"] is None


def arm(param: str, target_loss: float | None) -> Arm:
    """An arm whose proxy's best LR is 2^-9 and whose target, trained there, reached `target_loss` (None: it
    diverged)."""
    def record(width: int, lr_log2: float, loss: float | None) -> dict:
        return {"width": width, "depth": 2, "seed": 0, "lr": 2.0**lr_log2, "log2_lr": lr_log2, "diverged": loss is None,
                "train_loss": loss, "eval_accuracy": None}

    proxy = report.summarize([record(16, -10, 2.0), record(16, -9, 1.5), record(16, -8, 1.8)])
    target = report.summarize([record(32, -9, target_loss)])
    return Arm(param, {}, proxy, [-9.0], -9.0, target, [target_loss], False)


SPEC = TransferSpec(run=RunConfig.from_flat({"model": "mlp_resnet", "param": "mup"}), lrs=[1e-3], proxy=(16, 2),
                    target=(32, 2), out=Path("unused"))


def test_an_exact_tie_is_no_win():
    """Equal target losses read "sp's target is better" (the comparison won every tie: la < lb was false); a tie
    is now said as one, whichever arm comes first, and a real difference (or a diverged arm) still has a winner."""
    assert verdict([arm("mup", 1.25), arm("sp", 1.25)], SPEC).startswith("the targets tie: mup's 1.2500, sp's 1.2500")
    assert verdict([arm("sp", 1.25), arm("mup", 1.25)], SPEC).startswith("the targets tie")
    assert verdict([arm("mup", 1.25), arm("sp", 1.2500001)], SPEC).startswith("mup's target is better")
    assert verdict([arm("mup", 1.2500001), arm("sp", 1.25)], SPEC).startswith("sp's target is better")
    assert verdict([arm("mup", None), arm("sp", 1.25)], SPEC).startswith("sp's target is better: 1.2500 vs mup's "
                                                                          "diverged")
    assert verdict([arm("mup", None), arm("sp", None)], SPEC).startswith("neither target trained")


def test_a_target_difference_within_the_seeds_noise_is_no_win():
    """With --target-seeds, 2.5277 +- 0.21 against 2.6371 +- 0.25 read "mup's target is better", a difference
    well inside the seeds' spread. Now the verdict says the lower one is within the noise when the difference is
    below two standard errors of the difference of the means, 2 sqrt(s_a^2 / n_a + s_b^2 / n_b) (ddof 1); a
    difference beyond it, or a single target seed (no spread to judge), is still a win."""
    def seeded(param: str, losses: list[float]) -> Arm:
        return dataclasses.replace(arm(param, float(np.mean(losses))), target_losses=losses)

    mup, sp = seeded("mup", [2.3, 2.5, 2.8]), seeded("sp", [2.4, 2.6, 2.9])  # means 2.5333, 2.6333, s 0.2517 each
    noise = 2 * np.sqrt(2 * np.var([2.3, 2.5, 2.8], ddof=1) / 3)  # 0.4110
    text = verdict([mup, sp], SPEC)
    assert text.startswith("mup's target is lower, within the seeds' noise:")
    assert f"(difference 0.1000 < 2 standard errors {noise:.4f};" in text
    assert verdict([sp, mup], SPEC).startswith("mup's target is lower, within the seeds' noise:")
    apart = seeded("sp", [3.3, 3.5, 3.8])  # 1.0 apart: beyond 0.41
    assert verdict([mup, apart], SPEC).startswith("mup's target is better: 2.5333 +- ")
    assert verdict([arm("mup", 2.5), arm("sp", 2.6)], SPEC).startswith("mup's target is better")


def seeded_arm(param: str, losses: list[float]) -> Arm:
    """An arm whose proxy's best LR is 2^-9 and whose target seeds reached `losses` there."""
    def record(width: int, seed: int, loss: float) -> dict:
        return {"width": width, "depth": 2, "seed": seed, "lr": 2.0**-9, "log2_lr": -9.0, "diverged": False,
                "train_loss": loss, "eval_accuracy": None}

    proxy = report.summarize([record(16, 0, 1.5)])
    target = report.summarize([record(32, i, v) for i, v in enumerate(losses)])
    return Arm(param, {}, proxy, [-9.0], -9.0, target, losses, False)


def test_a_targets_spread_is_the_sample_std_the_noise_rule_uses():
    """The target's "+-" was the population std (ddof 0: 0.2055 for losses 2.3, 2.5, 2.8) beside a noise rule that
    takes the sample std (ddof 1: 0.2517); both are the sample std now, and the text says so."""
    mup, sp = seeded_arm("mup", [2.3, 2.5, 2.8]), seeded_arm("sp", [2.4, 2.6, 2.9])
    assert target_text(mup) == "2.5333 +- 0.2517 (sample std of 3 seeds)"
    assert seed_noise([mup, sp]) == pytest.approx(2 * np.sqrt(2 * 0.2517**2 / 3), rel=1e-3)
    assert target_text(seeded_arm("mup", [2.5])) == "2.5000"


def edge_arm(param: str, best: float, target_loss: float) -> Arm:
    """An arm whose proxy trained log2 LRs -10, -9, -8 with its lowest loss at `best`."""
    losses = {-10.0: 2.0, -9.0: 1.8, -8.0: 1.9} | {best: 1.5}
    proxy = report.summarize([{"width": 16, "depth": 2, "seed": 0, "lr": 2.0**x, "log2_lr": x, "diverged": False,
                               "train_loss": v, "eval_accuracy": None} for x, v in losses.items()])
    target = report.summarize([{"width": 32, "depth": 2, "seed": 0, "lr": 2.0**best, "log2_lr": best,
                                "diverged": False, "train_loss": target_loss, "eval_accuracy": None}])
    return Arm(param, {}, proxy, [best], best, target, [target_loss], False)


@pytest.mark.parametrize("edge", [-10.0, -8.0])
def test_a_proxy_best_on_the_grids_edge_is_named_in_the_verdict(edge):
    """The table marked a proxy's best LR on the grid's end '(grid edge)', but the verdict, the line a reader (and
    transfer.json, and the figure's title) takes, named a winner without a word: that proxy's optimum may lie past
    the grid, so the LR it handed on, and the comparison, are bounds. The verdict now names the arm; an interior
    best adds nothing."""
    inside, outside = edge_arm("mup", -9.0, 1.2), edge_arm("sp", edge, 1.4)
    text = verdict([inside, outside], SPEC)
    assert text.startswith("mup's target is better: 1.2000 vs sp's 1.4000; but the proxy's best LR is on the grid's "
                           f"edge for sp's (log2 LR {edge:g}): its optimum may lie past the grid, widen --lrs"), text
    assert "edge" not in verdict([inside, edge_arm("sp", -9.0, 1.4)], SPEC)
    assert "edge for mup's (log2 LR -8), sp's (log2 LR -10)" in verdict([edge_arm("mup", -8.0, 1.2),
                                                                         edge_arm("sp", -10.0, 1.4)], SPEC)
