"""One size's optimum over a log2 grid, with a bootstrap interval.

The loss is measured on a grid x_i (log2 LR or log2 wd) for seeds s, possibly over a second swept axis o (a wd grid
when fitting the LR, and the other way round), where the profile min_o is taken. The optimum is the vertex of the
least-squares parabola through the grid minimum and its HALF neighbours on each side (loss against log2 x is about
quadratic near its minimum: the curves every muP paper plots), kept within the minimum's two neighbours (where a
curve with one minimum has it); a concave fit, or fewer than 3 points, gives the grid minimum itself. On a curve
steeper on one side the vertex is pulled towards the shallower side, by 0.3, 0.6 and 0.9 grid steps on average for
one side 2, 4 and 15 times steeper (noiseless, piecewise quadratic), a bias the interval does not hold: a shape that
does not change with size shifts every size alike, which the law's exponent does not see, but a size's own optimum
and a held-out size's measured one carry it. A minimum on the grid's first or last point is not bracketed
(`at_edge`), nor one beside a point that diverged (a seed diverged there: `curve` counts the point out) or where
none trained, and neither is a vertex kept on such a point (beside the minimum): the loss may fall further towards
it, and the parabola, clipped, would put the optimum on the grid point with an interval of width 0.

The interval resamples what the estimate depends on: the seeds (columns drawn with replacement, the same for every
grid point: a seed's init and batches are shared across the grid) and the grid points of the window (drawn with
replacement until 3 distinct remain, and refitted, each replicate's vertex kept within its own minimum's neighbours,
as the optimum is); its ends are the replicates' 2.5 and 97.5 percentiles. Where the seeds are the only noise it is
conservative, a few times the optimum's own spread (docs/scaling_policies.md): the redrawn grid points stand in for a
one-seed sweep's noise and for the curve's departure from a parabola.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

HALF = 2  # grid points each side of the minimum in the parabola's window
MIN_POINTS = 3  # grid points a size needs (trained, not diverged): a parabola's minimum needs 3
LEVEL = 0.95


@dataclasses.dataclass(frozen=True)
class Optimum:
    """x: the fitted optimum; lo, hi: its interval; grid: the grid's own best point; replicates: the bootstrap's
    optima (NaN where a replicate had no finite point)."""

    x: float
    lo: float
    hi: float
    grid: float
    at_edge: bool
    replicates: np.ndarray

    def record(self) -> dict[str, float | bool]:
        return {"optimum": self.x, "lo": self.lo, "hi": self.hi, "grid_best": self.grid, "at_grid_edge": self.at_edge}


def vertex(x: np.ndarray, y: np.ndarray, bounds: tuple[float, float] | None = None) -> float:
    """The minimum of the least-squares parabola through (x, y), within `bounds` (default [min x, max x]); the lowest
    point's x where the fit is concave or there are fewer than 3 distinct x."""
    if len(np.unique(x)) < 3:
        return float(x[np.argmin(y)])
    a, b, _ = np.polyfit(x, y, 2)
    if a <= 0:
        return float(x[np.argmin(y)])
    lo, hi = bounds or (x.min(), x.max())
    return float(np.clip(-b / (2 * a), lo, hi))


def window(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the finite points within HALF grid positions (among the finite points) of the lowest."""
    finite = np.flatnonzero(np.isfinite(y))
    i = int(np.argmin(y[finite]))
    return finite[max(0, i - HALF):i + HALF + 1]


def unbracketed(y: np.ndarray, j: int) -> bool:
    """Grid point j has no trained point on one side: the grid's end, or beside a point that diverged or did not
    train."""
    return j in (0, len(y) - 1) or not (np.isfinite(y[j - 1]) and np.isfinite(y[j + 1]))


def bracket(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The lowest finite point's neighbours among the finite points (itself at an end): where a curve with one
    minimum has it."""
    finite = np.flatnonzero(np.isfinite(y))
    i = int(np.argmin(y[finite]))
    return float(x[finite[max(0, i - 1)]]), float(x[finite[min(len(finite) - 1, i + 1)]])


def curve(loss: np.ndarray, diverged: np.ndarray, seeds: np.ndarray | None = None) -> np.ndarray:
    """Loss against the grid: the mean over `seeds` (columns, default all) of loss [x, o, s] (NaN where missing), the
    profile minimum over o, NaN where every o diverged or is missing (`diverged` [x, o]: a seed diverged there)."""
    picked = loss if seeds is None else loss[:, :, seeds]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices are the NaNs meant
        mean = np.where(diverged, np.nan, np.nanmean(picked, axis=2))
        return np.nanmin(mean, axis=1) if np.any(np.isfinite(mean)) else np.full(len(loss), np.nan)


def optimum(x: np.ndarray, loss: np.ndarray, diverged: np.ndarray, rng: np.random.Generator,
            boot: int = 1000) -> Optimum | None:
    """The optimum of the grid `x` (log2, increasing) under loss [x, o, s] (see `curve`); None where fewer than
    MIN_POINTS points trained without diverging (one or two locate nothing: the lowest of them is no optimum)."""
    y = curve(loss, diverged)
    if np.count_nonzero(np.isfinite(y)) < MIN_POINTS:
        return None
    w = window(x, y)
    best = vertex(x[w], y[w], bracket(x, y))
    edge = unbracketed(y, int(np.nanargmin(y))) or (best in x and unbracketed(y, int(np.flatnonzero(x == best)[0])))
    reps = np.full(boot, np.nan)
    n_seeds = loss.shape[2]
    for b in range(boot):
        yb = curve(loss, diverged, rng.integers(0, n_seeds, n_seeds)) if n_seeds > 1 else y
        if not np.any(np.isfinite(yb)):
            continue
        wb = window(x, yb)
        pick = resample(wb, rng)
        if pick is not None:  # kept within the replicate's bracket, as the optimum is within its own
            reps[b] = vertex(x[pick], yb[pick], bracket(x, yb))
    lo, hi = interval(reps)
    return Optimum(best, lo, hi, float(x[np.nanargmin(y)]), edge, reps)


def resample(points: np.ndarray, rng: np.random.Generator, tries: int = 20) -> np.ndarray | None:
    """The window's points drawn with replacement, redrawn until 3 distinct remain (a parabola's minimum); None
    where the window has fewer than 3."""
    if len(points) < 3:
        return None
    for _ in range(tries):
        pick = rng.choice(points, len(points))
        if len(np.unique(pick)) >= 3:
            return pick
    return points


def interval(values: np.ndarray) -> tuple[float, float]:
    """The central LEVEL interval of the finite values (NaN, NaN when none)."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return float("nan"), float("nan")
    tail = (1 - LEVEL) / 2 * 100
    return float(np.percentile(finite, tail)), float(np.percentile(finite, 100 - tail))
