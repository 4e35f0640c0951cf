"""Phase diagrams of chi_hat over two of (sigma_w, sigma_b, mu) (the partial-Jacobian paper's Figs. 2, 4, 5).

chi_hat < 1 is the ordered phase (gradients vanish, J ~ exp(-l / xi)), chi_hat > 1 the chaotic one; the contour
chi_hat = 1 is the critical line. For the MLP-ResNet the infinite-width critical line is drawn over it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zoo.diagnostics import jacobian
from zoo.files import save_figure
from zoo.param import mean_field_theory as theory
from zoo.param.critical import Critical


def phase_diagram(model_name: str, cfg: Any, x: tuple[str, Sequence[float]], y: tuple[str, Sequence[float]],
                  fixed: dict[str, float] | None = None, **estimate: Any) -> tuple[np.ndarray, np.ndarray]:
    """chi_hat and its standard error on the grid y x x, shape (len(y values), len(x values))."""
    (xn, xs), (yn, ys) = x, y
    if xn == yn:
        raise ValueError(f"the two axes must differ, got {xn} twice")
    gx, gy = np.meshgrid(np.asarray(xs, float), np.asarray(ys, float))
    return jacobian.chi_grid(model_name, cfg, {xn: gx, yn: gy}, base=Critical(**(fixed or {})), **estimate)


def theory_line(cfg: Any, x: tuple[str, Sequence[float]], fixed: dict[str, float] | None = None) -> np.ndarray:
    """The infinite-width critical sigma_w at each x value (sigma_b or mu) of an MLP-ResNet; NaN where none."""
    xn, xs = x
    base = jacobian.held_fixed("mlp_resnet", cfg, Critical(**(fixed or {})), {"sigma_w": 1.0})  # as the grid holds it
    block = theory.Block.of(cfg, float(base.branch_multiplier(cfg.depth, cfg.base_depth or cfg.depth)))
    out = []
    for v in xs:
        opts = {"sigma_b": float(base.sigma_b), "mu": float(base.mu), xn: float(v)}
        try:
            out.append(theory.critical_sigma_w(block, opts["sigma_b"], opts["mu"]))
        except ValueError:
            out.append(np.nan)
    return np.asarray(out)


def plot(chi: np.ndarray, x: tuple[str, Sequence[float]], y: tuple[str, Sequence[float]], path: str | Path,
         title: str = "", line: np.ndarray | None = None) -> None:
    """log2 chi_hat as a diverging heat map (blue ordered, red chaotic, grey where chi_hat is NaN: the float32
    stream overflowed), the contour chi_hat = 1, and `line` (critical sigma_w per x value, when y is sigma_w)
    dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 4.2), dpi=120)
    draw(ax, chi, x, y, title, line)
    fig.tight_layout()
    save_figure(fig, path)


def draw(ax: Any, chi: np.ndarray, x: tuple[str, Sequence[float]], y: tuple[str, Sequence[float]], title: str = "",
         line: np.ndarray | None = None, limit: float | None = None, line_color: str = "w") -> None:
    """`plot`'s drawing on the matplotlib axes `ax`; `limit`: the colour scale's largest |log2 chi_hat| (default:
    the data's); `line_color`: the critical line's."""
    (xn, xs), (yn, ys) = x, y
    z = np.log2(np.clip(chi, 1e-6, None))  # NaN (the float32 stream overflowed) stays NaN: a blank cell
    lim = limit or (max(float(np.nanmax(np.abs(z))), 0.05) if np.isfinite(z).any() else 1.0)
    import matplotlib

    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad="0.55")  # grey, not the white of chi = 1
    mesh = ax.pcolormesh(xs, ys, z, cmap=cmap, vmin=-lim, vmax=lim, shading="nearest")
    overflowed = "\ngrey: the float32 stream overflows" if np.isnan(z).any() else ""
    ax.figure.colorbar(mesh, ax=ax, label=r"$\log_2 \hat\chi$  (one-block APJN)" + overflowed)
    if np.nanmin(z) < 0 < np.nanmax(z):
        ax.contour(xs, ys, z, levels=[0.0], colors="k", linewidths=1.5)
    if line is not None and yn == "sigma_w":
        ax.plot(xs, line, "--", color=line_color, lw=1.5, label="infinite-width critical line")
        ax.legend(loc="upper left", fontsize=8)
    names = {"sigma_w": r"$\sigma_w$", "sigma_b": r"$\sigma_b$", "mu": r"$\mu$"}
    ax.set_xlabel(names.get(xn, xn))
    ax.set_ylabel(names.get(yn, yn))
    ax.set_title(title, fontsize=9)
