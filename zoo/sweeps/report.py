"""The sweep report: loss against log2 LR (one curve per width or depth), the best log2 LR per size and the
transfer score (how many grid steps the best LR moves across sizes), as a PNG and a rich table.

Seeds are averaged; an (LR, size) point counts as diverged if any of its seeds diverged. Diverged points are
drawn as x markers at the top of the plot and never chosen as the best.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from zoo.config import word
from zoo.files import save_figure
from zoo.sweeps.results import RESULTS, check_record, skipped_lines

METRICS = ("train_loss", "eval_loss")


@dataclasses.dataclass
class Curve:
    """One size: log2 LRs (rounded to 6 decimals, as members are matched), mean loss per LR (NaN where diverged), the
    diverged mask, the best point, and the LRs as the members trained them (lr[i] = 2^log2_lr[i] up to that
    rounding: 1e-3 is 2^-9.965784, whose power is 1.0000002e-3, another float32)."""

    width: int
    depth: int
    log2_lr: np.ndarray
    loss: np.ndarray
    diverged: np.ndarray
    eval_accuracy: np.ndarray
    best: int | None  # index into log2_lr; None when every LR diverged
    lr: np.ndarray

    @property
    def best_log2_lr(self) -> float | None:
        return None if self.best is None else float(self.log2_lr[self.best])

    @property
    def best_lr(self) -> float | None:
        """The best LR as its members held it (None when every LR diverged)."""
        return None if self.best is None else float(self.lr[self.best])

    @property
    def best_loss(self) -> float | None:
        return None if self.best is None else float(self.loss[self.best])

    @property
    def at_edge(self) -> bool:
        return self.best is not None and self.best in (0, len(self.log2_lr) - 1)


@dataclasses.dataclass
class Summary:
    curves: list[Curve]
    axis: str  # "width", "depth" or "shape": what varies
    grid_step: float  # in log2 units
    metric: str
    missing: list[tuple[int, int, float, int]] = dataclasses.field(default_factory=list)  # see `missing_members`
    unreadable: int = 0  # lines of results.jsonl skipped (results.unreadable: torn, edited or a member's second)

    def warnings(self) -> list[str]:
        """What the numbers lack: members of the grid a size did not train, lines that could not be read."""
        out = []
        if self.missing:
            shown = ", ".join(f"width {w} depth {d} log2 LR {x:g} seed {s}" for w, d, x, s in self.missing[:4])
            more = f" and {len(self.missing) - 4} more" if len(self.missing) > 4 else ""
            out.append(f"{len(self.missing)} member(s) of the grid missing ({shown}{more}): those points average "
                       "fewer seeds or are absent; rerun the sweep with those LRs and sizes to train them")
        if self.unreadable:
            out.append(f"{skipped_lines(self.unreadable, RESULTS)}; a rerun of the sweep trains a torn line's member "
                       "again")
        return out

    @property
    def transfer_score(self) -> float | None:
        """max - min of the best log2 LR over the sizes (that did not all diverge), in grid steps: of the members'
        own LRs, rounded to 6 decimals (the rounded keys made 3 steps of 1/3 read 1 / 0.333333 = 3.000003)."""
        best = [math.log2(c.best_lr) for c in self.curves if c.best is not None]
        if len(best) < 2 or self.lrs_swept < 2:  # one LR: every size's best is it, a score of 0 that measured nothing
            return None
        return steps_between(max(best), min(best), self.grid_step)

    @property
    def lrs_swept(self) -> int:
        """The distinct learning rates over all sizes."""
        return len({float(x) for c in self.curves for x in c.log2_lr})

    def label(self, c: Curve) -> str:
        if self.axis == "width":
            return f"width {c.width}"
        if self.axis == "depth":
            return f"depth {c.depth}"
        return f"width {c.width} depth {c.depth}"


def summarize(records: list[dict[str, Any]], metric: str = "train_loss") -> Summary:
    """Curves per (width, depth) from member records, seeds averaged."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if not records:
        raise ValueError("no results to report")
    points: dict[tuple[int, int], dict[float, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        check_record(r, metric)
        points[(r["width"], r["depth"])][round(r["log2_lr"], 6)].append(r)
    curves = []
    for (width, depth), by_lr in sorted(points.items()):
        x = np.array(sorted(by_lr))
        div = np.array([any(r["diverged"] or r[metric] is None for r in by_lr[k]) for k in x])
        loss = np.array([np.nan if d else np.mean([r[metric] for r in by_lr[k]]) for k, d in zip(x, div, strict=True)])
        acc = np.array([np.mean([r["eval_accuracy"] if r["eval_accuracy"] is not None else np.nan
                                 for r in by_lr[k]]) for k in x])
        best = None if np.all(np.isnan(loss)) else int(np.nanargmin(loss))
        lrs = np.array([by_lr[k][0]["lr"] for k in x], np.float64)
        curves.append(Curve(width, depth, x, loss, div, acc, best, lr=lrs))
    widths, depths = {c.width for c in curves}, {c.depth for c in curves}
    axis = "shape" if len(widths) > 1 and len(depths) > 1 else "depth" if len(depths) > 1 else "width"
    return Summary(curves, axis, grid_step(curves), metric, missing_members(points))


def grid_step(curves: list[Curve]) -> float:
    """The smallest gap between the log2 LRs of the sizes' members (one LR per rounded key); 1 for one LR."""
    exact: dict[float, float] = {}
    for c in curves:
        for x, lr in zip(c.log2_lr, c.lr, strict=True):
            exact.setdefault(float(x), math.log2(lr))
    gaps = np.diff([exact[x] for x in sorted(exact)])
    return float(gaps.min()) if len(gaps) else 1.0


def steps_between(a: float, b: float, step: float) -> float:
    """(a - b) / step, rounded to 6 decimals (the float error of log2 is far below that)."""
    return round((a - b) / step, 6) + 0.0  # + 0.0: -0.0 reads 0


def missing_members(points: dict[tuple[int, int], dict[float, list[dict]]]) -> list[tuple[int, int, float, int]]:
    """(width, depth, log2 LR, seed) of every member of the grid (the LRs x seeds any size trained) that a size
    lacks: a line lost from results.jsonl, or a size swept over fewer LRs than the others."""
    grid = {(x, r["seed"]) for by_lr in points.values() for x, rs in by_lr.items() for r in rs}
    return [(w, d, x, s) for (w, d), by_lr in sorted(points.items())
            for x, s in sorted(grid - {(x, r["seed"]) for x, rs in by_lr.items() for r in rs})]


def table(summary: Summary, title: str = "") -> Any:
    """A rich Table: per size, the best log2 LR, its loss and eval accuracy, diverged count."""
    from rich.table import Table

    t = Table(title=title or None)
    for col in (summary.axis, "best log2 LR", f"best {summary.metric.replace('_', ' ')}", "eval acc at best",
                "diverged"):
        t.add_column(col, justify="right")
    for c in summary.curves:
        size = summary.label(c).replace("width ", "").replace("depth ", "") if summary.axis != "shape" \
            else summary.label(c)
        if c.best is None:
            t.add_row(size, "-", "all diverged", "-", f"{int(c.diverged.sum())}/{len(c.diverged)}")
            continue
        edge = " (grid edge)" if c.at_edge else ""
        t.add_row(size, f"{c.best_log2_lr:g}{edge}", f"{c.best_loss:.4f}", f"{c.eval_accuracy[c.best]:.3f}",
                  f"{int(c.diverged.sum())}/{len(c.diverged)}")
    t.caption = "transfer score: " + score_text(summary)
    return t


def score_text(summary: Summary) -> str:
    """The transfer score in grid steps, naming the sizes it leaves out (those that diverged at every LR have no
    best: a score over the others alone read as a transfer across every size), or why there is none: one size, one
    LR, or sizes that diverged at every LR."""
    score = summary.transfer_score
    lost = [summary.label(c) for c in summary.curves if c.best is None]
    if score is not None:
        left_out = f", over {len(summary.curves) - len(lost)} of {len(summary.curves)} sizes ({', '.join(lost)} " \
            "diverged at every LR)" if lost else ""
        return f"{score:g} grid steps (grid step {summary.grid_step:g} in log2 LR){left_out}"
    if summary.lrs_swept < 2:
        return "n/a (one LR swept: it is every size's best)"
    if len(summary.curves) < 2:
        return "n/a (one size trained)"
    return f"n/a ({len(lost)} of {len(summary.curves)} sizes diverged at every LR)"


def plot(summary: Summary, path: Path, title: str = "") -> Path:
    """Loss against log2 LR, one curve per size (light to dark as the size grows); x markers: diverged."""
    return plot_panels([(summary, title)], path)


def plot_panels(panels: list[tuple[Summary, str]], path: Path) -> Path:
    """One `plot` panel per (summary, title), side by side, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 4.4), squeeze=False)
    for ax, (summary, title) in zip(axes[0], panels, strict=True):
        panel(ax, summary, title)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def panel(ax: Any, summary: Summary, title: str) -> None:
    """Draw `summary` on the matplotlib axes `ax` (as `plot` does)."""
    import matplotlib

    finite = np.concatenate([c.loss[np.isfinite(c.loss)] for c in summary.curves])
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.5, 1.0)
    log = lo > 0 and hi / lo > 4  # losses over decades (memorised train sets, blow-ups): log scale
    rows = _mark_rows(lo, hi, log, sum(bool(c.diverged.any()) for c in summary.curves))
    top, rows = rows[-1], iter(rows)
    colors = matplotlib.colormaps["viridis"](np.linspace(0.9, 0.1, max(len(summary.curves), 2)))
    for c, color in zip(summary.curves, colors, strict=False):
        ax.plot(c.log2_lr, c.loss, "o-", color=color, ms=3.5, label=summary.label(c))
        if c.diverged.any():
            ax.plot(c.log2_lr[c.diverged], np.full(int(c.diverged.sum()), next(rows)), "x", color=color, ms=7, mew=2,
                    clip_on=False)
        if c.best is not None:
            ax.plot([c.log2_lr[c.best]], [c.loss[c.best]], "*", color=color, ms=13, mec="k", mew=0.6)
    if log:
        ax.set_yscale("log")
        ax.set_ylim(lo / 1.1, top * 1.05)
    else:
        ax.set_ylim(lo - 0.05 * max(hi - lo, 1e-3), top + 0.04 * max(hi - lo, 1e-3))
    ax.set_xlabel("log2 learning rate")
    ax.set_ylabel(summary.metric.replace("_", " "))
    score = summary.transfer_score
    sub = "transfer score " + ("n/a" if score is None else f"{score:g} grid steps")
    ax.set_title(f"{title}\n{sub}  (stars: best; x at top: diverged)" if title else sub, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)


def _mark_rows(lo: float, hi: float, log: bool, n: int) -> list[float]:
    """The heights of the x marks above the curves: a row for each of the `n` sizes that diverged somewhere (at
    least one), so that sizes diverged at the same LR do not hide one another's marks."""
    span = max(hi - lo, 1e-3)
    return [hi * 1.15 * 1.08**i if log else hi + (0.08 + 0.05 * i) * span for i in range(max(n, 1))]


def title(settings: dict[str, Any]) -> str:
    """`model param (opts), optimizer, N steps, data` from DIR/sweep.json."""
    opts = ", ".join(f"{k}={word(v)}" for k, v in sorted(settings.get("param_opt", {}).items()))
    param = f"{settings.get('param')}" + (f" ({opts})" if opts else "")
    return (f"{settings.get('model')} {param}, {settings.get('optimizer')}, {settings.get('steps')} steps, "
            f"{settings.get('data')}")


def best_log2_lrs(summary: Summary) -> dict[tuple[int, int], float | None]:
    """(width, depth) -> best log2 LR (None if every LR diverged)."""
    return {(c.width, c.depth): c.best_log2_lr for c in summary.curves}


def write(out: Path, metric: str) -> tuple[Summary, str, Path]:
    """The report of the sweep in `out`: (summary, title, DIR/sweep.png), with DIR/summary.json (the best log2 LR
    per size and the transfer score) written atomically."""
    from zoo.files import write_atomic
    from zoo.sweeps import results

    head = title(results.read_settings(out))
    records, unreadable = results.read(out), results.unreadable(out)
    if not records and unreadable:  # else "no results to report" for a file of lines
        raise ValueError(f"no results to report: {skipped_lines(unreadable, str(out / RESULTS))}")
    summary = summarize(records, metric)
    summary.unreadable = unreadable
    png = plot(summary, out / "sweep.png", head)
    best = [{"width": c.width, "depth": c.depth, "best_log2_lr": c.best_log2_lr, "best_loss": c.best_loss,
             "at_grid_edge": c.at_edge, "diverged": int(c.diverged.sum()), "lrs": len(c.diverged)}
            for c in summary.curves]
    write_atomic(out / "summary.json", json.dumps({"metric": metric, "axis": summary.axis,
                                                   "grid_step": summary.grid_step,
                                                   "transfer_score": summary.transfer_score, "sizes": best,
                                                   "missing_members": [dict(zip(("width", "depth", "log2_lr", "seed"),
                                                                                m, strict=True))
                                                                       for m in summary.missing],
                                                   "unreadable_lines": summary.unreadable},
                                                  indent=1) + "\n")
    return summary, head, png
