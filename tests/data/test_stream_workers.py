"""Streamed data's worker processes: they end with the run that started them, also when it is killed outright."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from test_stream import deadline

ORPHAN = """
import sys, time
from itertools import islice
import zoo.data
data = zoo.data.load("tokens:" + sys.argv[1], seq_len=16)
batches = zoo.data.stream(data, "train", batch_size=4, seed=0, workers=1)
next(batches)
print("read", flush=True)
time.sleep(600)
"""


def _children(pid: int) -> list[int]:
    """The living processes whose parent is `pid` (from /proc; a zombie counts as ended)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.isdigit() and int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc")
def test_workers_end_when_the_run_is_killed(token_dir):
    """A streamed run killed with SIGKILL (no chance to stop its workers) left grain's worker process (220 MB) and
    multiprocessing's resource tracker alive for good, holding the dead run's output pipe open: a `train.py | tee`
    never ended. Each worker watches its parent and ends within a second of its death."""
    from cli_utils import ROOT

    proc = subprocess.Popen([sys.executable, "-c", ORPHAN, str(token_dir)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    try:
        with deadline(120):
            assert proc.stdout.readline().strip() == "read"
        workers = _children(proc.pid)
        assert workers, "the stream started no worker process"
    finally:
        proc.kill()
        proc.wait()
    with deadline(30):
        while any(_alive(w) for w in workers):
            time.sleep(0.1)
