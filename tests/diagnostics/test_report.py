"""The criticality run report's note (zoo.diagnostics.report): where a critical point's chi sits off 1 at the
model's depth because it tends to 1 only as a power law (a marginal fixed point), and only there."""

from __future__ import annotations

import math
import re

import pytest

import zoo.models as M
import zoo.param as P
from zoo.diagnostics.report import describe, slow_approach, unresolved


def mlp(**opts):
    """The MLP-ResNet as the paper's MLP: no mean subtraction, small input."""
    return M.config("mlp_resnet", **{"mean_subtract": False, "in_shape": (32,), **opts})


@pytest.mark.parametrize("activation, bias, notes", [("gelu", True, (0.976, 0.978)), ("erf", False, (0.907, 0.990)),
                                                     ("relu", False, None)])
def test_run_report_notes_when_chi_sits_off_one_at_the_models_depth(activation, bias, notes):
    """A critical point has chi* = 1 at infinite depth, but where its kernel map is marginal there (chi_K* = 1) chi
    tends to 1 only as a power law. GELU's half-stable point (the paper's MLP with biases): at infinite width 0.976 at
    block 10, 0.978 at block 100 (0.986 at block 1000); measured (32 seeds, 8 inputs, 2 probes) 0.944 +- 0.012 at
    width 256 and 0.964 +- 0.004 at width 1024, at depths 10 to 100 (the finite-width gap shrinks with width). erf at
    K* = 0: chi^l ~ 1 - 1/l, 0.907 at block 10, 0.990 at block 100. The run report's note says so, with the chi it
    measured; ReLU at sigma_w^2 = 2 has chi = 1 at every block and gets none."""
    cfg = mlp(width=128, depth=10, activation=activation, bias=bias)
    note = slow_approach(P.get("critical"), "mlp_resnet", cfg, 0.9512, 0.0123)
    if notes is None:
        assert note is None
    else:
        assert note == ("chi tends to 1 only as a power law in depth (a marginal fixed point, chi_K* = 1): at infinite "
                        f"width {notes[0]:.3f} at block 10 and {notes[1]:.3f} at block 100; measured 0.951 +- 0.012")
    report = {"sigma_w": 1.4082, "mu": 0.0, "chi": 0.9512, "note": "a note"}
    assert describe(report) == "sigma_w 1.408, mu 0, chi 0.9512; a note"


def test_an_ordered_point_gets_no_slow_approach_note():
    """tanh at sigma_w = 0.7 is in the ordered phase: chi settles at chi* = 0.49 by block 40 and stays there (0.490 at
    block 400). Rounding left chi at block 400 a hair nearer 1, and the report said chi 'tends to 1 only as a power
    law in depth (a marginal fixed point)'; chi must come at least 1% nearer 1 for that note."""
    cfg = mlp(width=128, depth=40, activation="tanh")
    assert slow_approach(P.get("critical", sigma_w=0.7), "mlp_resnet", cfg, 0.476, 0.009) is None


def test_a_point_off_the_critical_one_gets_no_marginal_note():
    """GELU (exact), mean-subtracted, sigma_b 0.5, mu 0: the critical sigma_w is 1.4784; --find measured 1.4924 at
    width 128, where chi settles geometrically at 1.029 (chi_K* = 0.80): 1.0294 at block 30, 1.0290 at block 300.
    That is 1.5% nearer 1, past the 1% the note asked, and the report called it 'a marginal fixed point'. A chi that
    has converged by ten times the depth is no power-law approach; the critical point itself is 1 at block 30."""
    cfg = mlp(width=128, depth=30, activation="gelu_exact", mean_subtract=True, bias=True)
    off = P.get("critical", mu=0, sigma_b=0.5, sigma_w=1.4924)
    chis = off.infinite_width_chis("mlp_resnet", cfg, 300)
    assert chis[29] == pytest.approx(1.0294, abs=1e-4) and chis[-1] == pytest.approx(1.0290, abs=1e-4)
    assert slow_approach(off, "mlp_resnet", cfg, 1.03, 0.01) is None
    at = P.get("critical", mu=0, sigma_b=0.5)
    assert at.for_model("mlp_resnet", cfg).sigma_w == pytest.approx(1.4784, abs=1e-4)
    assert slow_approach(at, "mlp_resnet", cfg, 1.0, 0.01) is None


def test_a_chi_within_its_errors_of_one_bounds_xi_from_below():
    """tanh at sigma_b 0.3, --find at width 256 and 8 seeds: chi_hat 0.99983 +- 0.026, and the report quoted xi = 6000
    and a trainable depth of 1.7e5, numbers of the estimate's noise. Within 2 standard errors of 1 it says what the
    measurement resolves: xi >= 1 / |ln(1 - 2 x 0.026)| = 18.7."""
    note = unresolved(0.99983, 0.026)
    assert note == ("chi_hat is 1 within 2 standard errors (0.9998 +- 0.0260): xi >= 18.7 and the trainable depth >= "
                    "524 are all it resolves (more --seeds or a larger width narrow it)")
    assert unresolved(0.9, 0.01) is None and unresolved(1.0, 0.0) is None and unresolved(float("nan"), 0.1) is None
    assert "one initialization, which gives no standard error" in unresolved(0.9982, float("nan"))


def test_one_seed_gives_no_standard_error_and_the_report_says_so():
    """`zoo.criticality --seeds 1` printed chi_stderr 0 and an exact-looking xi (560 at chi_hat 0.9982, mostly noise):
    one initialization has no standard error. It is NaN now, and the report's note says what that leaves."""
    from zoo.diagnostics.report import run_report

    out = run_report("mlp_resnet", mlp(width=16, depth=3), P.get("critical"), seeds=1, batch=2)
    assert out["chi_stderr"] != out["chi_stderr"] and "one initialization" in out["note"], out
    two = run_report("mlp_resnet", mlp(width=16, depth=3), P.get("critical"), seeds=2, batch=2)
    assert two["chi_stderr"] > 0 and "one initialization" not in two.get("note", ""), two


@pytest.mark.parametrize("activation, mean_subtract, factor, sigma_w", [
    ("relu", True, 1 - 1 / math.pi, None), ("abs", True, None, None), ("relu", False, 1.0, None),
    ("tanh", True, 1.0, None), ("relu", True, 1.0, 1.3), ("relu", False, 1.0, 1.0)])
def test_a_stream_the_critical_point_lets_fade_gets_a_note(activation, mean_subtract, factor, sigma_w):
    """On the default MLP-ResNet (mean subtraction, no LayerNorm) `critical` puts ReLU at sigma_w^2 = 2, chi_J = 1, but
    the block's kernel map is sigma_w^2 Var[phi] = 2 K (1/2 - 1/(2 pi)): the stream's second moment falls by 1 - 1/pi
    = 0.682 a block (abs: 1 - 2/pi = 0.363), so the forward signal vanishes, which the report did not say. Without
    mean subtraction the map is critical (chi_K* = 1, no note), and tanh's marginal map at Q* = 0 lets Q fall only as
    a power law (the slow-approach note's, not this one). A sigma_w given off the critical line (chi_J* = 0.845 at
    1.3, 0.5 at 1 without mean subtraction) gets none: its premise, chi_J = 1, does not hold there."""
    from zoo.diagnostics.report import fading_stream

    depth = 7
    plugin = P.get("critical", **({} if sigma_w is None else {"sigma_w": sigma_w}))
    note = fading_stream(plugin, "mlp_resnet", mlp(activation=activation, mean_subtract=mean_subtract,
                                                              width=16, depth=depth))
    if factor == 1.0:
        assert note is None, note
        return
    factor = factor or 1 - 2 / math.pi
    total, per = re.fullmatch(r"at infinite width the stream's second moment goes from 1 to (\S+) over the 7 blocks "
                              r"\((\S+) a block\): chi_J = 1 keeps the Jacobians near 1, not the forward signal \(this "
                              r"block's kernel map is not critical there, chi_K\* != 1\); without mean subtraction it "
                              r"is \(--model-opt mean_subtract=false\)", note).groups()
    assert float(total) == pytest.approx(factor ** depth, rel=2e-3) and float(per) == pytest.approx(factor, rel=2e-3)


@pytest.mark.parametrize("model, options, mu, noted", [("mixer", {"token_dim": 16, "patch": 8}, 1.0, True),
                                                       ("vit", {"head_dim": 16, "patch": 8}, -1.0, True),
                                                       ("mixer", {"token_dim": 16, "patch": 8}, 0.5, False)])
def test_pre_ln_blocks_at_mu_one_say_their_chi_depends_on_depth(model, options, mu, noted):
    """On the Mixer, ViT and GPT at mu = 1 zoo.criticality gave a finite xi and a trainable depth read off chi at the
    last block (Mixer width 48: chi 1.502, 1.093, 1.032 at depths 4, 16, 48), numbers that only grow with --depth:
    pre-LN with mu^2 = 1 is critical everywhere (Thm 1.3), chi -> 1 as 1 + O(1/l). The note says so; at mu = 1/2 the
    stream forgets geometrically, and it is left out."""
    cfg = M.config(model, width=48, depth=4, **options)
    point = P.get("critical", sigma_w=2.0, sigma_b=0.0, mu=mu)
    note = slow_approach(point, model, cfg, 1.45, 0.01)
    assert (note is not None and "chi tends to 1 only as 1 + O(1/l)" in note and "(1.450)" in note) == noted, note
