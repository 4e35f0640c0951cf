"""`python -m zoo.criticality` as a user runs it (its `main`, in-process): report, APJN profile, phase diagram and
JSON, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from zoo.cli.criticality import main

ERF_MLP = ["--width", "64", "--depth", "6", "--seeds", "2", "--batch", "4", "--probes", "1", "--model-opt",
           "activation=erf", "--model-opt", "mean_subtract=false", "--model-opt", "bias=true"]


def criticality(args: list[str], out: Path, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of `python -m zoo.criticality ARGS --out OUT`."""
    code = 0
    try:
        main([*args, "--out", str(out)])
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_phase_diagram_is_ordered_below_and_chaotic_above(tmp_path, capsys):
    """Without a residual (mu = 0) an erf MLP is ordered (chi < 1) at small sigma_w and chaotic (chi > 1) at
    large sigma_w, for every sigma_b (seed_partial_jacobians.md section 2)."""
    code, out, err = criticality([*ERF_MLP, "--param-opt", "mu=0", "--grid", "sigma_b=0:1:3", "--grid",
                                  "sigma_w=0.3:3:3"], tmp_path, capsys)
    assert code == 0, out + err
    record = json.loads((tmp_path / "criticality.json").read_text())
    chi = np.array(record["phase_diagram"]["chi"])
    assert chi.shape == (3, 3)
    assert np.all(chi[0] < 1) and np.all(chi[-1] > 1), chi
    assert (tmp_path / "phase_diagram.png").stat().st_size > 10_000
    assert {"chi", "xi", "trainable_depth"} <= set(record["report"])


@pytest.mark.long
def test_profile_prints_and_plots_the_apjn_power_law(tmp_path, capsys):
    """--profile measures J^{0,l} for every block, prints it with its power-law exponent fitted over l in [L/5, L]
    and plots it: a ReLU MLP (N = 512, L = 50, no LN, mu = 0) at the critical point the plugin picks, sigma_w^2 = 2,
    sigma_b = 0, has a flat APJN (zeta = 0, Thm 2.7; slope within 0.1 of 0 over [10, 50], section 6 check 1), and
    the infinite-width product of the chi^l, 1, is drawn with it."""
    args = ["--width", "512", "--depth", "50", "--seeds", "24", "--batch", "4", "--probes", "1", "--model-opt",
            "mean_subtract=false", "--profile"]
    code, out, err = criticality(args, tmp_path, capsys)
    assert code == 0, out + err
    profile = json.loads((tmp_path / "criticality.json").read_text())["profile"]
    assert profile["fit"] == [10, 50] and len(profile["apjn"]) == 51 and profile["apjn"][0] == 1.0
    assert abs(profile["exponent"]) <= 0.1, profile["exponent"]
    assert f"power-law exponent of J^{{0,l}} over l in [10, 50]: {profile['exponent']:+.3f}" in out
    assert np.allclose(profile["infinite_width"], 1.0, atol=1e-3)
    assert (tmp_path / "apjn_profile.png").stat().st_size > 10_000


@pytest.mark.parametrize("args, expect", [
    (["--grid", "sigma_b=0:1:3", "--grid", "sigma_w=1:2:3"], "without biases"),
    ([*ERF_MLP, "--grid", "sigma_w=1:2:3"], "exactly two axes"),
    (["--model", "resnet50"], "unknown model"),
    (["--grid", "sigma_w=2:1"], "sigma_w"),
    (["--model-opt", "activation=gelu", "--model-opt", "mean_subtract=false"], "needs biases"),
])
def test_bad_input_is_one_line(tmp_path, capsys, args, expect):
    code, out, err = criticality(args, tmp_path, capsys)
    assert code in (1, 2) and "Traceback" not in err, out + err  # 2: argparse's, 1: the command's
    lines = [line for line in err.splitlines() if line.strip()]
    assert expect in lines[-1], lines


def test_the_experiment_is_a_library_function(tmp_path):
    """zoo.diagnostics.criticality.criticality, which the command runs: at the sigma_w it bisects for a plain erf
    MLP (mu = 0, no bias), the report it measures there has chi_hat = 1 (the plugin is rebuilt at the found point),
    and the record is written as JSON."""
    from zoo.diagnostics.criticality import CriticalitySpec
    from zoo.diagnostics.criticality import criticality as run

    spec = CriticalitySpec(width=64, depth=6, model_opt={"activation": "erf", "mean_subtract": False},
                           param_opt={"mu": 0.0, "sigma_b": 0.0}, seeds=2, batch=4, probes=1,
                           find=("sigma_w", 0.5, 2.0))
    record = run(spec, tmp_path)
    assert record["report"]["sigma_w"] == record["critical"]["sigma_w"]
    assert abs(record["report"]["chi"] - 1) < 3 * record["report"]["chi_stderr"] + 0.02, record["report"]
    assert json.loads((tmp_path / "criticality.json").read_text())["critical"] == record["critical"]
