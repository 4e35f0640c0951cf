"""`python -m zoo.coord_check` as a user runs it, and the slopes plugins predict (TP IVb section 3, Thm 2.8.12;
seed_tp4b_adam.md sections 3 and 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import zoo.param as P

ROOT = Path(__file__).resolve().parents[1]
MLP = ["--model", "mlp_resnet", "--widths", "64,128,256", "--model-opt", "depth=2", "--model-opt", "in_shape=16",
       "--seeds", "2"]
# GPT at these widths: the readout term V0 . (Delta h) still carries its n^-1/2 random part, so the muP output
# slope sits near -0.2 (it vanishes with a zero-initialized readout); tol 0.25 leaves SP's +0.3..+1 failing.
GPT = ["--model", "gpt", "--widths", "64,128,256", "--model-opt", "depth=2", "--model-opt", "seq_len=16",
       "--model-opt", "vocab_size=32", "--batch", "1", "--lr", "3e-3", "--seeds", "2", "--tol", "0.25"]


def coord_check(args: list[str], out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-m", "zoo.coord_check", *args, "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("model_args", [MLP, GPT], ids=["mlp_resnet", "gpt"])
@pytest.mark.parametrize("param, status", [("mup", 0), ("sp", 1)])
def test_verdict_and_exit_status(tmp_path, model_args, param, status):
    """muP keeps every layer's change flat in width (PASS, exit 0); SP with a constant Adam LR grows the hidden
    and output changes (r = -1 < 0: unstable), so the check FAILs with exit status 1; a table, a PNG and a JSON
    with the slopes are written either way."""
    proc = coord_check([*model_args, "--param", param], tmp_path)
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert ("PASS" if status == 0 else "FAIL") in proc.stdout
    record = json.loads((tmp_path / "coord_check_width.json").read_text())
    assert record["passed"] is (status == 0)
    assert (tmp_path / "coord_check_width.png").stat().st_size > 10_000
    hidden = [v for v in record["layers"].values() if v["group"] == "hidden"]
    if param == "sp":
        assert max(max(v["slopes"]) for v in hidden) >= 0.3
    else:
        assert max(abs(s) for v in hidden for s in v["slopes"]) <= 0.15


@pytest.mark.slow
@pytest.mark.parametrize("param, status", [("depth_mup", 0), ("mup", 1)])
def test_depth_sweep_verdict(tmp_path, param, status):
    """Against depth (TP VI section 7, seed_depth_mup.md section 5): Depth-muP's branch multiplier L^-1/2 and branch
    LR L^-1/2 keep every block's change flat in L (PASS); muP alone (alpha = gamma = 0) grows it (FAIL). Only the
    depth sweep runs when --depths comes without --widths."""
    proc = coord_check(["--model", "mlp_resnet", "--param", param, "--depths", "4,8,16", "--width", "64",
                        "--model-opt", "in_shape=16", "--seeds", "2"], tmp_path)
    assert proc.returncode == status, proc.stdout + proc.stderr
    record = json.loads((tmp_path / "coord_check_depth.json").read_text())
    assert record["sizes"] == [4, 8, 16] and not (tmp_path / "coord_check_width.json").exists()
    hidden = [max(v["slopes"]) for v in record["layers"].values() if v["group"] == "hidden"]
    assert (max(hidden) <= 0.15) if status == 0 else (max(hidden) >= 0.5), hidden


@pytest.mark.parametrize("args, expect", [
    (["--widths", "64"], "at least two --widths"),
    (["--depths", "8"], "at least two --depths"),
    (["--widths", "a,b"], "comma-separated integers"),
    (["--param", "mupp"], "unknown parametrization 'mupp'"),
    (["--model", "resnet"], "unknown model 'resnet'"),
    (["--model-opt", "in_shape=x"], "takes integers"),
])
def test_bad_input_is_one_line(tmp_path, args, expect):
    proc = coord_check(args, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert expect in proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("name, opts, optimizer, expected", [
    ("mup", {}, "adam", {"input": 0, "hidden": 0, "output": 0, "attention": 0}),
    ("mup", {}, "sgd", {"input": 0, "hidden": 0, "output": 0}),
    ("mean_field", {}, "sgd", {"input": 0, "hidden": 0, "output": 0}),
    ("ntk", {}, "adam", {"input": -0.5, "hidden": -0.5, "output": 0}),
    ("ntk", {}, "sgd", {"input": -0.5, "hidden": -0.5, "output": 0}),
    ("ntk_mup", {"s": 0.5}, "adam", {"input": -0.25, "hidden": -0.25, "output": 0}),
    ("sp", {}, "adam", {"input": 0, "hidden": 1, "attention": 1.5}),
    ("sp", {}, "sgd", {"input": -0.5, "hidden": 0.5, "output": 1}),
    ("abcd", {k: "0,0,1,0" for k in ("input", "vector")} | {"hidden": "0,0.5,1,0", "output": "0,0.5,1,0"}, "adam",
     {"input": -1, "hidden": 0, "output": 0.5}),
    ("abcd", {k: "0,0,1.5,0" for k in ("input", "vector")} | {"hidden": "0,0.5,1.5,0", "output": "0,0.5,1.5,0"},
     "adam", {"input": -1.5, "hidden": -0.5, "output": 0}),
    ("abcd", {"attn_exp": 0.5, "input": "0,0,0,1", "vector": "0,0,0,1", "hidden": "0,0.5,1,1", "output": "1,0,0,1"},
     "adam", {"hidden": 0, "output": 0, "attention": 0.5}),
])
def test_expected_slopes_match_tp4b(name, opts, optimizer, expected):
    """Predicted width slopes, Delta h ~ n^-min r and Delta f ~ n^max(-r_out, 1 - a_out - b_out - r), against the
    rows of seed_tp4b_adam.md section 6 (head dim ~ n): muP 0 (attention logits 0 with 1/d, +1/2 with 1/sqrt(d));
    NTK -1/2 and 0; UP_1/4 -1/4; SP + Adam hidden +1, logits +3/2; SP + SGD (-1/2, +1/2, +1); SP with Adam LR 1/n
    everywhere (-1, 0, +1/2: unstable, TP IVb Remark 2.2.7); SP with LR n^-3/2 (-3/2, -1/2, 0)."""
    slopes = P.get(name, **opts).expected_slopes(optimizer, head_dim_slope=1.0)
    for group, value in expected.items():
        assert slopes[group] == pytest.approx(value), (group, slopes)


def test_expected_depth_slopes():
    """TP VI section 7: the hidden and output changes move like L^(1 - alpha - gamma): flat for Depth-muP and for the
    ODE scaling, sqrt(L) for (1/2, 0), L^-1/2 for (1/2, 1)."""
    assert P.get("depth_mup").expected_slopes(axis="depth")["hidden"] == 0
    assert P.get("depth_mup", alpha=1, gamma=0).expected_slopes(axis="depth")["output"] == 0
    assert P.get("depth_mup", alpha=0.5, gamma=0).expected_slopes(axis="depth")["hidden"] == 0.5
    assert P.get("depth_mup", alpha=0.5, gamma=1).expected_slopes(axis="depth")["hidden"] == -0.5
