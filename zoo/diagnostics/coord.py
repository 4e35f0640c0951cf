"""Coordinate check (TP IVb; seed_tp4b_adam.md section 6): how each activation's change after t steps
scales with width n (or depth L).

    data = coord_data("mlp_resnet", P.get("mup"), [256, 724, 2048], 3, 3, OptimConfig(lr=1e-3), batch,
                      depth=2, base_width=256)
    slopes([256, 724, 2048], data)   # layer -> slope per step of log RMS(h_t - h_0) against log n

Layers are the model's intermediates (nested dicts are joined with "/"; an entry whose leading axis is not
the batch axis is stacked per block, (L, B, ...), and gives one layer per block, "name/l") and the output
logits ("output"). RMS is over batch and coordinates; seeds are combined by a geometric mean. The theory
(Adam or SGD): muP 0 everywhere; NTK -1/2 on hidden activations and 0 on the output; UP_u -u.

A `CoordRun` also measures the change caused by the residual-branch parameters alone (every other parameter put
back to its init after each step: the part of the update that scales like L^(1 - alpha - gamma), TP VI section 7)
and each layer's RMS at init, for the relative change RMS(h_t - h_0) / RMS(h_0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from zoo import models, optim
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.train.step import Batch, Program, build_program, prepare_inputs

Layers = dict[str, np.ndarray]


def rms(h: jax.Array, stacked: bool) -> jax.Array:
    """RMS over batch and coordinates; one per block for a stacked (L, B, ...) entry."""
    return jnp.sqrt(jnp.mean(jnp.square(h.astype(jnp.float32)), axis=tuple(range(int(stacked), h.ndim))))


@dataclasses.dataclass
class Changes:
    """Layer -> [seed, step] RMS of h_t - h_0 (t = 1..steps): with every parameter trained (`total`) and with only
    the residual-branch parameters moved (`branch`, when asked); layer -> [seed] RMS of h_0 (`init`)."""

    total: Layers
    branch: Layers
    init: Layers


class CoordRun:
    """One model shape under one plugin and optimizer, trained `steps` steps on one batch. Init runs eagerly (its
    per-shape kernels are shared by every plugin of one shape); the steps are one jitted scan that takes the
    plugin's per-parameter rules, the learning rate and the batch as arguments, so one compiled program serves every
    plugin, seed and LR of a shape (a process-wide cache)."""

    def __init__(self, model_name: str, plugin: Parametrization, steps: int, optim_cfg: OptimConfig, batch: Batch,
                 branch: bool = False, **model_overrides: Any):
        cfg = models.config(model_name, **model_overrides)
        self.prog = build_program(lambda r: models.create(model_name, cfg, plugin, r), plugin, optim_cfg)
        self.lr, self.batch = optim_cfg.lr, {k: jnp.asarray(v) for k, v in batch.items()}
        abstract = jax.eval_shape(self.prog.init, jax.random.key(0))
        self.rules = optim.rules(plugin, abstract["params"], optim_cfg)
        key = (model_name, repr(cfg), jax.tree.structure(abstract), steps, branch,
               repr({k: v for k, v in dataclasses.asdict(optim_cfg).items() if k != "lr"}),
               tuple((k, v.shape, v.dtype) for k, v in sorted(self.batch.items())))
        if key not in _PROGRAMS:
            _PROGRAMS[key] = _program(self.prog, optim_cfg, abstract, steps, branch, self.batch)
        self._run = _PROGRAMS[key]

    def __call__(self, seeds: Sequence[int], lr: float | None = None) -> Changes:
        """The changes of models initialised with each seed and trained at `lr` (default: the optimizer's)."""
        lr = jnp.asarray(self.lr if lr is None else lr, jnp.float32)
        runs = [self._run(self.prog.init(jax.random.key(s), lr), self.rules, self.batch) for s in seeds]
        init = jax.tree.map(lambda *r: np.stack(r).astype(np.float64), *[r[0] for r in runs])
        moved = jax.tree.map(lambda *r: np.stack(r).astype(np.float64), *[r[1] for r in runs])
        return Changes(per_layer(moved["total"]), per_layer(moved.get("branch", {})), per_layer(init, steps=False))


_PROGRAMS: dict[tuple, Any] = {}


def _program(prog: Program, optim_cfg: OptimConfig, abstract: Any, steps: int, branch: bool, batch: Batch):
    """jit((state, rules, batch) -> (layer RMS at init, per-step RMS of the changes)) for one shape."""
    x_abstract = jax.ShapeDtypeStruct(batch["x"].shape, batch["x"].dtype)

    def features(state, x):
        logits, inter = prog.model(state)(prepare_inputs(x, prog.dtype))
        return {**inter, "output": logits}

    stacked = stacked_entries(features, abstract, x_abstract)
    in_branch = [v.get_metadata()["tag"].branch for v in
                 jax.tree.leaves(abstract["params"], is_leaf=lambda v: isinstance(v, nnx.Variable))]
    route = optim.routes(optim_cfg, abstract["params"])

    def branch_only(params, params0):
        """The branch parameters of `params`, every other parameter of `params0`."""
        new, treedef = jax.tree.flatten(params)
        return jax.tree.unflatten(treedef, [a if b else a0 for b, a, a0 in
                                            zip(in_branch, new, jax.tree.leaves(params0), strict=True)])

    def change(h, h0, s):
        return rms(h - h0, s)

    @jax.jit
    def run(state, rules, batch):
        stepper = dataclasses.replace(prog, tx=optim.chain(optim_cfg, *rules, route=route))
        h0 = features(state, batch["x"])

        def one(st, _):
            st, _ = stepper.train_step(st, batch)
            out = {"total": jax.tree.map(change, features(st, batch["x"]), h0, stacked)}
            if branch:
                moved = {**st, "params": branch_only(st["params"], state["params"])}
                out["branch"] = jax.tree.map(change, features(moved, batch["x"]), h0, stacked)
            return st, out

        return jax.tree.map(rms, h0, stacked), jax.lax.scan(one, state, length=steps)[1]

    return run


def stacked_entries(features: Any, state: Any, x: jax.ShapeDtypeStruct | jax.Array) -> Any:
    """Which entries of features(state, x) are stacked per block, (L, B, ...): their leading axis does not follow
    the batch size (checked on shapes only)."""
    more = jax.ShapeDtypeStruct((x.shape[0] + 1, *x.shape[1:]), x.dtype)
    shapes, plus = (jax.eval_shape(features, state, v) for v in (x, more))
    return jax.tree.map(lambda a, b: a.shape[0] == b.shape[0], shapes, plus)


def per_layer(tree: Any, steps: bool = True) -> Layers:
    """Nested [seed, step(, L)] (or [seed(, L)] with steps=False) -> layer -> [seed, step] (or [seed])."""
    if isinstance(tree, dict):
        return {f"{key}/{k}" if k else key: v for key, sub in tree.items()
                for k, v in per_layer(sub, steps).items()}
    if tree.ndim == 2 + int(steps):
        return {str(l): tree[..., l] for l in range(tree.shape[-1])}
    return {"": tree}


def geometric_mean(per_size: Sequence[Layers]) -> Layers:
    """Layer -> [size, ...] geometric mean over seeds (axis 0 of each size's arrays)."""
    with np.errstate(divide="ignore"):  # a layer that did not move (zero readout, t = 1) has log RMS = -inf
        return {k: np.exp(np.stack([np.log(r[k]).mean(0) for r in per_size])) for k in per_size[0]}


def coord_data(model_name: str, plugin: Parametrization, widths: Sequence[int], seeds: int | Sequence[int],
               steps: int, optim_cfg: OptimConfig, batch: Batch, **model_overrides: Any) -> Layers:
    """Layer -> [width, step] geometric mean over seeds of RMS(h_t - h_0), t = 1..steps."""
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    return geometric_mean([CoordRun(model_name, plugin, steps, optim_cfg, batch, width=w, **model_overrides)(seeds)
                           .total for w in widths])


def check_steps(plugin: Parametrization, steps: int) -> None:
    """Refuse one step under zero_init: the readout starts at 0, so the gradient of every layer before it is 0 at the
    first step and only the logits move; with no later step those layers have no slope, and each would FAIL."""
    if steps < 2 and plugin.zero_init:
        raise ValueError("with zero_init the readout starts at 0, so no layer before it moves in the first step: a "
                         "coordinate check under it needs at least 2 steps")


def slopes(widths: Sequence[int], data: Layers) -> dict[str, np.ndarray]:
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
