"""Feature diversity across depth (Depth-muP, TP VI Def. 7.6; seed_depth_mup.md sections 1.3 and 4).

    d(eps) = n^-1/2 || x^{floor((lam + eps) L)} - x^{floor(lam L)} ||,   averaged over inputs (and tokens)

Depth-muP (alpha = gamma = 1/2) keeps d ~ eps^{1/2} after training (maximal diversity kappa = 1/2, Claim 7.5);
the ODE scaling (alpha = 1, gamma = 0) is redundant, d ~ eps (Claim 7.4). The log-log slope s of d against eps
estimates 1 - kappa. At init both give s ~ 1/2, so the comparison is meaningful only after training.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoo.train.step import Batch, Program, State, prepare_inputs


def feature_diversity(xs: Any, lam: float, eps_list: Sequence[float]) -> tuple[np.ndarray, float]:
    """d(eps) for each eps and its log-log slope. xs: the stream x^0..x^L stacked, (L + 1, ..., n)."""
    xs = np.asarray(xs, np.float64)
    depth = xs.shape[0] - 1
    flat = xs.reshape(depth + 1, -1, xs.shape[-1])
    i0 = int(np.floor(lam * depth))
    d = []
    for eps in eps_list:
        i1 = int(np.floor((lam + eps) * depth + 1e-9))
        if not 0 <= i0 < i1 <= depth:
            raise ValueError(f"lam={lam}, eps={eps} at depth {depth} gives blocks {i0} -> {i1}: need 0 <= i0 < i1 <= L")
        d.append(np.mean(np.linalg.norm(flat[i1] - flat[i0], axis=-1)) / np.sqrt(flat.shape[-1]))
    d = np.asarray(d)
    slope = float(np.polyfit(np.log(np.asarray(eps_list, np.float64)), np.log(d), 1)[0]) if len(d) > 1 else np.nan
    return d, slope


def stream(program: Program, state: State, batch: Batch) -> jax.Array:
    """The residual stream x^0..x^L of the model in `state` on batch["x"]: (L + 1, B, ..., n)."""

    @jax.jit
    def run(state, x):
        _, inter = program.model(state)(prepare_inputs(x, program.dtype))
        return jnp.concatenate([inter["embed"][None], inter["blocks"]], axis=0)

    return run(state, jnp.asarray(batch["x"]))


def diversity_of(program: Program, state: State, batch: Batch, lam: float = 0.5,
                 eps_list: Sequence[float] | None = None) -> tuple[np.ndarray, float]:
    """feature_diversity of a trained (or initial) state; eps defaults to 1/L, 2/L, 4/L, 8/L, 16/L."""
    xs = stream(program, state, batch)
    depth = xs.shape[0] - 1
    eps_list = eps_list if eps_list is not None else [k / depth for k in (1, 2, 4, 8, 16)]
    return feature_diversity(xs, lam, eps_list)
