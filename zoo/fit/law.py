"""A power law across sizes: log2 x* = a + sum_k e_k log2(s_k / s0_k), fitted by least squares to each size's
optimum (zoo.fit.optimum) over the size axes s_k that vary (width, depth, batch_size, steps), s0_k the smallest.
Its interval comes from refitting the law to every bootstrap replicate of the sizes' optima (each replicate resampled
seeds and grid points per size), so the seeds' noise and the parabolas' uncertainty both reach the exponents.

Real sizes also scatter about a power law by more than that noise (a random-effects model: optimum_i = law(s_i) +
u_i + e_i, u_i ~ N(0, tau^2) the size's own deviation, e_i its bootstrapped noise). tau^2 is estimated by moments,
max(0, RSS / (n - p) - mean_i var(e_i)) over n sizes and p coefficients (DerSimonian and Laird's estimator), and
each replicate adds a draw of u_i to every size before the refit, and one more to a prediction: a new size has its
own deviation too. Estimated from n - p residuals, tau's draws are widened by t_{n-p}(0.975) / z(0.975) (a t
interval's width for a variance estimated from few points, after Hartung and Knapp). Where the sizes fit the law
within their noise, tau = 0 and the intervals are the bootstrap's."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import scipy.special

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
    scatter: float = 0.0  # tau: the sizes' own deviation from the law, beyond their noise
    # [boot] a new size's own deviation over tau (widened as tau's draws are)
    deviations: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    # every size axis (those held fixed too) -> the sizes' (min, max)
    span: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def predict(self, size: Size) -> tuple[float, float, float]:
        """(log2 x*, lo, hi) at `size`: the law's replicates there, each with a new size's own deviation."""
        row = features([size], self.axes, self.reference)[0]
        coef = np.array([self.intercept, *(self.exponents[a] for a in self.axes)])
        lo, hi = interval(self.replicates @ row + self.scatter * self.deviations)
        return float(coef @ row), lo, hi


def features(sizes: Sequence[Size], axes: Sequence[str], reference: dict[str, float]) -> np.ndarray:
    """[1, log2(s_k / s0_k) ...] per size."""
    return np.array([[1.0, *(math.log2(s[a] / reference[a]) for a in axes)] for s in sizes])


def fit(sizes: Sequence[Size], optima: Sequence[float], replicates: np.ndarray, axes: Sequence[str],
        rng: np.random.Generator) -> Fit:
    """The law through `optima` (one per size) and its refit per bootstrap replicate (replicates [size, boot]; a
    replicate with a NaN at some size is left out), each replicate's sizes moved by a draw of their own deviation
    (`scatter`)."""
    reference = {a: float(min(s[a] for s in sizes)) for a in axes}
    x = features(sizes, axes, reference)
    y = np.asarray(optima, float)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    ok = np.all(np.isfinite(replicates), axis=0)
    if np.count_nonzero(ok) < 2:
        raise ValueError(f"{np.count_nonzero(ok)} of {replicates.shape[1]} bootstrap replicates located the best at "
                         "every size (a size's seeds disagree on where it trains at all): the law would have no "
                         "interval; sweep more seeds, or LRs where every seed trains")
    dof = len(y) - np.linalg.matrix_rank(x)  # the residuals' degrees of freedom, n - p
    tau = scatter(y - x @ coef, dof, replicates[:, ok])
    widen = scipy.special.stdtrit(dof, 0.975) / scipy.special.ndtri(0.975) if tau else 1.0
    moved = replicates[:, ok] + widen * tau * rng.standard_normal(replicates[:, ok].shape)
    reps = np.linalg.lstsq(x, moved, rcond=None)[0].T
    intervals = {a: interval(reps[:, i + 1]) for i, a in enumerate(axes)}
    return Fit(tuple(axes), reference, float(coef[0]), {a: float(coef[i + 1]) for i, a in enumerate(axes)},
               intervals, reps, float(np.sqrt(np.mean((x @ coef - y) ** 2))), tau,
               widen * rng.standard_normal(len(reps)),
               {a: (float(min(s[a] for s in sizes)), float(max(s[a] for s in sizes))) for a in sizes[0]})


def scatter(residuals: np.ndarray, dof: int, replicates: np.ndarray) -> float:
    """tau, the sizes' own deviation from the law beyond their bootstrapped noise: sqrt(max(0, RSS / (n - p) - mean
    var(e_i))) (0 where the law has no residual degree of freedom, or no replicates tell the noise)."""
    if dof <= 0 or replicates.shape[1] < 2:
        return 0.0
    return float(np.sqrt(max(0.0, float(residuals @ residuals) / dof - float(np.mean(np.var(replicates, axis=1))))))
