"""The APJN profile J^{0,l} against l (seed_partial_jacobians.md sections 1, 3.6): its power-law exponent over the
deep end of the stack and a log-log figure, with the infinite-width product of the chi^l where theory has it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from zoo.diagnostics.jacobian import loglog_slope


def fit_range(depth: int) -> tuple[int, int]:
    """The blocks l in [max(1, L/5), L] whose J^{0,l} the exponent is fitted over (the paper fits l > 100 at L = 250,
    past the first blocks' transient)."""
    return max(1, depth // 5), depth


def exponent(profile: Sequence[float], depth: int) -> float:
    """The fitted exponent -zeta of J^{0,l} ~ l^-zeta (Thm 2.7): 0 for a scale-invariant phi at criticality, -1 at the
    erf/tanh point, +A/B with pre-LN and mu = 1."""
    return loglog_slope(profile, *fit_range(depth))


def plot(profile: np.ndarray, stderr: np.ndarray, path: str | Path, title: str = "",
         theory: np.ndarray | None = None) -> None:
    """log-log J^{0,l} against l = 1..L with its standard error, the fitted power law over fit_range, and `theory`
    (J^{0,l} at infinite width, l = 1..L) dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    depth = len(profile) - 1
    ls = np.arange(1, depth + 1)
    lo, hi = fit_range(depth)
    slope = exponent(profile, depth)
    fig, ax = plt.subplots(figsize=(5.2, 4.0), dpi=120)
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
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
