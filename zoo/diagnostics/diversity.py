"""Feature diversity across depth (Depth-muP, TP VI Def. 7.6; seed_depth_mup.md sections 1.3 and 4).

    d(eps) = n^-1/2 || x^{floor((lam + eps) L)} - x^{floor(lam L)} ||,   averaged over inputs (and tokens)

Depth-muP (alpha = gamma = 1/2) keeps d ~ eps^{1/2} after training (maximal diversity kappa = 1/2, Claim 7.5);
the ODE scaling (alpha = 1, gamma = 0) is redundant, d ~ eps (Claim 7.4). The log-log slope s of d against eps
estimates 1 - kappa. At init both give s ~ 1/2, so the comparison is meaningful only after training.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoo.train.step import Batch, Program, State, prepare_inputs


def feature_diversity(xs: Any, lam: float, eps_list: Sequence[float]) -> tuple[np.ndarray, float]:
    """d(eps) for each eps and its log-log slope against the depth fraction each d spans, (i1 - i0) / L with
    i = floor(. L): eps itself for the default eps = k/L, while an eps between two blocks measures the step floor
    rounds it to (eps = 1.5/L spans one block, so against eps the slope of a straight path read 1.29, not 1).
    xs: the stream x^0..x^L stacked, (L + 1, ..., n)."""
    xs = np.asarray(xs, np.float64)
    depth = xs.shape[0] - 1
    flat = xs.reshape(depth + 1, -1, xs.shape[-1])
    ends = [blocks(lam, eps, depth) for eps in eps_list]
    d = np.asarray([np.mean(np.linalg.norm(flat[i1] - flat[i0], axis=-1)) / np.sqrt(flat.shape[-1])
                    for i0, i1 in ends])
    return d, diversity_slope(d, eps_list, lam, depth)


def blocks(lam: float, eps: float, depth: int) -> tuple[int, int]:
    """The blocks (i0, i1) = (floor(lam L), floor((lam + eps) L)) whose streams d(eps) compares."""
    if not (np.isfinite(lam) and np.isfinite(eps)):
        raise ValueError(f"lam={lam}, eps={eps}: depth fractions are finite numbers")
    i0, i1 = block_at(lam, depth), block_at(lam + eps, depth)
    if not 0 <= i0 < i1 <= depth:
        raise ValueError(f"lam={lam}, eps={eps} at depth {depth} gives blocks {i0} -> {i1}: need 0 <= i0 < i1 <= L")
    return i0, i1


def diversity_slope(d: Sequence[float], eps_list: Sequence[float], lam: float, depth: int) -> float:
    """The log-log slope of d(eps) against the depth fraction (i1 - i0) / L each eps spans (NaN with fewer than two
    different spans, or where some d is 0 or not finite: a stream that does not move there has no power law); what
    feature_diversity returns, from stored d(eps) too."""
    spans = [(i1 - i0) / depth for i0, i1 in (blocks(lam, eps, depth) for eps in eps_list)]
    d = np.asarray(d, np.float64)
    if len(set(spans)) < 2 or not np.all(np.isfinite(d) & (d > 0)):
        return np.nan
    return float(np.polyfit(np.log(spans), np.log(d), 1)[0])


def block_at(fraction: float, depth: int) -> int:
    """floor(fraction L), the block at a depth fraction, with the product's float rounding forgiven: 0.29 * 100 is
    28.999999999999996 in floating point, which is block 29, not 28 (the start and each end of an eps step must
    round alike, or eps = k/L spans k + 1 blocks)."""
    x = fraction * depth
    return int(np.floor(x + 1e-9 * max(1.0, abs(x))))


def default_eps(depth: int, lam: float) -> list[float]:
    """eps = 1/L, 2/L, 4/L, 8/L, 16/L, those that stay inside the stack (at least two)."""
    eps = [k / depth for k in (1, 2, 4, 8, 16) if block_at(lam, depth) + k <= depth]
    if len(eps) < 2:
        raise ValueError(f"feature diversity at depth fraction {lam} needs at least 2 blocks after it; depth {depth} "
                         "has fewer (lower the fraction or deepen the model)")
    return eps


def diversity_probe(program: Program, lam: float = 0.5,
                    eps_list: Sequence[float] | None = None) -> Callable[[State, Any], tuple[np.ndarray, float]]:
    """(state, x) -> feature_diversity of the residual stream x^0..x^L on inputs x, jitted once per program.

    eps defaults to default_eps(L, lam)."""

    @jax.jit
    def stream(state, x):
        _, inter = program.model(state)(prepare_inputs(x, program.dtype))
        return jnp.concatenate([inter["embed"][None], inter["blocks"]], axis=0)

    def probe(state: State, x: Any) -> tuple[np.ndarray, float]:
        xs = stream(state, jnp.asarray(x))
        return feature_diversity(xs, lam, eps_list if eps_list is not None else default_eps(xs.shape[0] - 1, lam))

    return probe


def diversity_of(program: Program, state: State, batch: Batch, lam: float = 0.5,
                 eps_list: Sequence[float] | None = None) -> tuple[np.ndarray, float]:
    """feature_diversity of a trained (or initial) state on batch["x"]."""
    return diversity_probe(program, lam, eps_list)(state, batch["x"])
