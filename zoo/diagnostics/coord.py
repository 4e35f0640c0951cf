"""Coordinate check (TP IVb; seed_tp4b_adam.md section 6): how each activation's change after t steps
scales with width n.

    data = coord_data("mlp_resnet", P.get("mup"), [256, 724, 2048], 3, 3, OptimConfig(lr=1e-3), batch,
                      depth=2, base_width=256)
    slopes([256, 724, 2048], data)   # layer -> slope per step of log RMS(h_t - h_0) against log n

Layers are the model's intermediates (nested dicts are joined with "/"; an entry whose leading axis is not
the batch axis is stacked per block, (L, B, ...), and gives one layer per block, "name/l") and the output
logits ("output"). RMS is over batch and coordinates; seeds are combined by a geometric mean. The theory
(Adam or SGD): muP 0 everywhere; NTK -1/2 on hidden activations and 0 on the output; UP_u -u.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoo import models
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.train.step import Batch, build_program, prepare_inputs


def rms_change(h: jax.Array, h0: jax.Array, stacked: bool) -> jax.Array:
    """RMS of h - h0 over batch and coordinates; one per block for a stacked (L, B, ...) entry."""
    return jnp.sqrt(jnp.mean(jnp.square((h - h0).astype(jnp.float32)), axis=tuple(range(int(stacked), h.ndim))))


def flatten(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """Nested dict of [seed, step] or [seed, step, L] arrays -> flat name -> [seed, step]."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in flatten(sub, f"{prefix}{key}/").items()}
    if tree.ndim == 3:
        return {f"{prefix}{l}": tree[..., l] for l in range(tree.shape[-1])}
    return {prefix[:-1]: tree}


def changes(model_name: str, plugin: Parametrization, seeds: Sequence[int], steps: int, optim_cfg: OptimConfig,
            batch: Batch, **model_overrides: Any) -> dict[str, np.ndarray]:
    """Layer -> [seed, step] RMS of the change h_t - h_0 (t = 1..steps) of one model trained on `batch`.

    Init runs eagerly (its per-shape kernels are shared by every plugin of one shape); the steps are one jitted
    scan, compiled once and run per seed.
    """
    cfg = models.config(model_name, **model_overrides)
    prog = build_program(lambda r: models.create(model_name, cfg, plugin, r), plugin, optim_cfg)
    x = prepare_inputs(jnp.asarray(batch["x"]), prog.dtype)

    def features(state, x):
        logits, inter = prog.model(state)(x)
        return {**inter, "output": logits}

    stacked = stacked_entries(features, jax.eval_shape(prog.init, jax.random.key(0)), x)

    @jax.jit
    def run(state):
        h0 = features(state, x)

        def step(state, _):
            state, _ = prog.train_step(state, batch)
            return state, jax.tree.map(rms_change, features(state, x), h0, stacked)

        return jax.lax.scan(step, state, length=steps)[1]

    runs = [run(prog.init(jax.random.key(s))) for s in seeds]
    return flatten(jax.tree.map(lambda *r: np.stack(r).astype(np.float64), *runs))


def coord_data(model_name: str, plugin: Parametrization, widths: Sequence[int], seeds: int | Sequence[int],
               steps: int, optim_cfg: OptimConfig, batch: Batch, **model_overrides: Any) -> dict[str, np.ndarray]:
    """Layer -> [width, step] geometric mean over seeds of RMS(h_t - h_0), t = 1..steps."""
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    return seed_means([changes(model_name, plugin, seeds, steps, optim_cfg, batch, width=w, **model_overrides)
                       for w in widths])


def stacked_entries(features: Any, state: Any, x: jax.Array) -> Any:
    """Which entries of features(state, x) are stacked per block, (L, B, ...): their leading axis does not follow
    the batch size (checked on shapes only)."""
    shapes, shapes_plus = (jax.eval_shape(features, state, v) for v in (x, jnp.concatenate([x, x[:1]])))
    return jax.tree.map(lambda a, b: a.shape[0] == b.shape[0], shapes, shapes_plus)


def seed_means(rows: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One row per size of layer -> [seed, step] RMS changes -> layer -> [size, step] geometric means over seeds."""
    with np.errstate(divide="ignore"):  # a layer that did not move (zero readout, t = 1) has log RMS = -inf
        return {k: np.exp(np.stack([np.log(r[k]).mean(0) for r in rows])) for k in rows[0]}


def slopes(widths: Sequence[int], data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Layer -> [step] least-squares slope of log RMS against log width, fitted step by step: a step with a zero
    (or non-finite) change at some width gets NaN without spoiling the others (hidden layers do not move at t = 1
    under a zero-initialized readout)."""
    logw = np.log(np.asarray(widths, np.float64))
    out = {}
    for k, v in data.items():
        with np.errstate(divide="ignore", invalid="ignore"):
            logv = np.log(v)
        ok = np.all(np.isfinite(logv), axis=0)
        out[k] = np.full(v.shape[1], np.nan)
        if ok.any():
            out[k][ok] = np.polyfit(logw, logv[:, ok], 1)[0]
    return out
