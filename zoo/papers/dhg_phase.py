"""Doshi, He, Gromov Fig. 2 (reduced): phase diagrams of chi_hat, the one-block APJN at the last block, over the
(sigma_b, sigma_w) plane for tanh, erf, GELU and ReLU MLPs, vanilla and with LayerNorm on the pre-activations, with
the analytic critical lines chi* = 1 (seed_partial_jacobians.md sections 1, 2, 4 and 6.5).

Measured: zoo.diagnostics.phase (Hutchinson APJN of `critical`-plugin models, one program per panel); theory:
zoo.param.mean_field_theory (chi* at infinite width and depth, and chi at the measured block L).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import zoo.models
from zoo.diagnostics import phase
from zoo.papers import lr_sweep, page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.param import mean_field_theory as theory

NAME = "dhg-phase"
FULL = {"width": 256, "depth": 50, "in_dim": 784, "seeds": 10, "batch": 8, "probes": 2,
        "sigma_b": np.linspace(0.0, 1.0, 9).tolist(), "sigma_w": np.linspace(0.25, 3.0, 12).tolist(),
        "activations": ["tanh", "erf", "gelu", "relu"]}
QUICK = {"width": 16, "depth": 6, "in_dim": 8, "seeds": 2, "batch": 2, "probes": 1, "sigma_b": [0.0, 0.5],
         "sigma_w": [0.5, 1.5, 2.5], "activations": ["erf"]}
VARIANTS = ("vanilla", "pre-LN")
BAND = 0.05  # points with |chi* - 1| <= BAND sit on the line: their phase is not judged
AGREE = 0.9  # share of the other points whose measured phase must match theory's
LINE = 0.05  # seed_partial_jacobians.md 6.5: the measured line within ~0.05 (in sigma_w) of the analytic one


def _cfg(s: dict, activation: str, variant: str):
    return zoo.models.config("mlp_resnet", width=s["width"], depth=s["depth"], in_shape=(s["in_dim"],),
                             activation=activation, pre_ln=variant == "pre-LN", pre_nonlin=True, bias=True,
                             mean_subtract=False)


def run(quick: bool) -> Numbers:
    s = QUICK if quick else FULL
    x, y = ("sigma_b", s["sigma_b"]), ("sigma_w", s["sigma_w"])
    panels = []
    for variant in VARIANTS:
        for act in s["activations"]:
            cfg = _cfg(s, act, variant)
            chi, err = phase.phase_diagram("mlp_resnet", cfg, x, y, {"mu": 0.0}, seeds=s["seeds"], batch=s["batch"],
                                           probes=s["probes"])
            block = theory.Block.of(cfg)
            star = [[theory.chi_star(block, w, b, 0.0) for b in s["sigma_b"]] for w in s["sigma_w"]]
            at_l = [[_chi_at(block, w, b, s["depth"]) for b in s["sigma_b"]] for w in s["sigma_w"]]
            panels.append({"activation": act, "variant": variant, "chi": chi, "stderr": err, "chi_star": star,
                           "chi_at_depth": at_l, "line": phase.theory_line(cfg, x, {"mu": 0.0})})
            lr_sweep.log(f"  {variant} {act}: done")
    return {"setting": s, "panels": panels}


def _chi_at(block: theory.Block, sigma_w: float, sigma_b: float, depth: int) -> float:
    """Infinite-width chi at the last block of a depth-L stack (from the input's Q = 1); inf if it overflows."""
    chis, _ = theory.recursion(block, sigma_w, sigma_b, 0.0, depth)
    return float(chis[-1]) if len(chis) == depth else float("inf")


def agreement(p: dict, key: str = "chi_star") -> float:
    """The share of grid points off the line (|theory - 1| > BAND) whose measured phase (chi_hat < 1 or > 1)
    is theory's; NaN when no grid point is off the line (nothing to agree with, which the check fails)."""
    th = np.asarray(p[key], float)
    chi = np.asarray(p["chi"], float)
    off = np.abs(th - 1) > BAND
    return float(np.mean(np.sign(chi[off] - 1) == np.sign(th[off] - 1))) if off.any() else float("nan")


def crossings(chi: np.ndarray, sigma_w: list[float]) -> np.ndarray:
    """Per column, the sigma_w where chi crosses 1 going up (log chi interpolated linearly in log sigma_w); NaN
    where it does not cross."""
    logs, logw = np.log(np.asarray(chi, float)), np.log(sigma_w)
    out = np.full(logs.shape[1], np.nan)
    for j in range(logs.shape[1]):
        up = np.flatnonzero((logs[:-1, j] < 0) & (logs[1:, j] >= 0))
        if len(up):
            i = up[0]
            t = -logs[i, j] / (logs[i + 1, j] - logs[i, j])
            out[j] = float(np.exp(logw[i] + t * (logw[i + 1] - logw[i])))
    return out


def line_gap(p: dict, sigma_w: list[float], reference: str = "chi_star") -> float | None:
    """The largest |measured line - reference line| (in sigma_w) over the columns where the reference line lies
    inside the grid (a column without a measured crossing there counts as infinite); None when it never does. The
    reference: the analytic chi* = 1 line, or ("chi_at_depth") where infinite-width chi at block L crosses 1."""
    line = (np.asarray([np.nan if v is None else v for v in p["line"]], float) if reference == "chi_star"
            else crossings(p[reference], sigma_w))
    inside = np.isfinite(line) & (line >= sigma_w[0]) & (line <= sigma_w[-1])
    if not inside.any():
        return None
    gap = np.abs(crossings(p["chi"], sigma_w) - line)[inside]
    return float(np.max(np.where(np.isfinite(gap), gap, np.inf)))


def offset(p: dict, near: float = 0.2) -> float:
    """Mean chi_hat - chi* over the grid points near the line (|chi* - 1| < near): the finite-size bias there."""
    th, chi = np.asarray(p["chi_star"], float), np.asarray(p["chi"], float)
    close = np.abs(th - 1) < near
    return float(np.mean(chi[close] - th[close])) if close.any() else float("nan")


def checks(n: Numbers) -> list[Check]:
    s = n["setting"]
    out = []
    for variant in VARIANTS:
        panels = [p for p in n["panels"] if p["variant"] == variant]
        agree = {p["activation"]: agreement(p) for p in panels}
        at_depth = {p["activation"]: agreement(p, "chi_at_depth") for p in panels}
        out.append(Check(f"{variant}: the measured phase (ordered chi < 1, chaotic chi > 1) is theory's",
                         f"agreement with chi* at >= {AGREE:.0%} of the grid points with |chi* - 1| > {BAND}",
                         ", ".join(f"{a} {v:.0%}" for a, v in agree.items()), all(v >= AGREE for v in agree.values()),
                         f"no grid point lies off the line by more than {BAND}: nothing was compared (widen the grid)"
                         if any(np.isnan(v) for v in agree.values()) else
                         f"at L = {s['depth']} the stack has not reached chi*: against the infinite-width chi at "
                         "block L the agreement is " + ", ".join(f"{a} {v:.0%}" for a, v in at_depth.items())))
        gaps = {p["activation"]: line_gap(p, s["sigma_w"]) for p in panels}
        judged = {a: g for a, g in gaps.items() if g is not None}
        out.append(Check(f"{variant}: the measured critical line follows the analytic chi* = 1 line",
                         f"|measured - analytic| <= {LINE} in sigma_w at every sigma_b where the analytic line is "
                         "inside the grid", ", ".join(f"{a} {'no line in the grid' if g is None else f'{g:.3f}'}"
                                                      for a, g in gaps.items()),
                         bool(judged) and all(g <= LINE for g in judged.values()),
                         "the analytic line lies inside the sigma_w grid for no activation: nothing was compared "
                         "(widen the grid)" if not judged else
                         f"finite depth and width. Against the infinite-width chi at the measured block L = "
                         f"{s['depth']} (where the stack is, not where it tends) the largest gaps are " +
                         ", ".join(f"{p['activation']} " + ("n/a" if line_gap(p, s["sigma_w"], "chi_at_depth") is None
                                                            else f"{line_gap(p, s['sigma_w'], 'chi_at_depth'):.3f}")
                                   for p in panels) +
                         "; near the line chi_hat - chi* averages " +
                         ", ".join(f"{p['activation']} {offset(p):+.3f}" for p in panels) +
                         f" at N = {s['width']}, and where chi* changes slowly with sigma_w (with LayerNorm it "
                         "saturates at E phi'^2 / E phi^2) such an offset moves the crossing far"))
    return out


def plot(n: Numbers, path: Path) -> None:
    s = n["setting"]
    acts = s["activations"]
    fig, axes = page.figure(len(acts), len(VARIANTS), size=(4.2, 3.4))
    x, y = ("sigma_b", s["sigma_b"]), ("sigma_w", s["sigma_w"])
    for p in n["panels"]:
        ax = axes[VARIANTS.index(p["variant"])][acts.index(p["activation"])]
        line = np.asarray([np.nan if v is None else v for v in p["line"]], float)
        line[(line < s["sigma_w"][0]) | (line > s["sigma_w"][-1])] = np.nan
        phase.draw(ax, np.asarray(p["chi"], float), x, y, f"{p['variant']} {p['activation']}: phase agrees at "
                   f"{agreement(p):.0%}", line, limit=2.0, line_color="limegreen")
    fig.suptitle(f"Doshi, He, Gromov Fig. 2 (reduced): chi_hat at N = {s['width']}, L = {s['depth']}, {s['seeds']} "
                 "inits; black: measured chi = 1, green dashed: analytic chi* = 1", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"zoo's MLP-ResNet as the paper's MLP (pre-nonlin branch W phi(h) + b, no residual: mu = 0, no mean "
            f"subtraction), N = {s['width']}, L = {s['depth']}; chi_hat = J^(L-1,L) by Hutchinson probes on "
            f"Gaussian inputs, {s['seeds']} initializations; grid sigma_b {s['sigma_b'][0]:g}..{s['sigma_b'][-1]:g} "
            f"({len(s['sigma_b'])}) x sigma_w {s['sigma_w'][0]:g}..{s['sigma_w'][-1]:g} ({len(s['sigma_w'])})")


def result(n: Numbers) -> str:
    s = n["setting"]
    return "; ".join(f"{p['variant']} {p['activation']}: phase agrees with chi* at {agreement(p):.0%} of the "
                     f"points off the line, largest line gap " +
                     ("n/a" if line_gap(p, s["sigma_w"]) is None else f"{line_gap(p, s['sigma_w']):.3f}")
                     for p in n["panels"])


CLAIM = Claim(
    name=NAME,
    title="chi* phase diagrams: the measured critical lines follow the analytic ones",
    source="Doshi, He, Gromov, Critical Initialization of Wide and Deep Neural Networks using Partial Jacobians, "
           "Fig. 2",
    paper_setting="MLP of width N = 500 and depth L = 50, 100 initializations, chi_hat = J^(L-2,L-1) over the "
                  "(sigma_b, sigma_w) plane for tanh, erf, GELU and ReLU, vanilla, with LayerNorm and with residual "
                  "connections; about 2 GPU-days",
    paper_result="the measured chi* = 1 contours closely follow the analytic critical lines (eqs. 9-22); LayerNorm "
                 "on the pre-activations puts the line at sigma_b / sigma_w = sqrt(E phi'^2 - E phi^2)",
    scale="N = 256 instead of 500, 10 initializations instead of 100, a 9 x 12 grid, the vanilla and pre-LN rows "
          "(the residual rows left out): about 10 minutes on a quiet 2-core CPU.",
    run=run, checks=checks, plot=plot, setting=setting, result=result)
