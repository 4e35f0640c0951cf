"""A power law across sizes: log2 x* = a + sum_k e_k log2(s_k / s0_k), fitted by least squares to each size's
optimum (zoo.fit.optimum) over the size axes s_k that vary (width, depth, batch_size, steps), s0_k the smallest.
Its interval comes from refitting the law to every bootstrap replicate of the sizes' optima (each replicate resampled
seeds and grid points per size), so the seeds' noise and the parabolas' uncertainty both reach the exponents."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from zoo.fit.optimum import interval

Size = dict[str, int]


@dataclasses.dataclass(frozen=True)
class Fit:
    """The law: its axes, their reference sizes, intercept and exponents; intervals from the replicates; the
    replicates' (intercept, exponents) rows for predictions' intervals; the RMS residual over the sizes."""

    axes: tuple[str, ...]
    reference: dict[str, float]
    intercept: float
    exponents: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    replicates: np.ndarray  # [boot, 1 + len(axes)]
    residual: float

    def predict(self, size: Size) -> tuple[float, float, float]:
        """(log2 x*, lo, hi) at `size`."""
        row = features([size], self.axes, self.reference)[0]
        coef = np.array([self.intercept, *(self.exponents[a] for a in self.axes)])
        lo, hi = interval(self.replicates @ row)
        return float(coef @ row), lo, hi


def features(sizes: Sequence[Size], axes: Sequence[str], reference: dict[str, float]) -> np.ndarray:
    """[1, log2(s_k / s0_k) ...] per size."""
    return np.array([[1.0, *(math.log2(s[a] / reference[a]) for a in axes)] for s in sizes])


def fit(sizes: Sequence[Size], optima: Sequence[float], replicates: np.ndarray, axes: Sequence[str]) -> Fit:
    """The law through `optima` (one per size) and its refit per bootstrap replicate (replicates [size, boot]; a
    replicate with a NaN at some size is left out)."""
    reference = {a: float(min(s[a] for s in sizes)) for a in axes}
    x = features(sizes, axes, reference)
    coef, *_ = np.linalg.lstsq(x, np.asarray(optima, float), rcond=None)
    residual = float(np.sqrt(np.mean((x @ coef - np.asarray(optima)) ** 2)))
    ok = np.all(np.isfinite(replicates), axis=0)
    reps = np.linalg.lstsq(x, replicates[:, ok], rcond=None)[0].T if ok.any() else np.full((0, len(coef)), np.nan)
    intervals = {a: interval(reps[:, i + 1]) for i, a in enumerate(axes)}
    return Fit(tuple(axes), reference, float(coef[0]), {a: float(coef[i + 1]) for i, a in enumerate(axes)},
               intervals, reps, residual)
