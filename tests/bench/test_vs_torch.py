"""`python bench/vs_torch.py --quick` (the CI smoke test of the zoo-vs-PyTorch benchmark) runs and times every model
after checking that zoo's and torch's models start from the same loss (the script exits non-zero otherwise). It
asserts nothing about speed: speed is measured by the benchmark itself, as ratios within one process."""

import json
import os
import subprocess
import sys

import pytest
from cli_utils import ROOT


def test_quick_benchmark_runs(tmp_path):
    pytest.importorskip("torch", reason="the bench extra: pip install -e '.[bench]'")
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "vs_torch.py"), "--quick", "--json",
                          str(tmp_path / "rows.json")], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert sorted(r["model"] for r in rows) == ["gpt", "mixer", "mlp_resnet", "vit"]
    assert all(r["size"] == "tiny" and r["zoo/torch"] > 0 and r["gflop"] > 0 for r in rows)
    assert [r["zoo/jax"] > 0 for r in rows if r["model"] == "gpt"] == [True]
