"""A run as a process (issue 9, items 3, 4, 8, 9): a finished run rerun changes nothing; one process per run dir;
SIGTERM and SIGINT save and exit 143 and 130; output to a log file is plain, unwrapped lines with progress."""

from __future__ import annotations

import signal

import pytest
from cli_utils import SMALL, one_clean_line, run_train, start_train, wait_for_rows

from zoo.train.logger import read_metrics

LONG = [*SMALL, "--steps", "100000", "--ckpt-every", "100000", "--log-every", "1"]


def test_finished_run_rerun_changes_nothing(tmp_path):
    run = tmp_path / "done"
    assert run_train([*SMALL, "--steps", "10", "--eval-every", "5", "--run-dir", str(run)]).returncode == 0
    files = {name: ((run / name).read_bytes(), (run / name).stat().st_mtime_ns)
             for name in ("summary.json", "curves.png", "metrics.jsonl", "config.json")}
    proc = run_train([*SMALL, "--steps", "10", "--eval-every", "5", "--run-dir", str(run)])
    assert proc.returncode == 0, proc.stderr
    assert "is finished (10 steps)" in proc.stderr and "accuracy" in proc.stderr
    assert "compiling" not in proc.stderr
    assert {name: ((run / name).read_bytes(), (run / name).stat().st_mtime_ns) for name in files} == files


@pytest.mark.slow
@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_saves_then_exits_with_the_shell_status(tmp_path, sig, status):
    """The stop saves a checkpoint at the step reached, exits 128 + signal, and the rerun resumes there. The log
    (stderr to a pipe) says it is compiling before the first step, has plain progress lines with throughput and
    ETA, and never wraps a line (the long run-dir path stays whole)."""
    run = tmp_path / ("a-rather-long-directory-name-so-that-the-path-exceeds-eighty-columns-" + sig.name) / "term"
    proc = start_train([*LONG, "--run-dir", str(run)])
    wait_for_rows(run, proc, 12)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    saved = [int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit()]
    assert len(saved) == 1 and 12 <= saved[0] < 100000
    assert f"stopped by {sig.name} at step {saved[0]}; checkpoint saved; rerun the same command to resume " \
           f"({run})" in err.splitlines()
    lines = err.splitlines()
    compiling = next(i for i, line in enumerate(lines) if line.startswith("compiling the train step"))
    progress = [i for i, line in enumerate(lines) if line.startswith("step ") and "/100000" in line]
    assert progress and compiling < progress[0]
    assert all("img/s" in lines[i] and "ETA" in lines[i] for i in progress[1:])
    assert "Traceback" not in err
    resumed = start_train([*LONG, "--run-dir", str(run)])  # the same command resumes at the saved step
    first = next(line for line in resumed.stderr if not line.startswith("took over the lock"))
    wait_for_rows(run, resumed, saved[0] + 2)
    resumed.kill()
    resumed.wait()
    assert first.strip() == f"resumed {run} from step {saved[0]}"
    steps = [r["step"] for r in read_metrics(run) if r["split"] == "train"]  # a torn last row (the kill) skipped
    assert steps == sorted(set(steps)) and saved[0] + 1 in steps


@pytest.mark.slow
def test_one_process_per_run_dir_and_a_dead_owner_is_taken_over(tmp_path):
    run = tmp_path / "locked"
    first = start_train([*LONG, "--run-dir", str(run)])
    try:
        wait_for_rows(run, first, 3)
        before = (run / "metrics.jsonl").read_text().splitlines()
        second = run_train([*SMALL, "--steps", "5", "--run-dir", str(run)])
        line = one_clean_line(second)
        assert f"pid {first.pid}" in line and "in use by another run" in line, line
        assert (run / "metrics.jsonl").read_text().splitlines()[:len(before)] == before  # no interleaved rows
    finally:
        first.kill()
        first.wait()
    third = run_train([*SMALL, "--steps", "3", "--ckpt-every", "3", "--run-dir", str(run)])
    assert third.returncode == 0, third.stderr
    assert f"took over the lock of {run} from pid {first.pid}" in third.stderr


def test_huge_losses_keep_the_progress_line_whole(tmp_path, capsys):
    """A log-file progress line shows a loss of 6.7e31 in 4 significant digits, not 32 digits that push the rate
    and ETA off the line."""
    from zoo.train.logger import Logger
    from zoo.train.run import say_on

    logger = Logger(tmp_path, total=100, start=0, unit="img", examples_per_step=16, say=say_on(True))
    for step in (1, 2):
        logger.train(step, {"loss": 6.7e31 * step, "grad_norm": 1.0})
    logger.close()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step 2/100")]
    assert lines and "loss 1.34e+32" in lines[0] and "img/s" in lines[0] and "ETA" in lines[0], lines
