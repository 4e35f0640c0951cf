"""A resumed run's summary is the uninterrupted run's: its best eval counts the evals before the resume, the
run-start report a hook added is kept (in a fork too), and a run killed after its last eval is not evaluated twice."""

from __future__ import annotations

import json
import shutil

import jax
import numpy as np
import pytest
from cli_utils import TINY_RUN

from zoo.config import resolve
from zoo.train.hooks import Hook
from zoo.train.load import read_state
from zoo.train.loop import train


def test_a_resumed_runs_best_eval_counts_the_evals_before_its_start(tmp_path):
    """A run's summary keeps the best eval over the whole run, also when it was stopped and resumed: the best was
    kept in memory only, so a run resumed from step 6 of 12 (evals every 3 at lr 0.3, where the eval loss climbs
    5.36, 5.47, 6.80, 7.29) reported a best loss of 6.80 where the uninterrupted run's is 5.36. And what a run-start
    hook adds to the summary (the `critical` plugin's report) was missing from a resumed run's, and a fork's."""
    def cfg(run):
        return resolve({**TINY_RUN, "steps": 12, "eval_every": 3, "ckpt_every": 3, "keep": 4, "lr": 0.3,
                        "run_dir": str(run)})

    report = [Hook("report", lambda loop, step: loop.evals.extra.update(report={"at": step}), at_start=True)]
    whole = train(cfg(tmp_path / "whole"), report)
    shutil.copytree(tmp_path / "whole", tmp_path / "resumed")  # as if stopped after saving step 6
    for step in (12, 9):
        shutil.rmtree(tmp_path / "resumed" / "checkpoints" / str(step))
    (tmp_path / "resumed" / "summary.json").unlink()
    resumed = train(cfg(tmp_path / "resumed"), report)
    assert whole["best_eval"]["loss"] < whole["final_eval"]["loss"]  # the best is an eval before step 6
    assert resumed["best_eval"] == whole["best_eval"]
    assert resumed["final_eval"] == whole["final_eval"]
    assert resumed["report"] == whole["report"] == {"at": 0}
    # the clock goes on from the checkpoint's: the best (before step 6) keeps the first process's time, and the
    # run's wall seconds count the first process up to its step-6 checkpoint (time_to_best_s was {} and wall_s this
    # process's alone)
    saved = json.loads((tmp_path / "resumed" / "checkpoints" / "6" / "meta" / "metadata").read_text())
    assert resumed["time_to_best_s"]["loss"] == whole["time_to_best_s"]["loss"] == saved["best_time"]["loss"]
    assert set(resumed["time_to_best_s"]) == set(whole["time_to_best_s"])  # a best after step 6: this process's time
    assert resumed["wall_s"] > saved["wall_s"] > whole["time_to_best_s"]["loss"]
    fork = train(resolve({**TINY_RUN, "steps": 12, "eval_every": 3, "lr": 0.3, "run_dir": str(tmp_path / "fork"),
                          "fork_from": f"{tmp_path / 'whole'}:6"}), report)
    assert fork["report"] == {"at": 0}  # a fork starts at its source's step: its run-start report is the source's


def test_a_run_killed_after_its_last_eval_is_not_evaluated_twice(tmp_path, capsys):
    """A run killed after its last checkpoint and eval, before summary.json, resumes at its last step: it evaluated
    that step again and appended a second eval row of it to metrics.jsonl. The row written before the kill is kept
    as the summary's, and no step's eval appears twice. It compiled a train step it never ran, and its summary lacked
    the speed keys an uninterrupted run's has: they are null (this process trained no step)."""
    cfg = resolve({**TINY_RUN, "steps": 4, "eval_every": 2, "ckpt_every": 2, "run_dir": str(tmp_path / "run")})
    whole = train(cfg)
    (tmp_path / "run" / "summary.json").unlink()
    capsys.readouterr()
    resumed = train(cfg)
    assert "compiling the train step" not in "".join(capsys.readouterr())
    assert set(resumed) == set(whole) and resumed["ms_per_step"] is None is resumed["examples_per_s"]
    assert whole["ms_per_step"] > 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "eval"] == [2, 4]
    assert resumed["final_eval"] == whole["final_eval"] and resumed["best_eval"] == whole["best_eval"]
    (tmp_path / "run" / "summary.json").unlink()
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["split"] == "eval"
    (tmp_path / "run" / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # killed before the last eval
    assert train(cfg)["final_eval"] == whole["final_eval"]


def test_a_finished_run_whose_final_checkpoint_cannot_be_read_trains_its_last_steps_again(tmp_path, capsys):
    """A finished run whose final checkpoint's metadata was damaged: the rerun said 'finished; nothing to do', and
    every reader (zoo.export, --init-from) fell back to the step before. The rerun now moves it to corrupt/ and
    trains from the newest that reads, remaking the final checkpoint bit for bit and the same summary."""
    cfg = resolve({**TINY_RUN, "steps": 4, "eval_every": 2, "ckpt_every": 2, "run_dir": str(tmp_path / "run")})
    whole = train(cfg)
    before = jax.tree.leaves(read_state(tmp_path / "run", 4)[0])
    (tmp_path / "run" / "checkpoints" / "4" / "meta" / "metadata").write_text("{x")
    again = train(cfg)
    out = "".join(capsys.readouterr())
    assert "is finished, but checkpoint" in out and "cannot be read" in out and "nothing to do" not in out, out
    assert (tmp_path / "run" / "corrupt" / "4").is_dir()
    after = jax.tree.leaves(read_state(tmp_path / "run", 4)[0])
    assert len(after) == len(before) and all(np.array_equal(a, b) for a, b in zip(after, before, strict=True))
    assert again["final_eval"] == whole["final_eval"]
    assert "nothing to do" in (train(cfg), "".join(capsys.readouterr()))[1]


def test_a_fork_at_another_seq_len_names_the_flag(tmp_path):
    """A fork of a text run at another --seq-len was refused as data 'changed since the run, or another set'; the
    line names --seq-len and the source's value."""
    base = {**TINY_RUN, "model": "gpt", "data": "synthetic:text", "model_opt": {"head_dim": 8}, "steps": 2,
            "ckpt_every": 2}
    train(resolve({**base, "seq_len": 16, "run_dir": str(tmp_path / "a")}))
    with pytest.raises(ValueError, match=r"--fork-from .*a: it trained at --seq-len 16, this run asks for 32; a fork "
                                         r"keeps the model and its inputs' shape: give --seq-len 16$"):
        train(resolve({**base, "seq_len": 32, "steps": 3, "fork_from": str(tmp_path / "a"),
                       "run_dir": str(tmp_path / "b")}))
    assert not (tmp_path / "b").exists()
