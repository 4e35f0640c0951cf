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
back to its init after each step: the part of the update that scales like L^(1 - alpha - gamma), TP VI section 7),
the change caused by each part's parameters alone (`parts`: each kind, the readout's bias apart; the same
reset), and each layer's RMS at init, for the relative change RMS(h_t - h_0) / RMS(h_0).

Why parts: a layer's total change sums one term per part, each ~ n^-r of its own rule (zoo.param.predict), and the
total's slope is only the slowest. On the MLP-ResNet with 3072 inputs the input layer's change swamps every hidden
and stream layer at the LR the check chooses, so a hidden rule off by 1/m (a Muon LR 16x too small at width 1536)
left the totals at muP's n^0. A part's change at its own layers is exactly (W_t - W_0) x of the layer's input to
first order (TP IVb's Delta W^l x^(l-1)), plus what the part's layers below send, which scales alike; the layers a
part cannot reach (below all its parameters; the logits while a zero readout is kept at V0 = 0) are found by a JVP
at init along a direction of the part's parameters and left out, and so are the logits of the parts before the
readout (their V0 . Delta h is the total's to judge: `reached_layers`).
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
from zoo.models.transformer import jvp
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.param.predict import READOUT_BIAS
from zoo.param.tags import KINDS, Tag
from zoo.train.step import Batch, Program, build_program, jit_run_once, prepare_inputs

Layers = dict[str, np.ndarray]


def rms(h: jax.Array, stacked: bool) -> jax.Array:
    """RMS over batch and coordinates; one per block for a stacked (L, B, ...) entry."""
    return jnp.sqrt(jnp.mean(jnp.square(h.astype(jnp.float32)), axis=tuple(range(int(stacked), h.ndim))))


@dataclasses.dataclass
class Changes:
    """Layer -> [seed, step] RMS of h_t - h_0 (t = 1..steps): with every parameter trained (`total`), with only
    the residual-branch parameters moved (`branch`, when asked) and, per part, with only that part's parameters
    moved (`parts`: part -> layer -> [seed, step], when asked; `CoordRun.reach` says which layers each part moves);
    layer -> [seed] RMS of h_0 (`init`)."""

    total: Layers
    branch: Layers
    init: Layers
    parts: dict[str, Layers] = dataclasses.field(default_factory=dict)


PART_ORDER = (*KINDS, READOUT_BIAS)


def part_of(tag: Tag) -> str:
    """The part a parameter's change is measured in: its kind, the readout's bias apart (a scalar after every hidden
    activation: zoo.param.predict.part_slopes)."""
    return READOUT_BIAS if tag.role.startswith("readout") and tag.kind != "output" else tag.kind


def trained_parts(plugin: Parametrization, tags: Sequence[Tag]) -> tuple[str, ...]:
    """The parts of `tags` with a parameter the plugin trains (a frozen kind is no part), in PART_ORDER."""
    present = {part_of(t) for t in tags if not plugin.frozen(t)}
    return tuple(p for p in PART_ORDER if p in present)


def part_masks(params: Any, tags: Sequence[Tag | None], parts: Sequence[str]) -> Any:
    """A tree shaped like `params` whose leaves are [len(parts)] booleans: whether the leaf is in each part; `tags`
    are the leaves' tags in flattening order (None: not a parameter, in no part)."""
    return jax.tree.structure(params).unflatten(
        [np.array([t is not None and part_of(t) == p for p in parts]) for t in tags])


def moved_only(params: Any, params0: Any, mask: Any) -> Any:
    """The leaves of `params` where `mask` (a tree like it, of booleans) is true, every other leaf of `params0`."""
    return jax.tree.map(lambda m, a, a0: jnp.where(m, a, a0), mask, params, params0)


def each_part(fn: Any, masks: Any) -> Any:
    """fn(mask of part i) for every part, stacked on a leading part axis: one vmapped program whatever the number of
    parts (a forward pass per part would grow the compile with each)."""
    return jax.vmap(fn)(masks)


def reach(features: Any, params: Any, masks: Any, stacked: Any) -> Any:
    """Entry -> [part(, L)] whether each part's parameters move it (per block for a stacked entry): the JVP of
    features(params) along a pseudo-random direction of the part's leaves is nonzero there. Exact zeros where an
    entry does not depend on them, whatever the LR (a rule that moves nothing still fails). The direction is
    sin(k * 12.9898 + i) over each leaf's entries k (leaf i): no RNG, whose per-shape kernels tripled the compile."""
    flat, treedef = jax.tree.flatten(params)

    def direction(i: int, a: jax.Array) -> jax.Array:
        return jnp.sin(jnp.arange(a.size, dtype=jnp.float32) * 12.9898 + i).reshape(a.shape).astype(a.dtype)

    def along(mask):
        tangent = treedef.unflatten([jnp.where(m, direction(i, a), jnp.zeros_like(a))
                                     for i, (m, a) in enumerate(zip(jax.tree.leaves(mask), flat, strict=True))])
        moved = jvp(features, (params,), (tangent,))[1]
        return jax.tree.map(lambda v, s: jnp.any(v != 0, axis=tuple(range(int(s), v.ndim))), moved, stacked)

    return each_part(along, masks)


READOUT_PARTS = ("output", READOUT_BIAS)


def reached_layers(parts: Sequence[str], reach_of: Any) -> dict[str, set[str]]:
    """Part -> the layers it reaches (from `reach`, nested [part(, L)]) and is judged at: the logits only in the
    readout's own parts. What a part before the readout does to the logits is V0 . Delta h, the readout's init
    against the features' change (the total's output row judges that law), and a random V0 gives it a central-limit
    term that shrinks like n^-1/2 (muP's hidden part: -0.15 to -0.2 at widths 32 to 128), which the readout's own
    update hides in the total."""
    return {p: {k for k, v in per_layer(jax.tree.map(lambda a, i=i: np.asarray(a)[i][None], reach_of),
                                        steps=False).items() if v.any() and (k != "output" or p in READOUT_PARTS)}
            for i, p in enumerate(parts)}


def split_parts(parts: Sequence[str], changes: Any) -> dict[str, Layers]:
    """Part -> layer -> [seed, step] from nested [seed, step, part(, L)]."""
    return {p: per_layer(jax.tree.map(lambda a, i=i: a[:, :, i], changes)) for i, p in enumerate(parts)}


class CoordRun:
    """One model shape under one plugin and optimizer, trained `steps` steps on one batch. Init runs eagerly (its
    per-shape kernels are shared by every plugin of one shape); the steps are one jitted scan that takes the
    plugin's per-parameter rules, the learning rate and the batch as arguments, so one compiled program serves every
    plugin, seed and LR of a shape (a process-wide cache)."""

    def __init__(self, model_name: str, plugin: Parametrization, steps: int, optim_cfg: OptimConfig, batch: Batch,
                 branch: bool = False, parts: bool = False, **model_overrides: Any):
        cfg = models.config(model_name, **model_overrides)
        self.prog = build_program(lambda r: models.create(model_name, cfg, plugin, r), plugin, optim_cfg)
        self.lr, self.batch = optim_cfg.lr, {k: jnp.asarray(v) for k, v in batch.items()}
        abstract = jax.eval_shape(self.prog.init, jax.random.key(0))
        self.rules = optim.rules(plugin, abstract["params"], optim_cfg)
        self.parts = trained_parts(plugin, tags_of(abstract["params"])) if parts else ()
        key = (model_name, repr(cfg), jax.tree.structure(abstract), steps, branch, self.parts,
               repr({k: v for k, v in dataclasses.asdict(optim_cfg).items() if k != "lr"}),
               tuple((k, v.shape, v.dtype) for k, v in sorted(self.batch.items())))
        if key not in _PROGRAMS:
            _PROGRAMS[key] = _program(self.prog, optim_cfg, abstract, steps, branch, self.parts, self.batch)
        self._run, self._reach = _PROGRAMS[key]

    def __call__(self, seeds: Sequence[int], lr: float | None = None) -> Changes:
        """The changes of models initialised with each seed and trained at `lr` (default: the optimizer's); the parts'
        at every layer (`reach` says which they move)."""
        lr = jnp.asarray(self.lr if lr is None else lr, jnp.float32)
        runs = [self._run(self.prog.init(jax.random.key(s), lr), self.rules, self.batch) for s in seeds]
        init = jax.tree.map(lambda *r: np.stack(r).astype(np.float64), *[r[0] for r in runs])
        moved = jax.tree.map(lambda *r: np.stack(r).astype(np.float64), *[r[1] for r in runs])
        return Changes(per_layer(moved["total"]), per_layer(moved.get("branch", {})), per_layer(init, steps=False),
                       split_parts(self.parts, moved.get("parts", {})))

    def reach(self) -> dict[str, set[str]]:
        """Part -> the layers its parameters move (coord.reach at the seed-0 init); the same at every size of a
        model, so a sweep asks its first size only."""
        return reached_layers(self.parts, self._reach(self.prog.init(jax.random.key(0)), self.batch["x"]))


def tags_of(params: Any) -> list[Tag]:
    """The tags of a state of tagged nnx.Params, in flattening order."""
    return [v.get_metadata()["tag"] for v in jax.tree.leaves(params, is_leaf=lambda v: isinstance(v, nnx.Variable))]


_PROGRAMS: dict[tuple, Any] = {}


def _program(prog: Program, optim_cfg: OptimConfig, abstract: Any, steps: int, branch: bool,
             parts: tuple[str, ...], batch: Batch):
    """jit((state, rules, batch) -> (layer RMS at init, per-step RMS of the changes)) for one shape, and
    jit((state, x) -> each part's reach at that state) (`reach`; compiled once per shape, as the run)."""
    x_abstract = jax.ShapeDtypeStruct(batch["x"].shape, batch["x"].dtype)

    def features(state, x):
        logits, inter = prog.model(state)(prepare_inputs(x, prog.dtype))
        return {**inter, "output": logits}

    stacked = stacked_entries(features, abstract, x_abstract)
    tags = tags_of(abstract["params"])
    masks = part_masks(abstract["params"], tags, parts)
    in_branch = jax.tree.structure(abstract["params"]).unflatten([t.branch for t in tags])
    route = optim.routes(optim_cfg, abstract["params"])

    def change(h, h0, s):
        return rms(h - h0, s)

    @jit_run_once  # runs once per shape and plugin: compiled fast
    def run(state, rules, batch):
        stepper = dataclasses.replace(prog, tx=optim.chain(optim_cfg, *rules, route=route))
        h0 = features(state, batch["x"])

        def alone(st, mask):
            moved = {**st, "params": moved_only(st["params"], state["params"], mask)}
            return jax.tree.map(change, features(moved, batch["x"]), h0, stacked)

        def one(st, _):
            st, _ = stepper.train_step(st, batch)
            out = {"total": jax.tree.map(change, features(st, batch["x"]), h0, stacked)}
            if branch:
                out["branch"] = alone(st, in_branch)
            if parts:
                out["parts"] = each_part(lambda m: alone(st, m), masks)
            return st, out

        return jax.tree.map(rms, h0, stacked), jax.lax.scan(one, state, length=steps)[1]

    @jit_run_once  # runs once per shape and plugin: compiled fast
    def moves(state, x):
        return reach(lambda params: features({**state, "params": params}, x), state["params"], masks, stacked)

    return run, moves


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


def part_means(per_size: Sequence[Changes], reached: dict[str, set[str]]) -> dict[str, Layers]:
    """Part -> layer -> [size, step] geometric mean over seeds, over the layers the part reaches."""
    return {p: geometric_mean([{k: v for k, v in r.parts[p].items() if k in reached[p]} for r in per_size])
            for p in per_size[0].parts}


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
