"""Writes that the file size limit (ulimit -f, EFBIG) stops: one line naming the file and the limit, as a full disk
is, and an async checkpoint's failure under its own step."""

from __future__ import annotations

import errno
import re
import subprocess
import sys

import jax.numpy as jnp
import pytest
from cli_utils import ROOT, SMALL, child_env, clean_error

from zoo.errors import DiskFull
from zoo.train.checkpoint import Checkpoints


def test_the_file_size_limit_is_one_line_and_the_run_resumes_without_it(tmp_path):
    """`ulimit -f` (EFBIG) while a checkpoint is written: 'unexpected OSError: [Errno 27] File too large' naming no
    file (and orbax's raw OUT_OF_RANGE), as the full disk was before it got its line. Now one line naming the file and
    the limit, exit 1; the same command without the limit finishes the run."""
    import resource

    run = tmp_path / "run"
    args = [sys.executable, "train.py", *SMALL, "--steps", "4", "--ckpt-every", "2", "--run-dir", str(run)]
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))  # noqa: E731
    proc = subprocess.run(args, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=240,
                          preexec_fn=limit)
    line = clean_error(proc.returncode, proc.stderr)
    written = re.escape(str(run))
    assert re.search(rf"the file size limit \(64 KB\) \(ulimit -f\) stopped writing {written}/", line), line
    again = subprocess.run(args, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr


def test_an_async_save_that_failed_names_its_own_step(tmp_path, monkeypatch):
    """Orbax raises an async save's failure at the next save: `ulimit -f 200` stopped checkpoint 2's write, and the
    line named checkpoints/4 ("older files are intact"), where no checkpoint was whole. The previous save is waited
    for first, under its own step's name."""
    ckpt = Checkpoints(tmp_path / "run")
    ckpt._writing = 2

    def failed():
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(ckpt.manager, "wait_until_finished", failed)
    with pytest.raises(DiskFull, match=r"stopped writing .*/checkpoints/2;"):
        ckpt.save(4, {"w": jnp.ones(3)}, {})
