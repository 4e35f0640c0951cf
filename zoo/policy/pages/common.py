"""What the scaling policies' pages share: their sweeps, run as zoo.sweep runs them (zoo.sweeps.runner.run_sweep,
one dir per setting, results.jsonl and sweep.json), fitted as zoo.fit fits them (zoo.fit.read, zoo.fit.result), and
their numbers as JSON (every size's curve, optimum and interval; the laws and held-out checks)."""

from __future__ import annotations

import contextlib
import math
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import zoo.policy
from zoo.config import RunConfig
from zoo.fit import optimum, read, result
from zoo.sweeps.runner import SweepSpec, run_sweep

WORK = Path("runs") / "policies"  # full runs' sweep dirs, kept for zoo.sweep --report-only and zoo.fit


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def work_dir(name: str, quick: bool) -> Iterator[Path]:
    """Where a page's sweeps go: runs/policies/NAME, emptied first (every number of a page, and the time it
    states, comes from one run) and kept after it (python -m zoo.fit reads them again); a temporary folder when
    quick."""
    if quick:
        with tempfile.TemporaryDirectory(prefix=f"zoo-{name}-") as tmp:
            yield Path(tmp)
    else:
        shutil.rmtree(WORK / name, ignore_errors=True)
        (WORK / name).mkdir(parents=True)
        yield WORK / name


def sweep(run: RunConfig, log2_lrs: list[float], out: Path, data: Any, seeds: int = 1, chunk: int = 100) -> Path:
    """One zoo.sweep dir: every LR x seed of `run` at its width and depth, as one vmapped program."""
    run_sweep(SweepSpec(run=run, lrs=[2.0**x for x in log2_lrs], out=out, seeds=seeds,
                        chunk=min(chunk, run.loop.steps)), lambda s: log(f"  {out.name}: {s}"), data)
    return out


def fit(dirs: list[Path], metric: str = "train_loss", policy: str = "none", proxy: tuple[int | None, int | None] =
        (None, None), holdout: dict[str, int] | None = None, boot: int = 1000, axes: list[str] | None = None
        ) -> dict[str, Any]:
    """zoo.fit of `dirs` (read under `policy`, fitted in `axes`) as JSON-able numbers; a fit that is refused (too few
    sizes located) is its error line."""
    p = None if policy == "none" else zoo.policy.get(policy)
    sweeps = read.load(dirs, metric, p, proxy)
    try:
        res = result.fit(sweeps, holdout, boot, 0, None if p is None else p.spec(), axes)
    except ValueError as e:
        return {"error": str(e), "sizes": [size(g, None, False) for g in sweeps.grids]}
    return {"axes": list(sweeps.axes), "grid_step": res.grid_steps,
            "sizes": [size(s.grid, s.optima, s.held_out) for s in res.sizes],
            "laws": {h: {"intercept": f.intercept, "reference": f.reference, "exponents": f.exponents,
                         "intervals": f.intervals, "residual": f.residual} for h, f in res.laws.items()},
            "checks": [c.record() for c in res.checks], "unfitted": res.unfitted}


def size(g: read.Grid, optima: dict[str, optimum.Optimum | None] | None, held_out: bool) -> dict[str, Any]:
    """One size: its axes, its loss curve over the log2 LR grid (and wd grid, profiled), its optima."""
    out = {"size": g.size, "held_out": held_out,
           "lr": {"x": g.lr.tolist(), "loss": optimum.curve(g.loss, g.diverged).tolist()}}
    if len(g.wd) > 1:
        out["wd"] = {"x": g.wd.tolist(), "loss": optimum.curve(g.loss.transpose(1, 0, 2), g.diverged.T).tolist(),
                     "seed_std": seed_std(g).tolist()}
    for h, o in (optima or {}).items():
        out.setdefault("lr" if h == "lr" else "wd", {})["optimum"] = None if o is None else o.record()
    return out


def seed_std(g: read.Grid) -> Any:
    """Per weight decay, the standard deviation over seeds of the loss at the LR that minimises the seeds' mean."""
    import numpy as np

    with np.errstate(all="ignore"):
        mean = np.where(g.diverged, np.nan, np.nanmean(g.loss, axis=2))  # [lr, wd]
        best = np.nanargmin(np.where(np.isfinite(mean), mean, np.inf), axis=0)
        return np.array([np.nanstd(g.loss[i, j]) if g.loss.shape[2] > 1 else 0.0 for j, i in enumerate(best)])


def optima(fitted: dict[str, Any], hyper: str = "lr", axis: str = "batch_size") -> dict[int, dict[str, Any] | None]:
    """Size along `axis` -> the fitted optimum record of `hyper` (None where none was located)."""
    key = "lr" if hyper == "lr" else "wd"
    return {s["size"][axis]: s.get(key, {}).get("optimum") for s in fitted["sizes"]}


def spread(fitted: dict[str, Any], hyper: str, axis: str) -> float | None:
    """max - min of the fitted optima over the sizes (None where one is missing or on the grid's edge)."""
    found = optima(fitted, hyper, axis).values()
    if any(o is None or o["at_grid_edge"] for o in found):
        return None
    xs = [o["optimum"] for o in found]
    return max(xs) - min(xs)


def exponent(fitted: dict[str, Any], hyper: str, axis: str) -> tuple[float, float, float] | None:
    """(exponent, lo, hi) of `axis` in the law of `hyper`; None where the fit was refused."""
    law = fitted.get("laws", {}).get(hyper)
    if law is None or axis not in law["exponents"]:
        return None
    lo, hi = law["intervals"][axis]
    return law["exponents"][axis], lo, hi


def interval_text(e: tuple[float, float, float] | None) -> str:
    return "no fit" if e is None else f"{e[0]:+.3f} [{e[1]:+.3f}, {e[2]:+.3f}]"


def log2_grid(start: float, stop: float, step: float) -> list[float]:
    return [start + i * step for i in range(int(math.floor((stop - start) / step + 1e-9)) + 1)]


def curves_panel(ax: Any, fitted: dict[str, Any], hyper: str, axis: str, title: str, xlabel: str) -> None:
    """Loss against the log2 grid, one curve per size along `axis` (light to dark), a star at each fitted optimum
    with its 95% interval."""
    import matplotlib
    import numpy as np

    key = "lr" if hyper == "lr" else "wd"
    colors = matplotlib.colormaps["viridis"](np.linspace(0.9, 0.1, max(len(fitted["sizes"]), 2)))
    for s, color in zip(fitted["sizes"], colors, strict=False):
        part = s[key]
        y = np.array([np.nan if v is None else v for v in part["loss"]], float)
        label = f"{axis.replace('_', ' ')} {s['size'][axis]}" + (" (held out)" if s["held_out"] else "")
        ax.plot(part["x"], y, "o--" if s["held_out"] else "o-", color=color, ms=3, label=label)
        o = part.get("optimum")
        if o is not None and np.any(np.isfinite(y)):
            ax.errorbar([o["optimum"]], [np.nanmin(y)], xerr=[[o["optimum"] - o["lo"]], [o["hi"] - o["optimum"]]],
                        fmt="*", color=color, ms=11, mec="k", mew=0.5, capsize=3)
    finite = [v for s in fitted["sizes"] for v in s[key]["loss"] if v is not None]
    if finite:
        lo = min(finite)
        ax.set_ylim(lo - 0.02 * abs(lo), lo + 3 * (float(np.median(finite)) - lo) + 1e-3)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("loss")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)


def optima_panel(ax: Any, arms: dict[str, dict[str, Any]], hyper: str, axis: str, title: str) -> None:
    """Each arm's fitted optima (with intervals) against the size along `axis`, and its law where fitted."""
    import numpy as np

    for (label, fitted), color in zip(arms.items(), ("tab:blue", "tab:orange", "tab:green", "tab:red"),
                                      strict=False):
        found = {k: o for k, o in optima(fitted, hyper, axis).items() if o is not None}
        xs = np.array(sorted(found), float)
        if not len(xs):
            continue
        ys = np.array([found[k]["optimum"] for k in sorted(found)])
        err = np.array([[found[k]["optimum"] - found[k]["lo"], found[k]["hi"] - found[k]["optimum"]]
                        for k in sorted(found)]).T
        e = exponent(fitted, hyper, axis)
        ax.errorbar(xs, ys, yerr=err, fmt="o", color=color, capsize=3, label=f"{label}: exponent {interval_text(e)}")
        law = fitted.get("laws", {}).get(hyper)
        if law is not None and list(law["exponents"]) == [axis]:
            grid = np.geomspace(xs.min(), xs.max(), 30)
            ax.plot(grid, law["intercept"] + law["exponents"][axis] * np.log2(grid / law["reference"][axis]), "-",
                    color=color, lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(axis.replace("_", " "))
    ax.set_ylabel(f"fitted best log2 {'LR' if hyper == 'lr' else 'weight decay'}")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
