"""A sweep compiles its next shape while the current one trains (zoo.sweeps.ahead), says so, leaves no thread
behind, trains that shape as it would have alone, and still stops at once on Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from cli_utils import ROOT, child_env

from zoo.config import resolve
from zoo.sweeps.runner import SweepSpec, run_sweep

RUN = {"model": "mlp_resnet", "param": "mup", "data": "synthetic", "steps": 3, "batch_size": 8}
ARGS = ["--model", "mlp_resnet", "--param", "mup", "--data", "synthetic", "--steps", "3", "--batch-size", "8",
        "--lrs", "2^-9,2^-7"]


@pytest.mark.slow
def test_the_next_shape_compiles_while_one_trains(tmp_path):
    """The line that says so comes before the first shape's result; no compile thread is left once the sweep ends;
    the second shape's records give its programs' compile seconds (spent while the first trained)."""
    said: list[str] = []
    spec = SweepSpec(run=resolve(RUN), lrs=[2.0**-9, 2.0**-7], out=tmp_path / "s", widths=[8, 12], depths=[2])
    records = run_sweep(spec, said.append)
    ahead = [i for i, line in enumerate(said) if line == "compiling width=12 depth=2 while width=8 depth=2 trains"]
    first = [i for i, line in enumerate(said) if line.startswith("width=8 depth=2: 2 members")]
    assert ahead and first and ahead[0] < first[0], said
    assert not [t for t in threading.enumerate() if t is not threading.current_thread() and "zoo" in t.name]
    assert len(records) == 4 and all(r["compile_s"] > 0 and np.isfinite(r["train_loss"]) for r in records)


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_sweep_compiling_ahead(tmp_path, signum, status):
    """Sent as the sweep starts compiling its second shape in the background (and its first in front): the command
    ends within seconds, as it would without the thread (Ctrl-C: one line and 130; SIGTERM: one line and 143)."""
    proc = subprocess.Popen([sys.executable, "-m", "zoo.sweep", *ARGS, "--widths", "8,12,16", "--depths", "2",
                             "--out", str(tmp_path / "s")], cwd=ROOT, env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    sent = None
    for line in proc.stdout:
        if line.startswith("compiling width=12"):
            sent = time.perf_counter()
            proc.send_signal(signum)
            break
    _, err = proc.communicate(timeout=120)
    assert sent is not None, err
    assert proc.returncode == status and time.perf_counter() - sent < 15, (proc.returncode, err)
    assert err.strip() == ("interrupted (Ctrl-C)" if signum == signal.SIGINT else "stopped by SIGTERM"), err
