"""Partial-Jacobian criticality, the search side (seed_partial_jacobians.md sections 2, 5, 6): grids and bisections
over the `critical` plugin's sigma_w, sigma_b and mu, the skip and branch multipliers as the APJN sees them, pre-LN
blocks' critical points, and the profile's exponent against the infinite-width one."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import zoo.models as M
import zoo.param as P
from zoo.diagnostics import jacobian, run_report
from zoo.param import mean_field_theory as theory


def mlp(**opts):
    """The MLP-ResNet as the paper's MLP: no mean subtraction, small input."""
    return M.config("mlp_resnet", **{"mean_subtract": False, "in_shape": (32,), **opts})


def test_a_grid_over_sigma_b_holds_the_default_sigma_w_fixed():
    """An erf MLP (mu = 0) with sigma_w left unset: a grid over sigma_b holds sigma_w at the model's critical point
    sqrt(pi / 4), so chi_hat is the recursion's chi^12 at sigma_b = 0.1 and 1 (0.866 and 0.387; measured 0.820 and
    0.357 at width 128, 8 seeds: within 0.08). It took sigma_w on the critical line at the grid's first sigma_b
    (1.056 at 0.1), so the diagram sat at another sigma_w than the plugin's (measured 0.947 and 0.470)."""
    cfg = mlp(in_shape=(16,), width=128, depth=12, activation="erf", bias=True)
    chi, err = jacobian.chi_grid("mlp_resnet", cfg, {"sigma_b": [0.1, 1.0]}, base=P.get("critical", mu=0.0),
                                 seeds=8, batch=4, probes=1)
    block = theory.Block.of(cfg)
    expect = [theory.recursion(block, (np.pi / 4) ** 0.5, sb, 0.0, 12)[0][-1] for sb in (0.1, 1.0)]
    assert expect[1] < 0.7 and np.all(np.abs(chi - expect) < 0.08), (chi, err, expect)


@pytest.mark.parametrize("values, line", [
    ({"sigma_w": [1.0, 0.0, -1.0]}, "option sigma_w of 'critical' must be > 0, got 0.0"),
    ({"sigma_b": [0.5, -0.5]}, "option sigma_b of 'critical' must be >= 0, got -0.5"),
    ({"mu": [0.0, 1e300]}, "option mu of 'critical' 1e\\+300 is beyond float32's largest number"),
    ({"sigma_w": [1.0, 1e-45]}, "option sigma_w of 'critical' 1e-45 is below float32's smallest normal number")])
def test_every_grid_value_is_in_the_plugins_range(values, line):
    """A grid's values are checked as the plugin's options are, each of them: a grid sigma_w = 1:-1:3 measured
    sigma_w = 0 (chi_hat 0) and -1 (the init of +1) silently, while 0:1:3 was refused (only the first value, bound
    into the plugin, was checked); mu = 1e300 is inf in the float32 network (chi_hat nan)."""
    cfg = mlp(in_shape=(16,), width=16, depth=3, bias=True)
    with pytest.raises(ValueError, match=line):
        jacobian.chi_grid("mlp_resnet", cfg, values, base=P.get("critical", sigma_w=1.0, sigma_b=0.0, mu=0.0),
                          seeds=1, batch=2, probes=1)


def test_a_stream_that_overflows_float32_measures_nan_not_zero():
    """A ReLU MLP (mu = 0) at sigma_w = 10, depth 60: the stream grows like 50^(l/2) and is inf in float32 by block
    45, and the jvp through inf gave J = 0, so chi_hat read 0 (the chaotic phase, chi = 50, drawn as deeply ordered
    on a phase diagram; --find took it for chi < 1). Now chi_hat is NaN there (a grey cell), --find says it cannot
    measure there, and the run report says why; at sigma_w = 1 chi_hat is still sigma_w^2 / 2 (width 64: within 0.1).
    The grid's points are measured as one-point grids (the same draws at every point), the program --find and the run
    report measure with: one compile."""

    cfg = mlp(in_shape=(16,), width=64, depth=60)
    base = P.get("critical", sigma_b=0.0, mu=0.0)
    chi, err = np.concatenate([jacobian.chi_grid("mlp_resnet", cfg, {"sigma_w": [v]}, base=base, seeds=4, batch=4,
                                                 probes=1) for v in (1.0, 10.0)], axis=1)
    assert abs(chi[0] - 0.5) < 0.1 and np.isnan(chi[1]), (chi, err)  # 0.516 +- 0.032
    with pytest.raises(ValueError, match="chi_hat cannot be measured at sigma_w=10: the float32 forward pass"):
        jacobian.find_critical("mlp_resnet", cfg, "sigma_w", 1.0, 10.0, fixed={"sigma_b": 0.0, "mu": 0.0}, seeds=4,
                               batch=4, probes=1)
    report = run_report("mlp_resnet", cfg, P.get("critical", sigma_w=10.0, sigma_b=0.0, mu=0.0), seeds=4, batch=4,
                        probes=1)
    assert np.isnan(report["chi"]) and report["note"].startswith("chi_hat is nan: the stream overflows float32")


def test_chi_hat_measures_the_plugins_branch_multiplier():
    """The critical plugin with a branch multiplier beta (branch_mult, or alpha with a base depth) takes sigma_w with
    beta^2 sigma_w^2 E phi'^2 = 1 (ReLU MLP, beta = 2: sigma_w = 0.707); chi_hat must measure that network. The grid
    program rebuilt each point as Critical(sigma_w, sigma_b, mu), dropping beta, and run_report measured
    sigma_w^2 / 2 = 0.25 where theory says 1 (width 96, depth 8, 6 seeds: now within 0.1). A grid under
    --param-opt branch_mult keeps it too: chi_hat = beta^2 sigma_w^2 / 2 (its points measured as one-point grids,
    the same draws at every point, so chi_hat's compiled program serves them)."""
    cfg = mlp(in_shape=(16,), width=96, depth=8)
    bound = P.get("critical", branch_mult=2.0).for_model("mlp_resnet", cfg)
    assert bound.sigma_w == pytest.approx(0.5**0.5, rel=1e-3)
    chi, err = jacobian.chi_hat("mlp_resnet", cfg, bound, seeds=6, batch=4, probes=1)
    assert abs(chi - 1.0) < 0.1, (chi, err)
    chi, err = np.concatenate([jacobian.chi_grid("mlp_resnet", cfg, {"sigma_w": [v]}, seeds=6, batch=4, probes=1,
                                                 base=P.get("critical", branch_mult=2.0, sigma_b=0.0, mu=0.0))
                               for v in (0.5, 0.6)], axis=1)
    assert np.all(np.abs(chi - 2 * np.array([0.5, 0.6]) ** 2) < 0.1), (chi, err)


def test_find_sigma_b_at_the_default_sigma_w_finds_the_pre_ln_ratio():
    """Pre-LN without a residual (erf, pre_nonlin, mu = 0): the plugin's default point is sigma_w = 1 on the line
    sigma_b / sigma_w = 0.324; `find_critical` of sigma_b with sigma_w unset holds sigma_w = 1 and finds 0.324
    (0.298 at width 256, depth 6, 8 seeds: within 0.04). It re-derived sigma_w = sigma_b / 0.324 at every trial
    value, so chi_hat was 1 everywhere and the bisection returned noise (here 'the same sign at both ends'). The
    model and estimate are test_find_critical_pre_ln_erf_ratio's, whose compiled program serves this bisection too."""
    cfg = mlp(width=256, depth=6, activation="erf", pre_ln=True, pre_nonlin=True, bias=True)
    found = jacobian.find_critical("mlp_resnet", cfg, "sigma_b", 0.05, 1.0, tol=0.01, fixed={"mu": 0.0}, seeds=8,
                                   batch=8, probes=2)
    assert abs(found - 0.324) <= 0.04, found


def test_the_skip_multiplier_enters_as_mu_squared():
    """chi = mu^2 + beta^2 sigma_w^2 E phi'^2 c_N (eqs. 21-22): the sign of mu does not decide criticality.
    mu = -1 with pre-LN is everywhere critical like mu = 1 (Thm 1.3): the plugin takes the sigma_w that doubles the
    stream's variance over the stack (without mean subtraction here, where the stream's mean alternates in sign), and
    chi_hat there is the recursion's (width 128, depth 12, 6 seeds: within 4 standard errors + 0.01). It was refused
    with 'no critical sigma_b ... chi* goes from 1 to 1'; mu = -1 without LayerNorm is refused for the right reason
    (it cited the sigma_b > 0 points' 0 <= mu < 1), as is mu = 1.5 with LayerNorm ('chi* goes from 2.25 to 2.25')."""
    cfg = mlp(in_shape=(16,), width=128, depth=12, pre_ln=True)
    bound = P.get("critical", mu=-1.0).for_model("mlp_resnet", cfg)
    m, q = 0.0, 1.0
    for _ in range(12):
        _, m, q = theory.step(theory.Block.of(cfg), bound.sigma_w, 0.0, -1.0, m, q)
    assert q - m**2 == pytest.approx(2.0, rel=1e-3)  # Var(x^L) = 2 Var(x^0)
    chis = bound.infinite_width_chis("mlp_resnet", cfg, 12)
    chi, err = jacobian.chi_hat("mlp_resnet", cfg, bound, seeds=6, batch=4, probes=2)
    assert 1.0 < chis[-1] < 1.1 and abs(chi - chis[-1]) < 4 * err + 0.01, (chi, err, chis[-1])
    for mu, opts in ((-1.0, {}), (1.5, {"pre_ln": True})):
        with pytest.raises(ValueError, match=f"no critical sigma_w for mu={mu}.*: chi = mu\\^2 \\+ beta\\^2"):
            P.get("critical", mu=mu).for_model("mlp_resnet", mlp(in_shape=(16,), width=16, depth=4, **opts))


def test_pre_ln_sigma_w_is_refused_where_the_stream_cannot_double():
    """With LayerNorm and mu = 1 the plugin takes the sigma_w that doubles the stream's variance over the stack. A
    bounded phi adds at most beta^2 a block, so with erf, beta = 0.5 (branch_mult) and 4 blocks no sigma_w does:
    the bisection returned its bracket's end, sigma_w = 100, silently (chi_hat in the hundreds: A grows with
    sigma_w, B does not). Now one line that says so and asks for sigma_w; where the stream can double (8 blocks)
    the point is still found (the growth 2 checked on the recursion)."""
    cfg = mlp(in_shape=(16,), width=16, depth=4, activation="erf", pre_ln=True)
    with pytest.raises(ValueError, match=r"grows by less than 2.0 over 4 blocks at every sigma_w up to 100 \(erf is "
                                         r"bounded, branch multiplier 0.5\); give sigma_w"):
        P.get("critical", branch_mult=0.5).for_model("mlp_resnet", cfg)
    cfg = mlp(in_shape=(16,), width=16, depth=8, activation="erf", pre_ln=True)
    bound = P.get("critical", branch_mult=0.5).for_model("mlp_resnet", cfg)
    block = theory.Block.of(cfg, 0.5)
    m, q = 0.0, 1.0
    for _ in range(8):
        _, m, q = theory.step(block, bound.sigma_w, 0.0, 1.0, m, q)
    assert bound.sigma_w < 10 and q - m**2 == pytest.approx(2.0, rel=1e-3), bound.sigma_w


def pre_ln_mlp(activation: str, bias: bool, depth: int = 8):
    """The paper's pre-LN MLP, x' = mu x + W phi(LN(x)) + b, without mean subtraction."""
    return mlp(width=16, depth=depth, activation=activation, pre_ln=True, pre_nonlin=True, bias=bias, in_shape=(16,))


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


@pytest.mark.parametrize("activation, ratio", [("erf", 0.324), ("tanh", 0.265), ("gelu", 0.175), ("relu", 0.0)])
def test_a_given_sigma_w_takes_the_sigma_b_on_its_critical_line(activation, ratio):
    """Pre-LN without a residual: LayerNorm fixes the scale, and the critical line is sigma_b / sigma_w = sqrt(a - b)
    (erf 0.324, tanh 0.265, GELU 0.175; ReLU, scale invariant, 0). With sigma_w given, the left-out sigma_b is the one
    on that line, at every sigma_w (it was 0: a chaotic init, chi 1.23 for erf at sigma_w = 1.5, reported as
    critical); the same ratio as the plugin's own point at sigma_w = 1, and chi* = 1 at infinite width."""
    cfg = pre_ln_mlp(activation, bias=True)
    own = P.get("critical", mu=0.0).for_model("mlp_resnet", cfg)
    for sigma_w in (0.6, 1.5):
        bound = P.get("critical", mu=0.0, sigma_w=sigma_w).for_model("mlp_resnet", cfg)
        assert bound.sigma_b / sigma_w == pytest.approx(ratio, abs=2e-3)
        assert bound.sigma_b / sigma_w == pytest.approx(own.sigma_b / own.sigma_w, abs=1e-4)
        assert bound.report("mlp_resnet", cfg)["chi_infinite_width"] == pytest.approx(1.0, abs=1e-4)


def test_a_given_sigma_w_no_sigma_b_can_bring_to_the_line_keeps_sigma_b_zero():
    """ReLU without LayerNorm: chi* = sigma_w^2 / 2 whatever sigma_b, so sigma_w = 1.6 (chi* 1.28) is chaotic at
    every sigma_b; the point is kept as given, sigma_b 0, as before the line was sought (it was refused: 'no critical
    sigma_b ... chi* goes from 1.28 to 1.28')."""
    bound = P.get("critical", sigma_w=1.6, mu=0.0).for_model("mlp_resnet", mlp(activation="relu", bias=True))
    assert bound.sigma_b == 0.0 and bound.sigma_w == 1.6


def test_the_phase_diagrams_theory_line_holds_sigma_b_at_zero():
    """The dashed line of a (mu, sigma_w) phase diagram is the critical sigma_w at the grid's own sigma_b, 0 unless
    fixed: for erf without LayerNorm the closed form mu^2 + beta^2 (sigma_w^2 erf'(0)^2)^k = 1 (0.886, 0.845, 0.709 at
    mu 0, 0.3, 0.6 for one layer a block), not the line at the sigma_b a placeholder sigma_w = 1 would take."""
    from zoo.diagnostics.phase import theory_line

    cfg = mlp(activation="erf", bias=True)
    block = theory.Block.of(cfg)
    mus = np.array([0.0, 0.3, 0.6])
    want = ((1 - mus**2) / block.branch**2) ** (1 / (2 * block.block_depth)) / (2 / math.sqrt(math.pi))
    assert np.allclose(theory_line(cfg, ("mu", mus)), want, rtol=1e-4)


def test_the_found_value_carries_an_interval_over_its_seeds():
    """--find reported a bare value, which with 8 seeds lands a few percent off the closed form (relu sqrt 2: 1.4546
    at width 256, depth 30, against 1.4253 [1.404, 1.447] with 32 seeds). Its interval, by the delta method from
    chi_hat's standard error and slope, holds the value; two independent seed sets' values differ by less than their
    half-widths combined (each a t interval of its estimate); one seed has none."""
    cfg = mlp(width=32, depth=6, activation="relu")  # 1.342 [1.258, 1.427] and 1.416 [1.304, 1.527]
    fixed = {"sigma_b": 0.0, "mu": 0.0}
    found = []
    for key in (0, 1):
        v = jacobian.find_critical("mlp_resnet", cfg, "sigma_w", 0.5, 3.0, fixed=fixed, seeds=8, key=key)
        lo, hi = jacobian.critical_interval("mlp_resnet", cfg, "sigma_w", v, (0.5, 3.0), fixed, seeds=8, key=key)
        assert lo < v < hi and 0 < hi - lo < 0.5, (v, lo, hi)
        found.append((v, (hi - lo) / 2))
    (v0, h0), (v1, h1) = found
    assert abs(v0 - v1) < math.hypot(h0, h1), found
    lo, hi = jacobian.critical_interval("mlp_resnet", cfg, "sigma_w", v0, (0.5, 3.0), fixed, seeds=1)
    assert math.isnan(lo) and math.isnan(hi)
