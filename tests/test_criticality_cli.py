"""`python -m zoo.criticality` as a user runs it: report, phase diagram and JSON, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
ERF_MLP = ["--width", "64", "--depth", "6", "--seeds", "2", "--batch", "4", "--probes", "1", "--model-opt",
           "activation=erf", "--model-opt", "mean_subtract=false", "--model-opt", "bias=true"]


def criticality(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-m", "zoo.criticality", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_phase_diagram_is_ordered_below_and_chaotic_above(tmp_path):
    """Without a residual (mu = 0) an erf MLP is ordered (chi < 1) at small sigma_w and chaotic (chi > 1) at
    large sigma_w, for every sigma_b (seed_partial_jacobians.md section 2)."""
    proc = criticality([*ERF_MLP, "--param-opt", "mu=0", "--grid", "sigma_b=0:1:3", "--grid", "sigma_w=0.3:3:3",
                        "--out", str(tmp_path)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads((tmp_path / "criticality.json").read_text())
    chi = np.array(record["phase_diagram"]["chi"])
    assert chi.shape == (3, 3)
    assert np.all(chi[0] < 1) and np.all(chi[-1] > 1), chi
    assert (tmp_path / "phase_diagram.png").stat().st_size > 10_000
    assert {"chi", "xi", "trainable_depth"} <= set(record["report"])


@pytest.mark.parametrize("args, expect", [
    (["--grid", "sigma_b=0:1:3", "--grid", "sigma_w=1:2:3"], "without biases"),
    ([*ERF_MLP, "--grid", "sigma_w=1:2:3"], "exactly two axes"),
    (["--model", "resnet50"], "unknown model"),
    (["--grid", "sigma_w=2:1"], "sigma_w"),
])
def test_bad_input_is_one_line(tmp_path, args, expect):
    proc = criticality([*args, "--out", str(tmp_path)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert expect in lines[-1], lines
