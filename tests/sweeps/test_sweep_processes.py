"""A sweep's members split over worker processes (zoo.sweeps.processes, `python -m zoo.sweep --processes`): the same
records as the one program, a pool kept across shapes, and a worker's failure as one line with no process left."""

import functools
import importlib
import json
import operator
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_utils import ROOT

from zoo.cli import sweep
from zoo.errors import ZooError
from zoo.sweeps.processes import MemberPool, usable_core_ids

BASE = ["--model", "mlp_resnet", "--param", "mup", "--data", "synthetic", "--depths", "1", "--steps", "5",
        "--batch-size", "8", "--chunk", "3", "--widths", "8,12", "--lrs", "2^-8:2^-6:1"]


def records(out: Path) -> dict[tuple, dict]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {(r["width"], r["log2_lr"]): r for r in rows}


@pytest.mark.skipif(len(usable_core_ids()) < 2, reason="needs two cores")
def test_processes_train_the_members_the_one_program_trains(tmp_path, capsys):
    """Two shapes of three members each, in two worker processes (the pool kept across the shapes) and in one
    program: the same members, steps and losses (the groups differ, so sums reassociate: rtol 1e-4)."""
    sweep.main([*BASE, "--out", str(tmp_path / "one")])
    sweep.main([*BASE, "--out", str(tmp_path / "two"), "--processes", "2"])
    capsys.readouterr()
    one, two = records(tmp_path / "one"), records(tmp_path / "two")
    assert sorted(one) == sorted(two) == [(w, lr) for w in (8, 12) for lr in (-8.0, -7.0, -6.0)]
    for key, want in one.items():
        got = two[key]
        assert got["steps"] == want["steps"] == 5 and got["members"] == 3
        for metric in ("train_loss", "eval_loss", "eval_accuracy"):
            np.testing.assert_allclose(got[metric], want[metric], rtol=1e-4, err_msg=f"{key} {metric}")
    assert len({r["train_loss"] for r in two.values()}) == 6  # every member its own


def test_more_processes_than_cores_is_one_line(tmp_path, capsys):
    cores = len(usable_core_ids())
    with pytest.raises(SystemExit) as e:
        sweep.main([*BASE, "--out", str(tmp_path / "s"), "--processes", str(cores + 1)])
    assert e.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --processes {cores + 1} asks for more worker processes than the {cores} CPU cores this "
                   f"process may use; give at most {cores}"]
    assert not (tmp_path / "s").exists()


@pytest.mark.skipif(len(usable_core_ids()) < 2, reason="needs two cores")
def test_a_worker_failure_is_raised_and_leaves_no_process():
    """A recipe that raises ValueError: that line; one that crashes: the worker's traceback; a worker that dies: one
    line with its exit code. Each time the pool's processes are gone afterwards."""
    lrs, seeds = np.ones(2, np.float32), np.zeros(2, np.int32)
    cases = [(functools.partial(int, "x"), ValueError, r"invalid literal for int\(\) with base 10: 'x'"),
             (functools.partial(operator.truediv, 1, 0), RuntimeError, r"(?s)worker process failed.*ZeroDivisionError"),
             (functools.partial(os._exit, 3), ZooError, r"a sweep worker process died \(exit code 3\)")]
    for recipe, kind, message in cases:
        pool = MemberPool(2)
        with pytest.raises(kind, match=message), pool:
            procs = [proc for proc, _ in pool._workers]
            pool.run(recipe, lrs, seeds, 1)
        for proc in procs:
            proc.join(timeout=10)
            assert not proc.is_alive()


@pytest.mark.skipif(len(usable_core_ids()) < 2, reason="needs two cores")
def test_bench_times_the_processes_path(tmp_path, capsys, monkeypatch):
    """bench/sweep.py's three paths at a tiny size: the report has the processes row, its losses agree with the
    sequential members', and it records the command that reruns it (every flag given). (Imported by name from
    bench/ on the path, which the spawned workers inherit, so they can unpickle the bench's recipe.)"""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    bench = importlib.import_module("sweep")
    report = tmp_path / "bench.md"
    bench.main(["--lrs", "4", "--width", "8", "--depth", "1", "--steps", "12", "--batch-size", "32", "--data",
                "synthetic:teacher", "--rounds", "1", "--processes", "2", "--write", str(report)])
    line = capsys.readouterr().out
    assert "one program" in line and "2 processes" in line
    rows = [r for r in report.read_text().splitlines() if r.startswith("| 2 worker processes")]
    assert len(rows) == 1
    assert float(rows[0].split("|")[-2]) < 1e-3  # max rel. loss diff against the sequential members
    assert "`python bench/sweep.py --lrs 4 --width 8 --depth 1 " in report.read_text()  # the command that reruns it


@pytest.mark.skipif(len(usable_core_ids()) < 2, reason="needs two cores")
def test_a_damaged_cache_entry_is_said_once_for_all_workers(tmp_path, capfd):
    """Every entry of the cache the workers filled overwritten with garbage: the rerun trains (each worker compiles
    again) and the command says so in one line, not one per worker."""
    cache = ["--compile-cache", str(tmp_path / "cc"), "--processes", "2", "--widths", "8"]
    sweep.main([*BASE, *cache, "--out", str(tmp_path / "a")])
    entries = [f for f in (tmp_path / "cc").rglob("*-cache") if f.is_file()]
    assert entries
    for f in entries:
        f.write_bytes(b"not a compiled program")
    capfd.readouterr()
    sweep.main([*BASE, *cache, "--out", str(tmp_path / "b")])
    lines = [line for line in capfd.readouterr().err.splitlines() if "damaged entry" in line]
    assert len(lines) == 1 and lines[0].startswith(f"warning: the compile cache {tmp_path / 'cc'} holds"), lines
    assert records(tmp_path / "b").keys() == records(tmp_path / "a").keys()


PARENT = """
import functools, time
import numpy as np
from zoo.sweeps.processes import MemberPool
with MemberPool(2) as pool:
    print(*[proc.pid for proc, _ in pool._workers], flush=True)
    pool.run(functools.partial(time.sleep, 120), np.ones(2), np.zeros(2), 1)
"""


@pytest.mark.skipif(len(usable_core_ids()) < 2, reason="needs two cores")
def test_workers_end_with_a_killed_parent():
    """A parent killed (SIGKILL) while its workers train: they end within seconds, not after their members."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    pids = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(pids) == 2
    time.sleep(1.0)  # the workers are inside the job
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(pid) for pid in pids):
        time.sleep(0.1)
    assert not any(running(pid) for pid in pids)


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an ended worker of a killed parent is reaped by init)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
