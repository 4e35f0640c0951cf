"""Partial-Jacobian criticality (Doshi, He, Gromov; seed_partial_jacobians.md sections 2, 5, 6): the APJN
estimator against the infinite-width theory, the `critical` plugin's defaults, and the phase structure."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_utils import SMALL, run_train

import zoo.models as M
import zoo.param as P
from zoo.diagnostics import jacobian, mean_field


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
def test_relu_mlp_apjn_is_flat_at_criticality():
    """At sigma_w^2 = 2, sigma_b = 0 the APJN J^{0,l} neither grows nor decays: zeta = 0, so its log-log slope over
    l in [10, 50] is 0 +- 0.1 (Thm 2.7 for scale-invariant phi; Fig. 1; section 6, check 1)."""
    cfg = mlp(width=512, depth=50)
    plugin = P.get("critical", sigma_w=2**0.5, sigma_b=0.0, mu=0.0)
    profile, _ = jacobian.apjn("mlp_resnet", cfg, plugin, 0, seeds=24, batch=4, probes=1)
    assert abs(jacobian.loglog_slope(profile, 10, 50)) <= 0.1, profile[[10, 20, 30, 40, 50]]


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
    block = mean_field.Block.of(cfg)
    assert abs(0.5 / mean_field.critical_sigma_w(block, 0.5, 0.0) - 0.3238) <= 0.002


@pytest.mark.parametrize("activation, sigma_w2", [("relu", 2.0), ("erf", np.pi / 4), ("tanh", 1.0), ("gelu", 4.0)])
def test_critical_plugin_defaults_are_the_closed_forms(activation, sigma_w2):
    """With no options, `critical` on a plain MLP (no LN) picks the critical point of the table in section 2:
    ReLU sigma_w^2 = 2, erf pi/4, tanh 1, GELU 4 (sigma_w = 2, K* = 0), all with sigma_b = 0 and mu = 0."""
    bound = P.get("critical").for_model("mlp_resnet", mlp(activation=activation))
    assert (bound.sigma_b, bound.mu) == (0.0, 0.0)
    assert bound.sigma_w**2 == pytest.approx(sigma_w2, rel=1e-3)


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


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mixer", "vit", "gpt"])
def test_pre_ln_transformers_are_critical(model):
    """Pre-LN blocks with mu = 1 (Mixer, ViT; GPT is our hypothesis, section 2): chi_hat of the last block lies in
    [1, 1 + 3/L] for sigma_w^2 in {0.25, 1, 4} (section 6, check 6)."""
    small = {"mixer": dict(in_shape=(16, 16, 3), patch=4, token_dim=32), "vit": dict(in_shape=(8, 8, 3), patch=4,
             head_dim=16), "gpt": dict(seq_len=8, head_dim=16, dropout=0.0)}[model]
    cfg = M.config(model, width=32, depth=16, **small)
    chi, err = jacobian.chi_grid(model, cfg, {"sigma_w": np.sqrt([0.25, 1.0, 4.0])}, seeds=6, batch=4, probes=2)
    assert np.all(chi >= 1.0) and np.all(chi <= 1.0 + 3.0 / 16), (chi, err)


def test_correlation_length_and_depth():
    """xi = 1 / |ln chi| (eq. 17) and the trainable depth 28 xi (App. L)."""
    assert jacobian.correlation_length(np.exp(-0.1)) == pytest.approx(10.0)
    assert jacobian.trainable_depth(np.exp(0.5)) == pytest.approx(56.0)
    assert jacobian.correlation_length(1.0) == float("inf")


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
