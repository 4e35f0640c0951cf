"""A SIGTERM or SIGINT that comes during an eval stops the run at once (the eval left unfinished, the step saved,
exit 143 / 130), and the rerun does that eval first: the run's rows are the uninterrupted run's. The stop flag was
read only between steps, so an eval of `--eval-iters 200000` ignored every signal until SIGKILL."""

from __future__ import annotations

import itertools
import os
import signal

import numpy as np
import pytest
from cli_utils import TINY_RUN, metrics

import zoo.train.estimate
from zoo.config import resolve
from zoo.errors import Stopped
from zoo.train.compiled import Compiled
from zoo.train.loop import train

RUN = {**TINY_RUN, "steps": 8, "eval_every": 4, "eval_batch_size": 8, "ckpt_every": 100}


def signal_in_the_first_eval(monkeypatch, method: str, owner, at: int = 1, signum: int = signal.SIGTERM) -> None:
    """`owner.method` sends `signum` to this process on its `at`-th call, then runs as it does."""
    original, calls = getattr(owner, method), []

    def wrapped(*args, **kwargs):
        calls.append(1)
        if len(calls) == at:
            os.kill(os.getpid(), signum)  # the handler runs before the next bytecode: during the eval
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, method, wrapped)


@pytest.mark.parametrize("where", ["eval", "sampled"])
def test_a_signal_during_an_eval_stops_there_and_the_rerun_does_that_eval(tmp_path, monkeypatch, where):
    settings = {**RUN, "eval_iters": 50} if where == "sampled" else RUN
    whole = tmp_path / "whole"
    train(resolve({**settings, "run_dir": str(whole)}))
    run = tmp_path / "stopped"
    with monkeypatch.context() as m:
        if where == "eval":
            signal_in_the_first_eval(m, "evaluate", Compiled)
        else:
            signal_in_the_first_eval(m, "batch_loss", Compiled)
        with pytest.raises(Stopped) as stop:
            train(resolve({**settings, "run_dir": str(run)}))
    assert stop.value.signum == signal.SIGTERM
    assert [p.name for p in (run / "checkpoints").iterdir() if p.name.isdigit()] == ["4"]
    assert not metrics(run, "eval")  # the eval of step 4 was left unfinished, not logged
    train(resolve({**settings, "run_dir": str(run)}))
    for split in ("train", "eval"):
        assert untimed(metrics(run, split)) == untimed(metrics(whole, split)), split


@pytest.mark.parametrize("step", [4, 8])
def test_a_signal_during_the_eval_a_rerun_redoes_stops_before_any_step(tmp_path, monkeypatch, step):
    """A stop during the eval a rerun does first (the one a stop left unfinished) was lost: at the last step the run
    said 'done' and exited 0, finished without its final eval (its summary's from step 4); at step 4 it trained on
    to step 5 and saved there, so no rerun did step 4's eval again. It stops at once, as during any eval, and the
    next rerun does that eval."""
    whole = tmp_path / "whole"
    train(resolve({**RUN, "run_dir": str(whole)}))
    run = resolve({**RUN, "run_dir": str(tmp_path / "stopped")})
    for at, signum in ((step // 4, signal.SIGTERM), (1, signal.SIGINT)):  # the eval of `step`, then the rerun's
        with monkeypatch.context() as m:
            signal_in_the_first_eval(m, "evaluate", Compiled, at, signum)
            with pytest.raises(Stopped) as stop:
                train(run)
        assert stop.value.signum == signum
        assert [p.name for p in (tmp_path / "stopped" / "checkpoints").iterdir() if p.name.isdigit()] == [str(step)]
        assert not (tmp_path / "stopped" / "summary.json").exists()
    summary = train(run)
    assert summary["final_eval"] == train(resolve({**RUN, "run_dir": str(whole)}))["final_eval"]
    for split in ("train", "eval"):
        assert untimed(metrics(tmp_path / "stopped", split)) == untimed(metrics(whole, split)), split


def untimed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "time" and not k.endswith("_s")} for r in rows]


def test_sampled_losses_keep_one_sum_on_the_device_and_stop_between_batches():
    """nanoGPT's estimate is the mean of its `iters` batch losses (summed on the device, not stacked: a list of
    200000 arrays); a stop that turns true leaves it unfinished (None)."""

    class Batches:
        data = type("Data", (), {"eval_split": "val", "size": staticmethod(lambda split: 100)})()
        batch_size = 4

        @staticmethod
        def sample_args(split, idx):
            return {"split": split, "idx": idx}

    losses = itertools.cycle(np.arange(1.0, 7.0, dtype=np.float32))

    class Fake:
        batches = Batches()

        @staticmethod
        def batch_loss(state, args):
            return {"loss": np.float32(next(losses))}

    out = zoo.train.estimate.sampled_losses(Fake(), None, 3, 3, 0)
    assert out == {"sampled_loss": 2.0, "train_sampled_loss": 5.0}
    asked = []
    assert zoo.train.estimate.sampled_losses(Fake(), None, 3, 3, 0, stop=lambda: asked.append(1) or len(asked) > 2) \
        is None


def test_a_stop_while_the_run_finishes_leaves_it_unfinished(tmp_path, monkeypatch):
    """summary.json marks a run finished, so it is written last: a SIGTERM while curves.png was drawn (after the
    summary) said 'rerun to go on', and the rerun found the run finished and never drew the curves."""
    run = tmp_path / "run"

    def stopped(run_dir):
        raise Stopped(signal.SIGTERM)

    with monkeypatch.context() as m:
        m.setattr("zoo.train.run.plot_curves", stopped)
        with pytest.raises(Stopped):
            train(resolve({**RUN, "run_dir": str(run)}))
    assert not (run / "summary.json").exists()
    train(resolve({**RUN, "run_dir": str(run)}))
    assert (run / "summary.json").exists() and (run / "curves.png").stat().st_size > 0
