"""Bad input: one clear line, a non-zero exit, no traceback, existing checkpoints intact (issue 3)."""

from __future__ import annotations

import numpy as np
import pytest
from cli_utils import SMALL, one_clean_line, run_train

from zoo.train.checkpoint import load_params


@pytest.mark.parametrize("args, expect", [
    (["--model", "resnet50"], "unknown model 'resnet50'"),
    (["--param", "mupp"], "unknown parametrization 'mupp'"),
    (["--param", "depth_mup", "--param-opt", "beta=1"], "has no option 'beta'"),
    (["--data", "mnist-ish"], "mnist-ish"),
    (["--data", "imagefolder:/nonexistent/dir"], "/nonexistent/dir"),
    (["--config", "/nonexistent.yaml"], "/nonexistent.yaml"),
    (["--width", "abc"], "invalid int value"),
    (["--width", "0"], "must be positive"),
    (["--batch-size", "7"], None),
])
def test_bad_input_one_line(tmp_path, args, expect):
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"} if args == ["--batch-size", "7"] else None
    proc = run_train([*SMALL, "--steps", "2", "--run-dir", str(tmp_path / "r"), *args], env=env)
    line = one_clean_line(proc)
    assert (expect or "not divisible") in line


def test_corrupt_checkpoint_is_reported_and_kept(tmp_path):
    run = tmp_path / "run"
    ok = run_train([*SMALL, "--steps", "4", "--ckpt-every", "2", "--run-dir", str(run)])
    assert ok.returncode == 0, ok.stderr
    ckpt = run / "checkpoints" / "4"
    for f in ckpt.rglob("*"):
        if f.is_file() and f.stat().st_size > 0 and "state" in str(f):
            f.write_bytes(b"garbage")
    before = sorted(str(p) for p in (run / "checkpoints").rglob("*"))
    proc = run_train([*SMALL, "--steps", "8", "--ckpt-every", "2", "--run-dir", str(run)])
    assert "cannot be restored" in one_clean_line(proc)
    assert sorted(str(p) for p in (run / "checkpoints").rglob("*")) == before


def test_diverged_run_keeps_last_good_checkpoint(tmp_path):
    run = tmp_path / "run"
    proc = run_train([*SMALL, "--steps", "30", "--ckpt-every", "1", "--lr", "1e6", "--optimizer", "sgd",
                      "--run-dir", str(run)])
    line = one_clean_line(proc)
    assert "loss became" in line and "at step" in line
    params, _ = load_params(run)
    assert params and all(np.isfinite(v).all() for v in params.values())


def test_different_run_in_same_dir_is_refused(tmp_path):
    run = tmp_path / "run"
    assert run_train([*SMALL, "--steps", "2", "--run-dir", str(run)]).returncode == 0
    proc = run_train([*SMALL, "--steps", "2", "--run-dir", str(run), "--width", "64"])
    assert "holds a different run" in one_clean_line(proc)
