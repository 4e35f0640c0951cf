"""A checkpoints folder that cannot be written (issue 41, item 7): `chattr +i` or a read-only mount was found at the
first save, 250 steps later, and then the process did not exit: orbax's threads waited 300 s for a step that had
failed. Now a write probe refuses it in one line before the first step, and a save that fails leaves no thread."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from pathlib import Path

import jax.numpy as jnp
import pytest
from cli_utils import TINY, start_train

from zoo.train.checkpoint import Checkpoints


@contextlib.contextmanager
def unwritable(folder: Path):
    """`folder` made unwritable: its mode (for a user), else `chattr +i` (for root, whom modes do not stop)."""
    folder.chmod(0o555)
    immutable = False
    try:
        if _writable(folder):
            immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
        if _writable(folder):
            pytest.skip("no way to make a folder unwritable here (root, and no chattr)")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


def _writable(folder: Path) -> bool:
    try:
        (folder / "probe").mkdir()
    except OSError:
        return False
    (folder / "probe").rmdir()
    return True


def test_an_unwritable_checkpoints_folder_is_one_line_before_the_first_step(tmp_path):
    """train.py: one line naming the folder before any step, and the process gone within 5 s of it."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    with unwritable(run / "checkpoints"):
        proc = start_train([*TINY, "--steps", "4", "--run-dir", str(run)])
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("error:"):
                break
        said = time.perf_counter()
        proc.wait(timeout=60)
        exited = time.perf_counter() - said
    assert proc.returncode == 1 and f"{run / 'checkpoints'} cannot be written" in lines[-1], lines
    assert not any(line.startswith(("step", "compiling")) for line in lines), lines  # before the first step
    assert exited < 5, exited


def test_a_save_that_fails_leaves_no_thread_behind(tmp_path):
    """The folder becomes unwritable after the probe (mid-run): the save fails in one line and no orbax thread is
    left waiting (the process would not exit for 300 s)."""
    before = set(threading.enumerate())
    ckpts = Checkpoints(tmp_path / "run", keep=2)
    with unwritable(ckpts.dir):
        with pytest.raises(OSError):
            ckpts.save(2, {"w": jnp.ones(3)}, {"step": 2})
            ckpts.wait()
        with contextlib.suppress(OSError):
            ckpts.close()
    deadline = time.perf_counter() + 5
    while time.perf_counter() < deadline and _left(before):
        time.sleep(0.05)
    assert not _left(before), _left(before)
    assert os.listdir(ckpts.dir) == []


def _left(before):
    return [t.name for t in threading.enumerate() if t not in before and not t.daemon and t.is_alive()
            and type(t).__name__ == "_SignalingThread"]
