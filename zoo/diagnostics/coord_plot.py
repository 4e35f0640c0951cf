"""The coordinate-check figure: RMS of each group's change against width (or depth), one line per step, one
panel per layer group, with the expected slope as a dashed reference (TP-V Fig. 1 style, log-log)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from zoo.diagnostics.verdict import group_of
from zoo.files import save_figure

ORDER = ("input", "hidden", "stream", "attention", "output")


def group_means(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Group -> [size, step] geometric mean over the group's layers."""
    groups: dict[str, list[np.ndarray]] = {}
    with np.errstate(divide="ignore"):  # a layer that did not move: -inf, drawn as a gap
        for layer, v in data.items():
            groups.setdefault(group_of(layer), []).append(np.log(np.asarray(v, np.float64)))
    return {g: np.exp(np.mean(groups[g], axis=0)) for g in ORDER if g in groups}


def plot(sizes: Sequence[int], data: dict[str, np.ndarray], expected: dict[str, float], path: str | Path,
         title: str = "", axis: str = "width", failed: Sequence[str] = ()) -> None:
    """Write the figure to `path` (PNG); panels of groups listed in `failed` get a red frame."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = group_means(data)
    fig, axes = plt.subplots(1, len(means), figsize=(3.3 * len(means), 3.2), dpi=120, squeeze=False)
    x = np.asarray(sizes, np.float64)
    for ax, (group, m) in zip(axes[0], means.items(), strict=True):
        colors = plt.cm.viridis(np.linspace(0.0, 0.85, m.shape[1]))
        for t in range(m.shape[1]):
            ax.loglog(x, m[:, t], "o-", color=colors[t], ms=3, label=f"t={t + 1}")
        if np.isfinite(expected[group]):  # NaN: theory says the group does not move (frozen)
            ref = m[0, 0] * (x / x[0]) ** expected[group]
            ax.loglog(x, ref, "k--", lw=1, label=f"expected slope {expected[group]:+.2g}")
        ax.set_xscale("log", base=2)
        ax.set_title(group, color="red" if group in failed else "black")
        ax.set_xlabel(axis)
        if group in failed:
            for spine in ax.spines.values():
                spine.set_edgecolor("red")
                spine.set_linewidth(2)
    axes[0][0].set_ylabel("RMS of the change $h_t - h_0$")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
