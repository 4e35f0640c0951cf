"""`python -m zoo.criticality` as a user runs it (its `main`, in-process): report, APJN profile, phase diagram and
JSON, and one-line errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import zoo.models as M
import zoo.param as P
from zoo.cli.criticality import main
from zoo.diagnostics import jacobian
from zoo.diagnostics.report import run_report
from zoo.models.layers import Dense, ModelConfig, scales

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
    ([*ERF_MLP, "--find", "sigma_w=0.5:2", "--param-opt", "sigma_w=1"],  # the given value was dropped unsaid
     "sigma_w is both given (--param-opt sigma_w=1) and bisected (--find): leave out one"),
    (["--grid", "sigma_w=0.5:2:2", "--grid", "mu=0:1:2", "--param-opt", "sigma_w=3"],
     "sigma_w is both given (--param-opt sigma_w=3) and swept (--grid): leave out one"),
    (["--width", "16", "--depth", "4", "--seeds", "1", "--batch", "2", "--probes", "1", "--profile", "--param-opt",
      "sigma_w=1e30"], "from block 1 on: the stream overflows float32"),  # was matplotlib's 'cannot be log-scaled'
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


@pytest.mark.parametrize("grid, why", [((("sigma_w", [1.0, 2.0]), ("sigma_w", [1.0, 2.0])), "must differ"),
                                       ((("sigma_w", [0.0, 1.0]), ("mu", [0.0, 0.5])), "must be > 0")])
def test_a_refused_experiment_writes_nothing(tmp_path, grid, why):
    """`python -m zoo.criticality --profile` with a grid refused (the same axis twice, or sigma_w = 0 on it): one
    ValueError and `out` left absent. The APJN profile's figure used to be written into `out` before the grid
    failed (and the same axis twice was found only after the report and profile were measured)."""
    from zoo.diagnostics.criticality import CriticalitySpec, criticality

    spec = CriticalitySpec(width=16, depth=3, seeds=1, batch=2, probes=1, profile=True, grid=grid)
    with pytest.raises(ValueError, match=why):
        criticality(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_out_that_cannot_be_made_is_refused_first(tmp_path, monkeypatch):
    """--out naming a file, a path below one, or a folder that cannot be made (/proc takes none) is one line naming
    the flag before anything is measured; they used to measure the report (14.5 s of a 16 s phase diagram) and then
    fail on mkdir with 'File exists' or 'No such file or directory: /proc/x', naming no flag."""
    from zoo.diagnostics import criticality as experiment

    monkeypatch.setattr(experiment, "run_report", lambda *a, **k: pytest.fail("measured before refusing --out"))
    (tmp_path / "f").write_text("")
    for out, why in ((tmp_path / "f", "is a file, not a directory"),
                     (tmp_path / "f" / "sub", "is a file, not a folder"),
                     (Path("/proc/zoo_criticality_out"), "cannot be written")):
        with pytest.raises(ValueError, match=f"--out {out}.*{why}"):
            experiment.criticality(experiment.CriticalitySpec(width=16, depth=3), out)


def test_a_model_too_large_is_refused_before_any_theory_or_measurement(tmp_path, monkeypatch):
    """--depth 100000000 at width 16 (129 GB) is one line naming the size and the memory free, before the report:
    the infinite-width recursion alone used to run 1.1e9 Python steps (130 us each) for the run report's note, then
    the model would not fit. The extrapolation from depths 2 and 3 is exact: at depth 7 it equals the shapes'
    bytes of the MLP-ResNet and of a GPT (unrolled blocks). Width 3 x 10^9 (1.8e19 weights a block) wrapped the
    int64 product of the shapes negative and passed, and XLA aborted the process (status 134)."""
    from zoo.diagnostics import criticality as experiment

    monkeypatch.setattr(experiment, "run_report", lambda *a, **k: pytest.fail("measured a model that cannot fit"))
    monkeypatch.setattr(experiment.jacobian.memory, "free_memory", lambda: 20 * 10**9)
    spec = experiment.CriticalitySpec(width=16, depth=10**8, seeds=1, batch=2, probes=1)
    line = (r"mlp_resnet at width 16 and depth 100000000 needs at least 1[0-9]{2}\.\d GB \(its parameters and one "
            r"forward pass of 2 inputs\), more than the 20\.0 GB free here")
    with pytest.raises(ValueError, match=line):
        experiment.criticality(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    wide = experiment.CriticalitySpec(width=3 * 10**9, depth=2, seeds=1, batch=2, probes=1)
    with pytest.raises(ValueError, match="mlp_resnet at width 3000000000 and depth 2 needs at least 72,000,0"):
        experiment.criticality(wide, tmp_path / "out")  # 1.8e19 weights: np.prod wrapped past 2^63 (XLA aborted)
    for name, opts in (("mlp_resnet", {}), ("gpt", {"seq_len": 8, "head_dim": 16})):
        at = [jacobian._model_bytes(name, M.config(name, width=32, depth=d, **opts), 4) for d in (2, 3, 7)]
        assert at[2] == at[0] + 5 * (at[1] - at[0]) > at[1] > at[0], at


def test_bad_numbers_on_the_command_line_are_one_line(tmp_path, capsys):
    """--param-opt sigma_w=1e300 ended in an OverflowError with a traceback file (sigma_w^2 in the recursion), a
    grid axis of 10^10 points built a Python list for minutes, an axis 1:1:3 measured one point three times and drew
    zero-width cells, --probes 3000000000 ended in JAX's OverflowError (and 10^8 ran for hours), and --find's bound
    beyond float32 was measured: now one line each, status 1 or 2, nothing written."""
    from zoo.cli.criticality import main

    small = ["--width", "16", "--depth", "3", "--seeds", "1", "--batch", "2", "--probes", "1"]
    for args, line in ((["--param-opt", "sigma_w=1e300"], "1e+300 is beyond float32's largest number 3.4e+38"),
                       (["--grid", "sigma_w=0.1:1:10000000000", "--grid", "mu=0:1:2"],
                        "a grid axis takes 2 to 1024 points"),
                       (["--grid", "sigma_w=1:1:3", "--grid", "mu=0:1:2"], "a grid axis needs lo != hi"),
                       (["--probes", "3000000000"], "argument --probes: must be at most 1024"),
                       (["--find", "sigma_w=0.1:1e300"], "1e+300 is beyond float32's largest number")):
        with pytest.raises(SystemExit) as code:
            main([*small, *args, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code.value.code in (1, 2) and len(err) == 1 and line in err[0], err
        assert not (tmp_path / "out").exists()


def test_plugin_options_reach_the_experiment_typed(tmp_path):
    """--param-opt values are typed by the plugin: zero_init=true (which leaves the stack's APJN as it is) was
    refused with 'could not convert string to float: 'true'', and branch_mult=abc with the same bare line; now the
    first runs and the second names the option."""
    from zoo.diagnostics.criticality import CriticalitySpec, criticality

    small = dict(width=16, depth=3, seeds=1, batch=2, probes=1)
    record = criticality(CriticalitySpec(param_opt={"zero_init": "true"}, **small), tmp_path / "a")
    assert record["report"]["chi"] > 0
    with pytest.raises(ValueError, match="option branch_mult of 'critical' must be a number, got 'abc'"):
        criticality(CriticalitySpec(param_opt={"branch_mult": "abc"}, **small), tmp_path / "b")


def test_find_prints_the_options_it_held(tmp_path, capsys, monkeypatch):
    """`--find sigma_b=0:1 --param-opt sigma_w=1 --param-opt mu=0` printed '(chi_hat = 1 with {'sigma_w': '1',
    'mu': '0'})', the command line's strings, and with --param-opt sigma_b=0.5 also given it named that sigma_b beside
    the one found; with none given, 'the default options' hid the sigma_w and mu the model's critical point filled in.
    It prints the other two as the search held them (the run report's, at the value found)."""
    from zoo.cli.criticality import main
    from zoo.diagnostics import criticality as experiment

    record = {"critical": {"sigma_b": 0.3241}, "critical_interval": [0.31, 0.34],
              "report": {"sigma_w": 1.0, "sigma_b": 0.324, "mu": 0.0, "chi": 1.0, "chi_stderr": 0.01}}
    monkeypatch.setattr(experiment, "criticality", lambda spec, out: record)
    main(["--find", "sigma_b=0:1", "--param-opt", "sigma_b=0.5", "--param-opt", "mu=0", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "critical sigma_b = 0.3241  (95% interval 0.3100-0.3400 over the 8 seeds; chi_hat = 1 at sigma_w = 1, " \
        "mu = 0)\n" in out, out  # one line at any terminal width


@dataclasses.dataclass
class PlainConfig(ModelConfig):
    width: int = 24
    depth: int = 1
    in_shape: tuple[int, ...] = (6,)
    num_classes: int = 3


class PlainMLP(nnx.Module):
    """A model of its own that states nothing about its blocks: x -> relu(U x) -> V h, no `stack`, no `pre_ln`."""
    task, config_class = "classify", PlainConfig

    def __init__(self, cfg: PlainConfig, plugin, rngs: nnx.Rngs):
        top, _, _ = scales(cfg, plugin)
        self.embed = Dense(cfg.in_shape[0], cfg.width, kind="input", scale=top, rngs=rngs)
        self.head = Dense(cfg.width, cfg.num_classes, kind="output", scale=top, rngs=rngs, role="readout")

    def __call__(self, x, key=None, train=False):
        h = self.embed(x.reshape(x.shape[0], -1).astype(jnp.float32))
        return self.head(jax.nn.relu(h)), {"embed": h}


def test_a_model_that_states_nothing_about_its_blocks(tmp_path, capsys):
    """`--param critical` on a model of one's own read a missing pre_ln as pre-LN (mu = 1, sigma_w = 1: a ReLU MLP's
    critical sigma_w^2 is 2), and its run report and zoo.criticality crashed on `model.stack` (AttributeError, after
    training). Now the point is asked for where the model does not say; given, the model trains under it, its report
    says why chi_hat is not measured, and zoo.criticality stops in one line."""
    name = f"{__name__}:PlainMLP"
    cfg = M.config(name, width=24)
    with pytest.raises(ValueError, match="the critical point of .*PlainMLP' is unknown: .* give sigma_w and mu"):
        P.get("critical").for_model(name, cfg)
    point = P.get("critical", sigma_w=2**0.5, mu=0.0)
    assert point.for_model(name, cfg) == dataclasses.replace(point, sigma_b=0.0)
    report = run_report(name, cfg, point)
    assert report["sigma_w"] == pytest.approx(2**0.5) and "chi_hat not measured" in report["note"]
    code, _, err = criticality(["--model", name, "--param-opt", "sigma_w=1.4", "--param-opt", "mu=0"], tmp_path, capsys)
    assert code == 1 and "Traceback" not in err and "has none, so its APJN cannot be measured" in err, err
