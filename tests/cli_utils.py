"""Running train.py as a user would: a subprocess in the repo root, CPU only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--model", "mlp_resnet", "--width", "32", "--depth", "2", "--batch-size", "16", "--data", "synthetic",
         "--eval-every", "1000", "--log-every", "5"]


def run_train(args: list[str], env: dict[str, str] | None = None, timeout: float = 240,
              **popen) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})}
    return subprocess.run([sys.executable, str(ROOT / "train.py"), *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout, **popen)


def final_params(run_dir: Path) -> dict[str, np.ndarray]:
    from zoo.train.checkpoint import load_params

    return load_params(run_dir)[0]


def one_clean_line(proc: subprocess.CompletedProcess) -> str:
    """The error line of a failed run; asserts there is no traceback."""
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines, "no error message"
    return lines[-1]
