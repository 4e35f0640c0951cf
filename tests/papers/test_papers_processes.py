"""`python -m zoo.papers run NAME --processes N`: the claims' LR sweeps over worker processes give the one program's
numbers, and a claim or count that cannot split is one line before the experiment."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from cli_utils import clean_error

import zoo.data
from zoo.cli import papers as papers_cli
from zoo.optim import OptimConfig
from zoo.papers import lr_sweep
from zoo.sweeps.processes import usable_core_ids

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
