"""Partial-Jacobian criticality (Doshi, He, Gromov; seed_partial_jacobians.md sections 2, 5, 6): the APJN
estimator against the infinite-width theory, the `critical` plugin's defaults, and the phase structure."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from cli_utils import SMALL, run_train

import zoo.models as M
import zoo.param as P
from zoo.diagnostics import jacobian, run_report
from zoo.param import mean_field_theory as theory


def mlp(**opts):
    """The MLP-ResNet as the paper's MLP: no mean subtraction, small input."""
    return M.config("mlp_resnet", **{"mean_subtract": False, "in_shape": (32,), **opts})


@pytest.mark.slow
def test_relu_mlp_chi_is_half_sigma_w_squared():
    """Vanilla ReLU MLP (no LN, mu = 0), N = 512, L = 50: chi* = sigma_w^2 / 2 (eq. 11; section 6, check 1)."""
    cfg = mlp(width=512, depth=50)
    sw2 = np.array([1.5, 2.0, 2.5])
    chi, err = jacobian.chi_grid("mlp_resnet", cfg, {"sigma_w": np.sqrt(sw2)}, base=P.get("critical", sigma_b=0.0,
                                 mu=0.0), seeds=12, batch=8, probes=1)
    assert np.all(np.abs(chi - sw2 / 2) <= 0.05), (chi, err)


@pytest.mark.slow
def test_pre_ln_with_residual_is_everywhere_critical():
    """h <- mu h + W phi(LN(h)) + b with mu = 1: 1 <= chi_hat <= 1.05 for every sigma_w^2 in [0.1, 4] and
    sigma_b in [0, 1] at L = 50 (Thm 1.3: chi^l = 1 + A / (K^0 + l B)); at mu = 0 the same grid has points
    with |chi_hat - 1| > 0.2 (section 6, check 4)."""
    cfg = mlp(width=256, depth=50, pre_ln=True, pre_nonlin=True, bias=True)
    sw, sb, mu = np.meshgrid(np.sqrt([0.1, 1.0, 4.0]), [0.0, 1.0], [1.0, 0.0], indexing="ij")
    chi, err = jacobian.chi_grid("mlp_resnet", cfg, {"sigma_w": sw, "sigma_b": sb, "mu": mu}, seeds=4, batch=8,
                                 probes=4)
    assert np.all(chi[..., 0] >= 1.0) and np.all(chi[..., 0] <= 1.05), chi[..., 0]
    assert np.max(np.abs(chi[..., 1] - 1.0)) > 0.2, chi[..., 1]


@pytest.mark.slow
def test_find_critical_pre_ln_erf_ratio():
    """Pre-LN (LN on the preactivations) without residual, erf: the critical line is
    sigma_b / sigma_w = sqrt(E erf'(z)^2 - E erf(z)^2) = 0.324 (section 2); bisection on the Monte-Carlo chi_hat at
    sigma_w = 1 finds it within 0.03 (section 6, check 3), as does the infinite-width recursion within 0.002."""
    cfg = mlp(width=256, depth=6, activation="erf", pre_ln=True, pre_nonlin=True, bias=True)
    sigma_b = jacobian.find_critical("mlp_resnet", cfg, "sigma_b", 0.0, 1.0, tol=0.01,
                                     fixed={"sigma_w": 1.0, "mu": 0.0}, seeds=8, batch=8, probes=2)
    assert abs(sigma_b - 0.324) <= 0.03
    block = theory.Block.of(cfg)
    assert abs(0.5 / theory.critical_sigma_w(block, 0.5, 0.0) - 0.3238) <= 0.002


@pytest.mark.parametrize("activation, sigma_w2", [("relu", 2.0), ("erf", np.pi / 4), ("tanh", 1.0)])
def test_critical_plugin_defaults_are_the_closed_forms(activation, sigma_w2):
    """With no options, `critical` on a plain MLP (no LN) picks the critical point of the table in section 2:
    ReLU sigma_w^2 = 2, erf pi/4, tanh 1, all with sigma_b = 0 and mu = 0 (for erf and tanh the fixed point K* = 0
    attracts because phi(0) = phi''(0) = 0)."""
    bound = P.get("critical").for_model("mlp_resnet", mlp(activation=activation))
    assert (bound.sigma_b, bound.mu) == (0.0, 0.0)
    assert bound.sigma_w**2 == pytest.approx(sigma_w2, rel=1e-3)


def test_critical_gelu_takes_the_half_stable_point_which_needs_biases():
    """GELU has phi''(0) != 0: the fixed point K* = 0, where chi* = 1 at sigma_w = 2, repels, and unit inputs leave
    its basin already at sigma_w = 1.468 (the paper's MLP; 1.676 with mean subtraction), where chi* (zoo's chi_star,
    from Q^0 = 1) jumps over 1 from sigma_w^2 / 4 to the growing stream's sigma_w^2 / 2. So there is no critical point
    without biases (one line, stating where chi* jumps: checked here against chi_star on both sides); with them, the
    half-stable point of the paper's vanilla MLP, chi_J* = chi_K* = 1 at K* = (3 + sqrt 17) / 2: (sigma_w, sigma_b) =
    (1.408, 0.416) (eqs. 157-158), both times sqrt(1 - mu^2) = 0.8 with a residual mu = 0.6 in the paper's block
    W phi(h) + b + mu h (eqs. 179-180)."""
    jump = r"from unit inputs \(Q\^0 = 1\) chi\* jumps from ([\d.]+) to ([\d.]+) at sigma_w = ([\d.]+) \(the fixed " \
           r"point Q\* = 0, where chi\* = 1 at sigma_w = 2, repels.*needs biases: build the model with bias=true"
    for mean_subtract, place in ((False, 1.468), (True, 1.676)):
        with pytest.raises(ValueError, match=jump) as err:
            P.get("critical").for_model("mlp_resnet", mlp(activation="gelu", mean_subtract=mean_subtract))
        assert "\n" not in str(err.value)
        below, above, at = (float(v) for v in re.search(jump, str(err.value)).groups())
        block = theory.Block("gelu", mean_subtract=mean_subtract)
        chi_below, chi_above = (theory.chi_star(block, at * f, 0.0, 0.0) for f in (1 - 1e-3, 1 + 1e-3))
        assert chi_below < 1 < chi_above and at == pytest.approx(place, abs=2e-3)
        assert below == pytest.approx(chi_below, abs=0.01) and 1 < above <= chi_above + 0.005  # 3 digits, rising
    assert theory.chi_star(theory.Block("gelu"), 20.0, 0.0, 0.0) == pytest.approx(200.0, rel=1e-3)  # sigma_w^2 / 2
    bound = P.get("critical").for_model("mlp_resnet", mlp(activation="gelu", bias=True))
    assert (bound.sigma_w, bound.sigma_b, bound.mu) == pytest.approx((1.408, 0.416, 0.0), abs=2e-3)
    block = theory.Block("gelu", pre_nonlin=True)
    assert theory.critical_point(block, 0.6) == pytest.approx((0.8 * 1.4082, 0.8 * 0.4158), abs=2e-3)
    assert theory.kernel_fixed_point(block, 0.0, (3 + 17**0.5) / 2)[3] == pytest.approx(1.0, abs=1e-4)


CRITICAL_CASES = [(act, ln) for ln in (False, True) for act in ("relu", "gelu", "tanh", "erf")]


@pytest.fixture(scope="module")
def critical_chis() -> dict[tuple[str, bool], dict[str, float]]:
    """run_report of the `critical` plugin's own point on the MLP-ResNet at width 256, depth 30 for each activation,
    without LayerNorm (mu = 0, the default mean subtraction; biases for GELU, whose point needs them) and with pre-LN
    (mu = 1): chi_hat over 12 initializations of 8 inputs."""
    out = {}
    for act, ln in CRITICAL_CASES:
        cfg = M.config("mlp_resnet", width=256, depth=30, in_shape=(32,), activation=act, pre_ln=ln,
                       bias=act == "gelu" and not ln)
        out[act, ln] = run_report("mlp_resnet", cfg, P.get("critical"), seeds=12, batch=8, probes=1)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("activation, layer_norm", CRITICAL_CASES)
def test_critical_plugin_point_measures_critical(critical_chis, activation, layer_norm):
    """The point the plugin picks measures chi_hat in [0.95, 1.05] at width 256, depth 30 (and the infinite-width
    chi there too): ReLU sigma_w^2 = 2; erf, tanh at K* = 0 (chi^l ~ 1 - 1/l, 0.967 at l = 30); GELU with mean
    subtraction at the critical-line point whose stable fixed point is the input's Q = 1 (chi = 1 from the first
    block); with LayerNorm and mu = 1 every init is critical and sigma_w doubles the stream's variance over the
    stack, so chi^l <= 1 + (A/B) / L."""
    report = critical_chis[activation, layer_norm]
    assert 0.95 <= report["chi_infinite_width"] <= 1.05, report
    assert 0.95 <= report["chi"] <= 1.05, report
    assert report["mu"] == (1.0 if layer_norm else 0.0)


def test_critical_plugin_with_layer_norm_takes_mu_one_and_initializes_as_asked():
    """Pre-LN blocks default to mu = 1 (critical for every sigma, Thm 1.3); hidden weights get std
    sigma_w / sqrt(fan_in), branch biases std sigma_b, LayerNorm stays (1, 0), and x <- mu x + branch."""
    from flax import nnx

    cfg = mlp(width=256, depth=2, pre_ln=True, bias=True)
    bound = P.get("critical", sigma_w="1.5", sigma_b="0.3").for_model("mlp_resnet", cfg)
    assert bound.mu == 1.0
    model = M.create("mlp_resnet", cfg, bound, nnx.Rngs(0))
    blocks = model.stack.blocks
    assert float(blocks.w1.kernel[...].std()) == pytest.approx(1.5 / 16, rel=0.02)
    assert float(blocks.w1.bias[...].std()) == pytest.approx(0.3, rel=0.1)
    assert float(np.abs(blocks.norm.bias[...]).max()) == 0.0 and float(blocks.norm.gain[...].min()) == 1.0
    assert np.all(np.asarray(blocks.skip[...]) == 1.0)


def test_critical_plugin_without_critical_point_is_one_line():
    """mu = 1 without LN is chaotic for every sigma_w > 0 (chi = 1 + sigma_w^2 E phi'^2): a clear error."""
    with pytest.raises(ValueError, match="no critical sigma_w"):
        P.get("critical", mu=1.0).for_model("mlp_resnet", mlp())


def test_bad_critical_options_and_search_ranges_are_refused():
    """Negative init scales, and a bisection range given high to low (which would return its midpoint unsearched)."""
    for option, value, bound in (("sigma_w", -1.0, "> 0"), ("sigma_w", 0.0, "> 0"), ("sigma_b", -0.1, ">= 0")):
        with pytest.raises(ValueError, match=f"{option} of 'critical' must be {bound}"):
            P.get("critical", **{option: value})
    with pytest.raises(ValueError, match="needs lo < hi, got 2.0:1.0"):
        jacobian.find_critical("mlp_resnet", mlp(), "sigma_w", 2.0, 1.0)


@pytest.mark.long
@pytest.mark.parametrize("model", ["mixer", "vit", "gpt"])
def test_pre_ln_transformers_are_critical(model):
    """Pre-LN blocks with mu = 1 (Mixer, ViT; GPT is our hypothesis, section 2): chi_hat of the last block lies in
    [1, 1 + 3/L] for sigma_w^2 in {0.25, 1, 4} (section 6, check 6)."""
    small = {"mixer": dict(in_shape=(16, 16, 3), patch=4, token_dim=32), "vit": dict(in_shape=(8, 8, 3), patch=4,
             head_dim=16), "gpt": dict(seq_len=8, head_dim=16, dropout=0.0)}[model]
    cfg = M.config(model, width=32, depth=16, scan=True, **small)  # scanned blocks: half the compile time
    chi, err = jacobian.chi_grid(model, cfg, {"sigma_w": np.sqrt([0.25, 1.0, 4.0])}, seeds=6, batch=4, probes=2)
    assert np.all(chi >= 1.0) and np.all(chi <= 1.0 + 3.0 / 16), (chi, err)


def test_run_report_measures_only_under_critical():
    """zoo.diagnostics.run_report: the plugin's theory and, under `critical`, the measured chi_hat with its standard
    error, xi, the trainable depth 28 xi, and on GELU's half-stable point (chi 0.976 at block 4 at infinite width) the
    note that chi sits off 1 at this depth, with the chi measured; other plugins report nothing (no measurement at run
    start)."""
    cfg = mlp(width=64, depth=4, activation="gelu", bias=True)
    assert run_report("mlp_resnet", cfg, P.get("mup")) == {}
    report = run_report("mlp_resnet", cfg, P.get("critical"))
    assert set(report) == {"sigma_w", "sigma_b", "mu", "chi_infinite_width", "chi", "chi_stderr", "xi",
                           "trainable_depth", "note"}
    assert report["trainable_depth"] == pytest.approx(28 * report["xi"])
    assert abs(report["chi"] - report["chi_infinite_width"]) < 5 * report["chi_stderr"] + 0.1
    assert f"measured {report['chi']:.3f} +- {report['chi_stderr']:.3f}" in report["note"]
    resolved = abs(report["chi"] - 1) > 2 * report["chi_stderr"]  # 2 seeds at width 64: 0.963 +- 0.117
    assert ("xi >= " in report["note"]) != resolved


def test_mean_field_recursion_runs_to_the_depth_asked():
    """The recursion stops early only as documented: at a non-finite Q (overflow) or, with rtol, once chi has
    converged. A ReLU MLP at sigma_w^2 = 2 has chi = 1 at every block, 50 of them (it stopped after 21)."""
    block = theory.Block("relu")
    chis, qs = theory.recursion(block, 2**0.5, 0.0, 0.0, 50)
    assert len(chis) == 50 and len(qs) == 51 and np.allclose(chis, 1.0)
    assert len(theory.recursion(block, 2**0.5, 0.0, 0.0, 50, rtol=1e-12)[0]) == 21
    chis, qs = theory.recursion(block, 40.0, 0.0, 0.0, 500)  # chi = 800: Q overflows
    assert len(chis) < 500 and not np.isfinite(qs[-1]) and np.all(np.isfinite(qs[:-1]))


def test_correlation_length_and_depth():
    """xi = 1 / |ln chi| (eq. 17) and the trainable depth 28 xi (App. L)."""
    assert jacobian.correlation_length(np.exp(-0.1)) == pytest.approx(10.0)
    assert jacobian.trainable_depth(np.exp(0.5)) == pytest.approx(56.0)
    assert jacobian.correlation_length(1.0) == float("inf")


@pytest.mark.long
def test_training_under_critical_reports_chi(tmp_path):
    """`train.py --param critical` logs the plugin's chi when the run starts and keeps it in summary.json; a
    ReLU MLP (mu = 0) takes sigma_w^2 = 2, where the infinite-width chi is 1."""
    run = tmp_path / "critical"
    proc = run_train([*SMALL, "--param", "critical", "--model-opt", "mean_subtract=false", "--steps", "2",
                      "--run-dir", str(run)])
    assert proc.returncode == 0, proc.stderr
    assert "critical: sigma_w 1.414" in proc.stderr and " chi " in proc.stderr
    report = json.loads((run / "summary.json").read_text())["plugin_report"]
    assert report["mu"] == 0.0 and abs(report["chi_infinite_width"] - 1.0) < 1e-3
    assert abs(report["chi"] - 1.0) < 5 * report["chi_stderr"] + 0.1


def test_infinite_width_profile_is_the_product_of_the_chis():
    """zoo.diagnostics.profile.infinite_width: J^{0,l} = prod chi^l (eq. 4 at infinite width). A vanilla ReLU block
    (mu = 0) has chi = sigma_w^2 / 2 at every block, so J^{0,l} = 0.75^l at sigma_w^2 = 1.5; None once the stream
    overflows (chaotic unbounded phi)."""
    from zoo.diagnostics import profile

    cfg = M.config("mlp_resnet", width=64, depth=12, pre_nonlin=True, bias=True, mean_subtract=False)
    got = profile.infinite_width(cfg, P.get("critical", sigma_w=1.5**0.5, sigma_b=0.0, mu=0.0))
    np.testing.assert_allclose(got, 0.75 ** np.arange(1, 13), rtol=1e-3)
    assert profile.infinite_width(M.config("mlp_resnet", depth=300, mean_subtract=False),
                                  P.get("critical", sigma_w=30.0, sigma_b=0.0, mu=1.0)) is None


def test_gelu_critical_line_at_large_variances():
    """GELU's tables survive variances where float32 overflows in GELU's x^3 (chi* = sigma_w^2 / 2 there, as for
    ReLU, not NaN), and its critical line on the stable branch K* = 5 (> (3 + sqrt 17) / 2) is eqs. 157-158's."""
    block = theory.Block(activation="gelu", pre_nonlin=True)
    assert theory.chi_star(block, 10.0, 0.5, 0.0) == pytest.approx(50.0, rel=1e-3)
    k = 5.0
    sigma_w = 2 * (1 + 2 * k * (3 + 5 * k) / (np.pi * (1 + k) * (1 + 2 * k) ** 1.5)
                   + 2 / np.pi * np.arcsin(k / (1 + k))) ** -0.5
    sigma_b = k * sigma_w / (np.sqrt(2 * np.pi) * (1 + 2 * k) ** 0.75)
    assert theory.critical_sigma_w(block, sigma_b, 0.0) == pytest.approx(sigma_w, abs=0.01)
