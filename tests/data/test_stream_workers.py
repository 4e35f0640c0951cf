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


def test_a_stream_that_fails_in_its_worker_leaves_one_line(tmp_path):
    """A corrupt image met by a worker process: the run's one line was followed at exit by multiprocessing's
    resource tracker warning of the 'leaked shared_memory objects' it freed, the batches the worker had read ahead
    (grain frees none of them on close). The tracker still frees them; the one line is all that is said."""
    import numpy as np
    from cli_utils import ROOT
    from PIL import Image

    import zoo.data

    for split in ("train", "test"):
        for cls in ("a", "b"):
            (tmp_path / split / cls).mkdir(parents=True)
            for i in range(6):
                pixels = np.random.default_rng(i).integers(0, 256, (32, 32, 3), np.uint8)
                Image.fromarray(pixels).save(tmp_path / split / cls / f"{i}.png")
    first = zoo.data.load(f"imagefolder:{tmp_path}", stream=True).indices("train", 0, 2, 0)
    i = next(i for i in range(1, 12) if i not in first)  # read by a worker: not at the compile (step 0), nor the
    # first image, decoded as the set is loaded (its size tells whether it streams)
    bad = tmp_path / "train" / "ab"[i // 6] / f"{i % 6}.png"
    bad.write_bytes(bad.read_bytes()[:-30])  # its header whole: met when its pixels are decoded
    argv = ["train.py", "--model", "mlp_resnet", "--width", "8", "--depth", "1", "--steps", "12", "--batch-size", "2",
            "--data", f"imagefolder:{tmp_path}", "--stream", "true", "--workers", "1", "--run-dir", str(tmp_path / "r")]
    with deadline(180):
        proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "JAX_PLATFORMS": "cpu", "ZOO_CACHE": str(tmp_path / "cache")})
    after = proc.stderr.split("\nerror: reading step ", 1)[1].strip().splitlines()
    assert proc.returncode == 1 and len(after) == 1 and bad.name in after[0], proc.stderr
