"""The APJN profile J^{0,l} against l (seed_partial_jacobians.md sections 1, 3.6): its power-law exponent over the
deep end of the stack and a log-log figure, with the infinite-width product of the chi^l where theory has it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zoo.diagnostics.jacobian import loglog_slope
from zoo.files import save_figure
from zoo.param import mean_field_theory as theory
from zoo.param.critical import Critical


def fit_range(depth: int) -> tuple[int, int]:
    """The blocks l in [max(1, L/5), L] whose J^{0,l} the exponent is fitted over (the paper fits l > 100 at L = 250,
    past the first blocks' transient)."""
    return max(1, depth // 5), depth


def exponent(profile: Sequence[float], depth: int) -> float:
    """The fitted exponent -zeta of J^{0,l} ~ l^-zeta (Thm 2.7): 0 for a scale-invariant phi at criticality, -1 at the
    erf/tanh point. With pre-LN and mu = 1, J^{0,l} = (K^l / K^0)^(A/B) = (1 + l B / K^0)^(A/B) is the power law
    l^(A/B) only where l B >> K^0; at the plugin's default sigma_w the stream's variance doubles over the stack
    (L B = K^0), where the fit over [L/5, L] gives about A/B log(5/3) / log 5 = 0.32 A/B (ReLU 0.33, erf 0.40), so
    compare with the infinite-width profile's exponent, not with A/B."""
    return loglog_slope(profile, *fit_range(depth))


def infinite_width(cfg: Any, plugin: Critical) -> np.ndarray | None:
    """J^{0,l} for l = 1..L of an MLP-ResNet under `critical` at infinite width: the running product of the
    recursion's chi^l (zoo.param.mean_field_theory) from the input's Q = 1; None when the stream overflows first."""
    bound = plugin.for_model("mlp_resnet", cfg)
    block = theory.Block.of(cfg, float(bound.branch_multiplier(cfg.depth, cfg.base_depth or cfg.depth)))
    chis, _ = theory.recursion(block, float(bound.sigma_w), float(bound.sigma_b), float(bound.mu), cfg.depth)
    return np.cumprod(chis) if len(chis) == cfg.depth else None


def plot(profile: np.ndarray, stderr: np.ndarray, path: str | Path, title: str = "",
         theory: np.ndarray | None = None) -> None:
    """log-log J^{0,l} against l = 1..L with its standard error, the fitted power law over fit_range, and `theory`
    (J^{0,l} at infinite width, l = 1..L) dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 4.0), dpi=120)
    draw(ax, profile, stderr, title, theory)
    fig.tight_layout()
    save_figure(fig, path)


def draw(ax: Any, profile: np.ndarray, stderr: np.ndarray, title: str = "", theory: np.ndarray | None = None) -> None:
    """`plot`'s drawing on the matplotlib axes `ax`."""
    depth = len(profile) - 1
    ls = np.arange(1, depth + 1)
    lo, hi = fit_range(depth)
    slope = exponent(profile, depth)
    ax.errorbar(ls, profile[1:], yerr=stderr[1:], fmt="o-", ms=3, lw=1, label=r"measured $\mathcal{J}^{0,l}$")
    fit = np.arange(lo, hi + 1)
    ax.plot(fit, profile[lo] * (fit / lo) ** slope, "k--", lw=1.2, label=f"fit over l in [{lo}, {hi}]: l^{slope:+.3f}")
    if theory is not None:
        ax.plot(ls, theory, ":", color="tab:red", lw=1.5, label="infinite width")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("block l")
    ax.set_ylabel(r"APJN $\mathcal{J}^{0,l}$")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
