"""An outside referee's inputs to the command lines, run dirs, resume, finetune, export, sample and data
preparation that zoo's other tests do not use: each was misreported, accepted silently or ended in a traceback
before its fix."""

from __future__ import annotations

import shutil

import pytest

from zoo.config import resolve
from zoo.train.loop import train

TINY = {"model": "mlp_resnet", "width": 8, "depth": 1, "data": "synthetic:teacher", "batch_size": 8,
        "eval_batch_size": 64, "log_every": 2}


def test_a_resumed_runs_best_eval_counts_the_evals_before_its_start(tmp_path):
    """A run's summary keeps the best eval over the whole run, also when it was stopped and resumed: the best was
    kept in memory only, so a run resumed from step 6 of 12 (evals every 3 at lr 0.3, where the eval loss climbs
    5.36, 5.47, 6.80, 7.29) reported a best loss of 6.80 where the uninterrupted run's is 5.36."""
    def cfg(run):
        return resolve({**TINY, "steps": 12, "eval_every": 3, "ckpt_every": 3, "keep": 4, "lr": 0.3,
                        "run_dir": str(run)})

    whole = train(cfg(tmp_path / "whole"))
    shutil.copytree(tmp_path / "whole", tmp_path / "resumed")  # as if stopped after saving step 6
    for step in (12, 9):
        shutil.rmtree(tmp_path / "resumed" / "checkpoints" / str(step))
    (tmp_path / "resumed" / "summary.json").unlink()
    resumed = train(cfg(tmp_path / "resumed"))
    assert whole["best_eval"]["loss"] < whole["final_eval"]["loss"]  # the best is an eval before step 6
    assert resumed["best_eval"] == whole["best_eval"]
    assert resumed["final_eval"] == whole["final_eval"]


def test_an_empty_criticality_out_is_a_bad_command_line(tmp_path, monkeypatch, capsys):
    """`python -m zoo.criticality --out ""` (an unset shell variable) wrote criticality.json into the current folder,
    where every other command refuses an empty path in one line."""
    from zoo.cli import criticality

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        criticality.main(["--width", "8", "--depth", "2", "--seeds", "1", "--out", ""])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and len(err.splitlines()) == 1 and "--out" in err and "empty" in err, err
    assert list(tmp_path.iterdir()) == []
