"""A referee's checks (round 9) of the diagnostics at settings the other tests do not use, each a regression test
for a bug found there (seed_partial_jacobians.md; seed_tp4b_adam.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zoo.models as M
import zoo.param as P
from zoo.diagnostics import verdict
from zoo.param import mean_field_theory as theory


def pre_ln_mlp(activation: str, bias: bool, depth: int = 8):
    """The paper's pre-LN MLP, x' = mu x + W phi(LN(x)) + b, without mean subtraction."""
    return M.config("mlp_resnet", width=16, depth=depth, activation=activation, mean_subtract=False, pre_ln=True,
                    pre_nonlin=True, bias=bias, in_shape=(16,))


@pytest.mark.parametrize("activation", ["relu", "abs", "identity"])
@pytest.mark.parametrize("mu", [0.0, 0.5])
@pytest.mark.parametrize("bias", [True, False])
def test_a_scale_invariant_pre_ln_block_is_critical_at_sigma_b_zero(activation, mu, bias):
    """Pre-LN with a scale-invariant phi (ReLU, |x|, identity) and mu < 1: chi* = (1 - mu^2) sigma_w^2 E phi'^2 /
    Var + mu^2 = 1 exactly at sigma_b = 0, for every sigma_w (the notes' ratio sigma_b / sigma_w = sqrt(a - b) = 0),
    so the plugin's point is (sigma_w, sigma_b) = (1, 0), biases or not. The quadrature's chi* there is 1 - 8e-10,
    read as 'below 1': the plugin refused the model ('no critical sigma_b ... chi* goes from 1 to 0.00125'). With
    sigma_b given as 0, every sigma_w is critical: one line saying so."""
    cfg = pre_ln_mlp(activation, bias)
    bound = P.get("critical", mu=mu).for_model("mlp_resnet", cfg)
    assert (bound.sigma_w, bound.sigma_b) == (1.0, 0.0)
    assert abs(theory.chi_star(theory.Block.of(cfg), 1.0, 0.0, mu) - 1) < 1e-7
    with pytest.raises(ValueError, match="chi\\* = 1 at every sigma_w for sigma_b=0.0.*each is critical; give "):
        P.get("critical", mu=mu, sigma_b=0.0).for_model("mlp_resnet", cfg)
    if bias:  # sigma_b > 0 still orders it: ReLU's chi* = sigma_w^2 / (sigma_w^2 + 2 sigma_b^2) (eq. 117)
        chi = theory.chi_star(theory.Block.of(cfg), 1.0, 0.5, 0.0)
        assert activation != "relu" or chi == pytest.approx(1 / 1.5, abs=1e-3), chi


def test_a_smooth_pre_ln_block_without_biases_still_needs_them():
    """tanh under pre-LN has its critical point at sigma_b / sigma_w = 0.265 > 0: without biases the plugin still
    refuses in one line (the fix above skips that refusal only where the point's sigma_b is 0)."""
    with pytest.raises(ValueError, match=r"\(1.000, 0.265\) needs biases"):
        P.get("critical", mu=0.0).for_model("mlp_resnet", pre_ln_mlp("tanh", bias=False))


def test_a_diverged_coordinate_check_says_so_not_one_seed():
    """`python -m zoo.coord_check --param sp --lr 1e6`: every change is NaN, so no layer has a slope. The measured
    growth said 'slope +nan, significance unknown (one seed at two sizes)', at any number of seeds and sizes; now
    'no slope, its changes are not finite (the training diverged)'. A group with one finite layer still reports it."""
    sizes = [32, 64, 128]
    nan = {"pre/0": np.full((3, 2), np.nan), "pre/1": np.full((3, 2), np.inf)}
    growth = verdict.measured_growth(sizes, [nan] * 3, {"hidden": 1.0})
    assert verdict.growth_summary(growth) == "hidden: no slope, its changes are not finite (the training diverged)"
    rng = np.random.default_rng(0)
    mixed = [{**nan, "pre/2": np.exp(np.log(n) + 0.01 * rng.normal(size=(3, 2)))} for n in sizes]
    summary = verdict.growth_summary(verdict.measured_growth(sizes, mixed, {"hidden": 1.0}))
    assert summary.startswith("hidden grows in 1 of 3 layers (p < 0.01; pre/2 +1.0"), summary


def test_a_diverged_coordinate_check_prints_why_its_slopes_are_missing():
    """The table of a diverged check showed nan RMS and FAIL in every row with no line saying why (a stable plugin,
    muP at --lr 1e4, read like a failed law). The hint names the layers, the sizes and the lr."""
    from zoo.diagnostics.coord_sweep import CoordSpec, diverged_hint

    data = {"embed": np.ones((3, 2)), "pre/0": np.array([[1.0, 1.0], [1.0, np.nan], [np.inf, np.nan]])}
    result = {"data": data, "sizes": [96, 192, 384], "axis": "width", "lr": 1e4}
    assert diverged_hint(CoordSpec(), result) == (
        "the training diverged at lr 1e+04: the changes of 1 of 2 layers are not finite at width 192, 384, so they "
        "have no slope; give a smaller --lr")
    assert diverged_hint(CoordSpec(), {**result, "data": {"embed": data["embed"]}}) is None


def test_the_profile_exponent_is_compared_with_the_infinite_width_one(tmp_path, capsys):
    """Pre-LN with mu = 1 at the plugin's sigma_w (the stream doubles over the stack): J^{0,l} = (1 + l/L)^(A/B) is
    not yet the power law l^(A/B), and its exponent fitted over [L/5, L] is about 0.32 A/B (ReLU, A/B = 1: 0.33 at
    depths 50 and 400, not 1), so the docstring's '+A/B' misled a reading of the printed exponent. --profile now
    prints the infinite-width profile's exponent, fitted alike, beside the measured one (width 64, depth 7: +0.47
    measured, +0.41 at infinite width)."""
    from zoo.cli.criticality import main
    from zoo.diagnostics import profile

    cfg = pre_ln_mlp("relu", bias=False, depth=50)
    bound = P.get("critical", mu=1.0).for_model("mlp_resnet", cfg)
    slope = profile.exponent([1.0, *profile.infinite_width(cfg, bound)], 50)
    assert 0.30 < slope < 0.36, slope
    main(["--width", "32", "--depth", "5", "--seeds", "1", "--batch", "2", "--probes", "1", "--profile",
          "--model-opt", "pre_ln=true", "--out", str(tmp_path)])
    prof = json.loads((tmp_path / "criticality.json").read_text())["profile"]
    theory = profile.exponent(prof["infinite_width"], 5)
    assert prof["exponent_infinite_width"] == pytest.approx(theory) and 0.3 < theory < 0.6, prof
    out = " ".join(capsys.readouterr().out.split())
    assert f"over l in [1, 5]: {prof['exponent']:+.3f} (infinite width: {theory:+.3f})" in out, out


def test_find_critical_bisects_a_range_narrower_than_its_tolerance(monkeypatch):
    """--find sigma_w=0.001:0.004 (a deep pre-LN residual net's sigma_w is ~0.07 at depth 400; a search near mu = 1 is
    as narrow): the absolute tolerance 0.005 exceeded the range, so after measuring the two ends the bisection returned
    the midpoint 0.0025 for a crossing at 0.0035 (29% off). It now halves at least to 1/256 of the range. chi_hat is
    a stand-in here, (sigma_w / 0.0035)^2, so the bisection alone is checked."""
    from zoo.diagnostics import jacobian

    calls = []

    def chi(model, cfg, values, **_):
        calls.append(values["sigma_w"][0])
        return np.array([(values["sigma_w"][0] / 0.0035) ** 2]), np.zeros(1)

    monkeypatch.setattr(jacobian, "chi_grid", chi)
    cfg = M.config("mlp_resnet", width=16, depth=4, in_shape=(16,))
    found = jacobian.find_critical("mlp_resnet", cfg, "sigma_w", 0.001, 0.004, fixed={"mu": 0.0})
    assert found == pytest.approx(0.0035, abs=0.003 / 256) and len(calls) <= 2 + 9, (found, calls)
    wide = jacobian.find_critical("mlp_resnet", cfg, "sigma_w", 0.0005, 3.0, fixed={"mu": 0.0})
    assert wide == pytest.approx(0.0035, abs=0.005), wide  # a wide range keeps the absolute tolerance


def test_one_step_under_a_zero_readout_is_refused_in_one_line(tmp_path, capsys):
    """`python -m zoo.coord_check --steps 1 --param-opt zero_init=true`: the zero readout passes no gradient back at
    the first step, so the embedding, every pre-activation and the stream had change 0 at every width, no slope, and
    each was a FAIL (6 of 6 at depth 2; the logits alone moved): a failed law where none was tested. Now one line
    before anything runs; one step without zero_init, or two with it, is accepted."""
    from zoo.cli.coord_check import main
    from zoo.diagnostics import coord

    with pytest.raises(SystemExit) as code:
        main(["--widths", "32,64", "--steps", "1", "--param-opt", "zero_init=true", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code.value.code == 1 and len(err) == 1 and "needs at least 2 steps" in err[0], err
    assert not (tmp_path / "out").exists()
    coord.check_steps(P.get("mup"), 1)
    coord.check_steps(P.get("mup", zero_init=True), 2)


@pytest.mark.parametrize("zero_init, hinted", [("false", True), ("0", True), ("true", False)])
def test_the_readout_hint_reads_zero_init_as_the_plugin_does(zero_init, hinted):
    """--param-opt zero_init=false reaches the spec as the string 'false', which is truthy: the hint on a random
    readout's n^-1/2 term (only the output failing, slope -0.3 against 0) was left out exactly when the readout was
    random. It now asks the plugin, which reads 'false' and '0' as False."""
    from zoo.diagnostics.coord_sweep import CoordSpec, readout_hint
    from zoo.diagnostics.verdict import Expectation, LayerVerdict

    result = {"axis": "width", "expected": Expectation({"output": 0.0}, {}, []), "branch_verdicts": [],
              "verdicts": [LayerVerdict("output", "output", [-0.3, -0.3], 0.0, False, False),
                           LayerVerdict("pre/0", "hidden", [0.02, 0.01], 0.0, True, True)]}
    hint = readout_hint(CoordSpec(param_opt={"zero_init": zero_init}), result)
    assert (hint is not None and hint.startswith("hint: only shrinking output changes fail")) == hinted, hint


def test_find_prints_the_options_it_held(tmp_path, capsys, monkeypatch):
    """`--find sigma_b=0:1 --param-opt sigma_w=1 --param-opt mu=0` printed '(chi_hat = 1 with {'sigma_w': '1',
    'mu': '0'})', the command line's strings, and with --param-opt sigma_b=0.5 also given it named that sigma_b beside
    the one found; with none given, 'the default options' hid the sigma_w and mu the model's critical point filled in.
    It prints the other two as the search held them (the run report's, at the value found)."""
    from zoo.cli.criticality import main
    from zoo.diagnostics import criticality as experiment

    record = {"critical": {"sigma_b": 0.3241},
              "report": {"sigma_w": 1.0, "sigma_b": 0.324, "mu": 0.0, "chi": 1.0, "chi_stderr": 0.01}}
    monkeypatch.setattr(experiment, "criticality", lambda spec, out: record)
    main(["--find", "sigma_b=0:1", "--param-opt", "sigma_b=0.5", "--param-opt", "mu=0", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "critical sigma_b = 0.3241  (chi_hat = 1 at sigma_w = 1, mu = 0)" in out, out


def test_the_coordinate_check_record_is_strict_json(tmp_path):
    """coord_check_width.json held Python's NaN token wherever a group is frozen (its expected slope) or the training
    diverged (the changes, slopes and growth fits): no JSON, which JavaScript and other strict parsers refuse. It is
    written as criticality.json is: non-finite numbers as the strings 'nan' and 'inf'."""
    from zoo.diagnostics.coord_sweep import CoordSpec, write
    from zoo.diagnostics.verdict import Expectation, LayerVerdict

    data = {"pre/0": np.array([[np.nan, np.inf], [1.0, 2.0]])}
    result = {"axis": "width", "sizes": [32, 64], "data": data, "branch": {}, "lr": 1e-3, "linear_change": np.inf,
              "expected": Expectation({"hidden": 0.0, "input": np.nan}, {}, []), "branch_verdicts": [],
              "verdicts": [LayerVerdict("pre/0", "hidden", [np.nan, 0.1], 0.0, False, False)], "growth": [],
              "config": {"in_shape": (16,)}}
    write(CoordSpec(), result, tmp_path)
    record = json.loads((tmp_path / "coord_check_width.json").read_text(), parse_constant=pytest.fail)
    assert record["expected"]["input"] == "nan" and record["linear_change"] == "inf", record
    assert record["layers"]["pre/0"]["rms_change"] == [["nan", "inf"], [1.0, 2.0]], record["layers"]


def test_a_depth_sweep_of_a_plugin_without_a_depth_law_is_refused(tmp_path, capsys):
    """`python -m zoo.coord_check --param critical --depths 4,8,16` judged critical init by Depth-muP's laws at
    alpha = gamma = 0: 'FAIL (depth): unstable by theory: alpha = 0 < 1/2: the residual stream grows without bound'
    and +1 expected for every layer, where critical's mu = 0 default has no residual stream and its measured slopes
    were +0.2 to +0.5. A plugin without a depth law (critical) is refused in one line before anything runs; its
    width sweep, and depth_mup's depth sweep, are accepted."""
    from zoo.cli.coord_check import main

    with pytest.raises(SystemExit) as code:
        main(["--param", "critical", "--depths", "4,8", "--width", "32", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code.value.code == 1 and len(err) == 1 and "critical has none" in err[0], err
    assert not (tmp_path / "out").exists()
    verdict.check_depths([4, 8], P.get("depth_mup"))
    with pytest.raises(ValueError, match="critical has none"):
        verdict.check_depths([4, 8], P.get("critical"))
