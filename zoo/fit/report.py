"""The outputs of a fit, in --out: law.json (what the `fitted` policy reads), fit.json (every size's optimum and
interval, the laws, the held-out checks), table.md (the table printed) and fit.png (per hyperparameter: loss against
the grid per size with its fitted optimum and interval; the optima against size with the law and its band)."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from zoo.fit.lawfile import Law, Power
from zoo.fit.optimum import curve
from zoo.fit.result import HYPER, Result

FILES = ("law.json", "fit.json", "table.md", "fit.png")


def law(result: Result) -> Law:
    run = result.sweeps.run
    return Law(run.model.name, run.param.name, run.optim.name, run.data.name, result.sweeps.metric, result.policy,
               {h: Power(f.intercept, f.reference, f.exponents, f.intervals, f.span) for h, f in result.laws.items()})


def law_text(result: Result, hyper: str) -> str:
    """`log2 lr* = -8.21 - 0.48 log2(width/64) [-0.61, -0.35]`."""
    f = result.laws[hyper]
    terms = "".join(f" {'-' if e < 0 else '+'} {abs(e):.3f} log2({a}/{f.reference[a]:g}) "
                    f"[{f.intervals[a][0]:+.3f}, {f.intervals[a][1]:+.3f}]" for a, e in f.exponents.items())
    name = "lr" if hyper == "lr" else "wd"
    spread = f", the sizes' own scatter {f.scatter:.3f} in the intervals" if round(f.scatter, 3) else ""
    return f"log2 {name}* = {f.intercept:.3f}{terms}  (RMS residual {f.residual:.3f}{spread})"


def rows(result: Result) -> list[list[str]]:
    """One row per size and hyperparameter: the size, the grid's best, the fitted optimum and its interval, the
    law's value there, and whether it was fitted or held out."""
    out = []
    for s in result.sizes:
        for h, opt in s.optima.items():
            size = s.grid.label(result.sweeps.axes)
            if opt is None:
                out.append([size, HYPER[h], "-", "< 3 trained", "-", "-", "held out" if s.held_out else "left out"])
                continue
            pred = f"{result.laws[h].predict(s.grid.size)[0]:.3f}" if h in result.laws else "no law"
            edge = " (grid edge)" if opt.at_edge else ""
            role = f"held out{edge}" if s.held_out else f"left out{edge}" if opt.at_edge else "fitted"
            out.append([size, HYPER[h], f"{opt.grid:g}", f"{opt.x:.3f}", f"[{opt.lo:.3f}, {opt.hi:.3f}]", pred,
                        role])
    return out


HEAD = ("size", "hyperparameter", "grid best log2", "fitted optimum log2", "95% interval", "law log2", "role")


def markdown(result: Result) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(result)]
    lines += ["", *(f"- {law_text(result, h)}" for h in result.laws), *(f"- {check_text(c)}" for c in result.checks),
              *(f"- no law of the {HYPER[h]}: {why}" for h, why in result.unfitted.items())]
    return "\n".join(lines) + "\n"


def check_text(c: Any) -> str:
    name = "lr" if c.hyper == "lr" else "wd"
    size = ", ".join(f"{a} {v}" for a, v in c.size.items())
    head = f"held out ({size}): predicted log2 {name}* {c.predicted[0]:.3f} [{c.predicted[1]:.3f}, " \
        f"{c.predicted[2]:.3f}], "
    if c.within_one_step is None:
        return head + (f"measured best {c.measured.grid:g} on the grid's edge or beside a diverged LR: this size's "
                       "optimum is not located (at or past it), so no verdict; widen or refine its grid")
    return head + (f"measured {c.measured.x:.3f} [{c.measured.lo:.3f}, {c.measured.hi:.3f}]: {c.error_steps:+.2f} "
                   f"grid steps ({'within' if c.within_one_step else 'NOT within'} one grid step of {c.grid_step:g})")


def table(result: Result) -> Any:
    from rich.table import Table

    run = result.sweeps.run
    t = Table(title=f"zoo.fit: {run.model.name} {run.param.name} {run.optim.name} on {run.data.name}, "
              f"{result.sweeps.metric}, policy {result.policy['name']}")
    for h in HEAD:
        t.add_column(h, justify="left" if h in ("size", "role", "hyperparameter") else "right")
    for r in rows(result):
        t.add_row(*r)
    t.caption = "\n".join([*(law_text(result, h) for h in result.laws), *(check_text(c) for c in result.checks),
                           *(f"no law of the {HYPER[h]}: {why}" for h, why in result.unfitted.items())])
    return t


def to_json(result: Result) -> dict[str, Any]:
    return {"dirs": result.sweeps.dirs, "metric": result.sweeps.metric, "axes": list(result.sweeps.axes),
            "policy": result.policy, "grid_steps": result.grid_steps,
            "laws": {h: {**law(result).laws[h].record(), "residual_rms": f.residual, "scatter": f.scatter,
                         "text": law_text(result, h)}
                     for h, f in result.laws.items()},
            "sizes": [{"size": s.grid.size, "held_out": s.held_out,
                       **{h: None if o is None else o.record() for h, o in s.optima.items()}} for s in result.sizes],
            "holdout": [c.record() for c in result.checks], "unfitted": result.unfitted}


def plot(result: Result) -> bytes:
    """The figure as PNG bytes: a row per hyperparameter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hypers = list(result.laws)
    fig, axes = plt.subplots(len(hypers), 2, figsize=(12, 4.4 * len(hypers)), squeeze=False)
    for row, h in zip(axes, hypers, strict=True):
        curves(row[0], result, h)
        optima(row[1], result, h)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    plt.close(fig)
    return buf.getvalue()


def curves(ax: Any, result: Result, h: str) -> None:
    """Loss against the log2 grid per size (profiled over the other hyperparameter), its optimum and interval."""
    import matplotlib

    colors = matplotlib.colormaps["viridis"](np.linspace(0.9, 0.1, max(len(result.sizes), 2)))
    for s, color in zip(result.sizes, colors, strict=False):
        g, opt = s.grid, s.optima[h]
        x = g.lr if h == "lr" else g.wd
        y = curve(g.loss, g.diverged) if h == "lr" else curve(g.loss.transpose(1, 0, 2), g.diverged.T)
        label = g.label(result.sweeps.axes) + (" (held out)" if s.held_out else "")
        ax.plot(x, y, "o--" if s.held_out else "o-", color=color, ms=3.5, label=label)
        if opt is not None:
            top = np.nanmin(y)
            interval_bar(ax, (opt.x, top), (opt.lo, opt.hi), "x", fmt="*", color=color, ms=12, mec="k", mew=0.6,
                         capsize=3)
    ax.set_xlabel(f"log2 {'learning rate' if h == 'lr' else 'weight decay'}"
                  + (f" (proxy units, policy {result.policy['name']})" if result.policy["name"] != "none" else ""))
    ax.set_ylabel(result.sweeps.metric.replace("_", " "))
    ax.set_title("loss per size; stars: fitted optimum with its 95% interval", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def optima(ax: Any, result: Result, h: str) -> None:
    """Each size's optimum with its interval against the law's first axis; the law and its 95% band; held-out sizes
    in red with the prediction."""
    f = result.laws[h]
    axis = f.axes[0]
    xs = np.array([s.grid.size[axis] for s in result.sizes], float)
    grid = np.geomspace(xs.min(), xs.max(), 50)
    others = {a: f.reference[a] for a in f.axes[1:]}
    pred = np.array([f.predict({axis: v, **others}) for v in grid])
    ax.plot(grid, pred[:, 0], "k-", lw=1, label=law_text(result, h).split("  (")[0])
    ax.fill_between(grid, pred[:, 1], pred[:, 2], color="0.8", alpha=0.6, label="law's 95% band")
    for s in result.sizes:
        opt = s.optima[h]
        if opt is None:
            continue
        color = "tab:red" if s.held_out else "0.5" if opt.at_edge else "tab:blue"
        interval_bar(ax, (s.grid.size[axis], opt.x), (opt.lo, opt.hi), "y", fmt="o", color=color, capsize=3, ms=5)
    for c in result.checks:
        if c.hyper == h:
            interval_bar(ax, (c.size[axis], c.predicted[0]), c.predicted[1:3], "y", fmt="D", color="tab:red",
                         mfc="none", capsize=4, ms=7,
                         label="held out: predicted (open) vs measured, " + (
                             "measured best on the grid's edge" if c.within_one_step is None else
                             f"{c.error_steps:+.2f} grid steps"))
    ax.set_xscale("log", base=2)
    ax.set_xlabel(axis + (f" (other axes at {others})" if others else ""))
    ax.set_ylabel(f"best log2 {'LR' if h == 'lr' else 'wd'}")
    ax.set_title("fitted optima (blue; grey: grid edge, left out; red: held out)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)


def interval_bar(ax: Any, at: tuple[float, float], interval: tuple[float, float], along: str, **style: Any) -> None:
    """A point `at` (x, y) and its interval (lo, hi) along "x" or "y", drawn from lo to hi: a bootstrap's percentile
    interval need not contain its point (few replicates: --boot 5), and matplotlib refuses an error bar given as
    negative distances from it."""
    lo, hi = interval
    mid, half = (lo + hi) / 2, [[(hi - lo) / 2]] * 2
    x, y = at
    bar = {"capsize": style.pop("capsize"), "color": style["color"]}
    if along == "x":
        ax.errorbar([mid], [y], xerr=half, fmt="none", **bar)
    else:
        ax.errorbar([x], [mid], yerr=half, fmt="none", **bar)
    ax.plot([x], [y], style.pop("fmt"), linestyle="none", **style)


def write(result: Result, out: Path) -> list[Path]:
    """law.json, fit.json, table.md and fit.png in `out`, each written whole, nearly as one set: everything is
    computed, written to temporary files and synced to disk first, then the four are renamed into place one after
    another, law.json (what the `fitted` policy reads) last, so only a kill within those four renames (microseconds)
    leaves a new file beside the previous fit's (a fit killed as it wrote its files in turn left its new law beside
    the previous fit's table and figure)."""
    from zoo.files import atomic, jsonable

    texts = {"law.json": json.dumps(jsonable(law(result).record()), indent=1).encode() + b"\n",
             "fit.json": json.dumps(jsonable(to_json(result)), indent=1).encode() + b"\n",
             "table.md": markdown(result).encode(), "fit.png": plot(result)}
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as renames:  # renamed as the stack unwinds: the last entered first
        for name, data in texts.items():
            f = renames.enter_context(atomic(out / name, "wb"))
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # on disk before any rename: the renames follow one another at once
    return [out / name for name in FILES]
