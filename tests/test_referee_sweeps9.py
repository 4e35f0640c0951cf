"""Referee round 9 (sweeps, transfer, zoo.papers): the papers' LR sweeps over worker processes, and the sweep grid,
divergence, resume and transfer-score rules at settings the other tests do not use."""

from __future__ import annotations

import functools
import json
import re

import numpy as np
import pytest
from cli_utils import clean_error

import zoo.data
from zoo.cli import papers as papers_cli
from zoo.config import resolve
from zoo.optim import OptimConfig
from zoo.papers import lr_sweep
from zoo.sweeps import report, results, transfer_report
from zoo.sweeps.grid import parse_lrs
from zoo.sweeps.processes import usable_core_ids
from zoo.sweeps.runner import SweepSpec, run_sweep
from zoo.sweeps.transfer import Arm, TransferSpec

two_cores = pytest.mark.skipif(len(usable_core_ids()) < 2, reason="needs two cores")


@two_cores
def test_a_papers_sweep_over_two_processes_gives_the_one_programs_numbers():
    """lr_sweep.sweep (tp6-depth-transfer's, tp6-abs-vs-relu's, tp4b-adam-width's sweeps) with processes=2 trains
    the same members as one program: its plugin and data loader pickle to the workers, each member's options (the
    arm) go with it, and every record is the same to float tolerance (it could not run over processes before: its
    programs were closures)."""
    arms = {"a": {"alpha": 0.5, "gamma": 0.5, "branch_mult": 2.0}, "b": {"alpha": 1.0, "gamma": 0.0,
                                                                       "branch_mult": 0.5}}
    sweep = functools.partial(
        lr_sweep.sweep, "mlp_resnet", lr_sweep.Plugin("depth_mup", {"freeze": "input,output"}), arms,
        OptimConfig("adam"), functools.partial(zoo.data.load, "synthetic:teacher"), [(8, 2)], [-7, -3],
        steps=3, batch_size=8, base_width=1, base_depth=2, fast_compile=True, echo=lambda _: None)
    one, two = sweep(processes=1), sweep(processes=2)
    assert [(r["arm"], r["log2_lr"]) for r in two] == [(r["arm"], r["log2_lr"]) for r in one] == \
        [("a", -7.0), ("a", -3.0), ("b", -7.0), ("b", -3.0)]
    losses = np.array([r["train_loss"] for r in one])
    assert len(set(losses.round(6))) == 4  # the arms and LRs train differently, so a mix-up would show
    np.testing.assert_allclose([r["train_loss"] for r in two], losses, rtol=1e-5)
    assert [r["diverged"] for r in two] == [r["diverged"] for r in one]


@pytest.mark.parametrize("argv, message", [
    (["run", "dhg-apjn", "--quick", "--processes", "2"],
     "--processes: dhg-apjn cannot split over worker processes: it trains no LR sweep"),
    (["run", "tp6-diversity", "--quick", "--processes", "2"],
     "--processes: tp6-diversity cannot split over worker processes: its diversity probe reads"),
    (["run", "tp6-depth-transfer", "--quick", "--processes", "0"],
     "argument --processes: expected a positive integer, got '0'"),
    (["run", "tp6-depth-transfer", "--quick", "--processes", "100000"],
     "--processes 100000 asks for more worker processes than the"),
])
def test_papers_processes_that_cannot_run_are_one_line_before_the_experiment(argv, message, tmp_path, capsys):
    """A claim that trains no sweep (or whose probe needs its members' weights here), a count below 1 or above the
    cores: one line, a non-zero status, and nothing written."""
    with pytest.raises(SystemExit) as e:
        papers_cli.main([*argv, "--out", str(tmp_path / "out")])
    assert e.value.code != 0 and message in clean_error(e.value.code, capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_results_without_their_settings_file_are_refused_not_taken_as_this_sweeps(tmp_path):
    """DIR/results.jsonl whose sweep.json was removed: the sweep wrote a new sweep.json, skipped those members as
    finished and reported a 5-step sweep's losses under a 7-step title. Now one line, and nothing written."""
    (tmp_path / results.RESULTS).write_text(json.dumps({"width": 8, "depth": 1, "lr": 0.01, "seed": 0, "steps": 5})
                                            + "\n")
    with pytest.raises(ValueError, match=r"holds 1 member results \(results.jsonl\) but no sweep.json: the settings "
                                         "that trained them are unknown"):
        results.check_settings(tmp_path, {"steps": 7}, lambda _: None)
    assert not (tmp_path / results.SETTINGS).exists()
    results.check_settings(tmp_path / "new", {"steps": 7}, lambda _: None)  # an empty DIR starts a sweep
    assert json.loads((tmp_path / "new" / results.SETTINGS).read_text()) == {"steps": 7}


def test_transfer_score_by_hand_and_the_sizes_it_leaves_out():
    """README: the transfer score is max - min of the best log2 LR across sizes, in grid steps. A half-step grid
    (log2 LR -10, -9.5, -9, -8: step 0.5, the smallest gap), seeds averaged, a diverged point never best: width 16's
    best is -8, width 32's -9.5 (its seeds' means 1.6 < 1.8), width 64's -10 (its -8 diverged in one seed), so the
    score is (-8 - (-10)) / 0.5 = 4. Width 128 diverged at every LR and has no best: the caption read '4 grid steps'
    as if the LR transferred across all four widths; it now names the size it leaves out."""
    losses = {16: {-10: 2.0, -9.5: 1.9, -9: 1.8, -8: 1.7}, 32: {-10: 2.0, -9.5: 1.6, -9: 1.8, -8: 1.9},
              64: {-10: 1.0, -9.5: 1.5, -9: 1.8, -8: 0.5}, 128: {-10: 0.1, -9.5: 0.1, -9: 0.1, -8: 0.1}}
    records = [{"width": w, "depth": 2, "lr": 2.0**x, "log2_lr": x, "seed": seed, "train_loss": loss + 0.1 * seed,
                "diverged": w == 128 or (w == 64 and x == -8 and seed == 1), "eval_accuracy": None}
               for w, row in losses.items() for x, loss in row.items() for seed in (0, 1)]
    summary = report.summarize(records)
    assert summary.grid_step == 0.5
    assert [c.best_log2_lr for c in summary.curves] == [-8.0, -9.5, -10.0, None]
    assert summary.curves[1].best_loss == pytest.approx(1.65)  # (1.6 + 1.7) / 2
    assert summary.transfer_score == 4.0
    assert report.table(summary).caption == ("transfer score: 4 grid steps (grid step 0.5 in log2 LR), over 3 of 4 "
                                             "sizes (width 128 diverged at every LR)")


@pytest.mark.parametrize("text, fix", [("2^-4:2^-12:1", "2^-12:2^-4:1"), ("-4:-12:0.5", "-12:-4:0.5"),
                                       ("2^-12:2^-4:-1", "2^-12:2^-4:1"), ("-12:-4:0", "-12:-4:1"),
                                       ("2^-4:2^-12:-2", "2^-12:2^-4:2")])
def test_a_range_given_downward_or_with_a_step_not_above_zero_says_so(text, fix):
    """--lrs 2^-4:2^-12:1 (LRs in decreasing order) was 'cannot read learning rates', as if it were no number; the
    line now says a range runs upward by a positive step and gives the range meant. A comma list in decreasing
    order, repeats included, is still one sorted member per LR."""
    with pytest.raises(ValueError, match=rf"must run upward by a positive log2 step .*: give {re.escape(fix)}$"):
        parse_lrs(text)
    assert parse_lrs("2^-6,2^-8,2^-6,2^-10") == [2.0**-10, 2.0**-8, 2.0**-6]


def test_a_base_size_given_is_not_said_to_default_when_a_rerun_is_refused_for_it(tmp_path):
    """A transfer's sweeps take the proxy's size as their base (given, not defaulted): a rerun with --proxy-width 16
    into an --out of --proxy-width 8 was refused with '(the base width and depth default to the smallest swept: give
    --base-width/--base-depth)', advice that cannot apply (the flag was set: the proxy). The hint now comes only
    where the base was left to default; the refusal itself is unchanged, before anything trains."""
    settings = {"model": "mlp_resnet", "param": "mup", "data": "synthetic", "steps": 3, "batch_size": 8}

    def spec(**base):
        return SweepSpec(run=resolve({**settings, **base}), lrs=[1e-3], out=tmp_path, widths=[32], depths=[1])

    results.check_settings(tmp_path, spec(base_width=8, base_depth=1).settings(3), lambda _: None)
    results.append(tmp_path, [{"width": 32, "depth": 1, "lr": 1e-3, "seed": 0}])
    with pytest.raises(ValueError, match=r"other settings \(base_width 8 there, 16 here\); use another --out"):
        run_sweep(spec(base_width=16, base_depth=1), echo=lambda _: None)
    with pytest.raises(ValueError, match=r"\(base_width 8 there, 32 here\) \(the base width and depth default to the "
                                         r"smallest swept: give --base-width/--base-depth\)"):
        run_sweep(spec(), echo=lambda _: None)
    assert len(results.read(tmp_path)) == 1


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
