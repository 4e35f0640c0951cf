"""The coordinate check of any JAX model (Haiku, Flax Linen, Equinox, plain functions), with the CLI's verdict.

    result = coord_check(init, apply, zoo.param.get("mup"), batch, widths=[128, 256, 512, 1024])
    result["passed"], result["verdicts"]          # one verdict per layer, as `python -m zoo.coord_check` gives

`init(key, width, depth)` is the model's own SP init at that size and `apply(params, x, width, depth)` returns
(output, intermediates): a dict (nested dicts allowed) of arrays, each (B, ...) or stacked per block (L, B, ...);
"embed" is judged as the input layer, "attn_logits..." as attention, the rest as hidden. The plugin reaches the
model through its multiplier-free form (zoo.param.multiplier_free: tags from two widths, rescale_init, the zoo's
optax chain). Each size trains `steps` steps on `batch` from `seeds` inits (keys seed, seed + 1, ...); the RMS change
of every intermediate and of the output is fitted against log size (zoo.diagnostics.coord) and judged against the
plugin's predicted slope (zoo.diagnostics.verdict); in width, so is the change each part's parameters (each kind,
the readout's bias apart) cause alone, against that part's own rule. Depth sweeps run at the base width, with base
depth 1 like the CLI's. Unless `lr` is given, the learning rate is the CLI's choice (zoo.diagnostics.coord_lr): the
largest of 1e-3, 1e-3 / sqrt(10), ... that keeps every activation's change at the smallest size within
`linear_limit` of its RMS.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from zoo import optim
from zoo.diagnostics import coord, coord_lr, verdict
from zoo.param.base import Parametrization
from zoo.param.gauge import multiplier_free, scale_leaves, tag_leaves
from zoo.param.infer import infer_tags_from, is_array
from zoo.param.tags import Tag
from zoo.train.step import jit_run_once
from zoo.tree import key_path

Init = Callable[[jax.Array, int, int], Any]
Apply = Callable[[Any, jax.Array, int, int], tuple[jax.Array, dict]]


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy with integer labels (one per example, or per token)."""
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels).mean()


def coord_check(init: Init, apply: Apply, plugin: Parametrization, batch: Mapping[str, jax.Array], *,
                widths: Sequence[int] | None = None, depths: Sequence[int] | None = None, width: int | None = None,
                depth: int = 1, base_depth: int | None = None, rules: Mapping[str, Any] | None = None,
                layout: str = "in_out", head_dim: int | Callable[[int], int] | None = None, optimizer: str = "adam",
                lr: float | None = None, linear_limit: float = coord_lr.LINEAR_LIMIT, steps: int = 3,
                seeds: int = 3, seed: int = 0, tol: float = 0.15,
                loss: Callable[[jax.Array, jax.Array], jax.Array] = cross_entropy) -> dict[str, Any]:
    """A width sweep (`widths`, at `depth`; base width min(widths), base depth `depth` unless given) or a depth sweep
    (`depths`, at `width`, then the base width; base depth 1 unless given). `head_dim` (a number, or a function of
    width) is needed when a rule marks a query. `lr` None: chosen at the smallest size (see the module docstring).
    Returns {"axis", "sizes", "data", "slopes", "expected", "verdicts", "parts" and "part_verdicts" (width: the
    change each part's parameters cause alone, judged against that part's own rule: zoo.diagnostics.coord),
    "passed", "growth" (verdict.measured_growth: whether the growth theory predicts shows in the data), "lr",
    "lr_chosen", "linear_change"}."""
    if (widths is None) == (depths is None):
        raise ValueError("give widths (a width sweep) or depths (a depth sweep), not both")
    axis, sizes = ("width", list(widths)) if widths is not None else ("depth", list(depths))
    check_sweep(axis, sizes, steps=steps, seeds=seeds, tol=tol)
    coord.check_steps(plugin, steps)
    if axis == "depth" and width is None:
        raise ValueError("a depth sweep needs the width it runs at")
    for key, v in (("depth", depth), ("width", width), ("base_depth", base_depth)):
        if v is not None and not _positive_int(v):  # before the model's init is called with it
            raise ValueError(f"{key} must be a positive integer, got {v!r}")
    check_batch(batch)
    if axis == "depth":
        verdict.check_depths(sizes, plugin)
    if lr is not None and not _positive_number(lr):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    optim.OptimConfig(name=optimizer)  # an unknown optimizer is refused before anything runs
    base_width = min(sizes) if axis == "width" else width
    base_depth = base_depth or (depth if axis == "width" else 1)
    heads = head_dims(head_dim, sizes if axis == "width" else [width])
    out = check_apply(init, apply, batch, *((sizes[0], depth) if axis == "width" else (width, sizes[0])))
    if loss is cross_entropy:
        check_labels(batch["y"], out.shape)
    infer = dict(rules=rules, layout=layout)
    keys = [seed + i for i in range(seeds)]
    measures, kinds, first_tags = {}, set(), None
    for size in sizes:
        w, d = (size, depth) if axis == "width" else (width, size)
        tags = tags_at(init, w, d, base_width, base_depth, **infer)
        first_tags = first_tags or tags
        if head_dim is None and any(t.role == "query" for t in tag_leaves(tags)):
            raise ValueError("a 'query' rule needs the attention head dim: coord_check(..., head_dim=d), a number or "
                             "a function of the width")
        kinds |= inner_kinds(tags)
        free = multiplier_free(plugin, tags, head_dim=heads(w), base_head_dim=heads(base_width))
        measures[size] = functools.partial(changes, init, apply, free, tags, batch, w, d, keys, steps, optimizer,
                                           loss=loss)
        if size == min(sizes):
            reached = functools.partial(reached_at, init, apply, free, tags, batch["x"], w, d, seed)
    if axis == "width":
        check_sp_init(init, first_tags, (sizes[0], sizes[-1]), depth, seed)
    smallest = min(sizes)
    if lr is None:
        chosen, first, change = coord_lr.choose_lr(measures[smallest], linear_limit)
    else:
        chosen, first = lr, measures[smallest](lr)
        change = coord_lr.linear_change(first)
    runs = [first if size == smallest else measures[size](chosen) for size in sizes]
    rows = [r.total for r in runs]
    if axis == "depth":
        rows = [verdict.at_depth_fractions(r, d) for r, d in zip(rows, sizes, strict=True)]
    data = coord.geometric_mean(rows)
    slopes = coord.slopes(sizes, data)
    head_dim_slope = 0.0 if head_dim is None or axis == "depth" else float(
        np.log(heads(sizes[-1]) / heads(sizes[0])) / np.log(sizes[-1] / sizes[0]))
    exp = verdict.expectation(plugin, optimizer, axis, tuple(sorted(kinds)), head_dim_slope,
                              sorted({verdict.group_of(k) for k in data}))
    init = coord.geometric_mean([r.init for r in runs]) if axis == "width" else None  # layer -> [size] RMS(h_0)
    verdicts = verdict.judge(slopes, data, exp.total, tol, not exp.unstable, init=init)
    parts = coord.part_means(runs, reached()) if axis == "width" else {}
    part_verdicts = verdict.judge_parts(sizes, parts, exp.parts, tol, not exp.unstable, exp.first_parts, init)
    return {"axis": axis, "sizes": sizes, "data": data, "slopes": slopes, "expected": exp,
            "verdicts": verdicts, "parts": parts, "part_verdicts": part_verdicts,
            "passed": all(v.passed for v in verdicts + [v for vs in part_verdicts.values() for v in vs]),
            "growth": verdict.measured_growth(sizes, rows, exp.total), "lr": chosen, "lr_chosen": lr is None,
            "linear_change": change}


def check_sweep(axis: str, sizes: Sequence[Any], *, steps: Any, seeds: Any, tol: Any) -> None:
    """Sizes: at least two positive integers, increasing (a repeated size fits a slope to one point, log 1 = 0);
    steps and seeds positive integers, tol a positive number."""
    if len(sizes) < 2 or not all(_positive_int(s) for s in sizes):
        raise ValueError(f"a {axis} sweep needs at least two positive integer {axis}s, got {sizes}")
    if any(b <= a for a, b in zip(sizes[:-1], sizes[1:], strict=True)):
        raise ValueError(f"the {axis}s of a sweep must increase, got {sizes}")
    for key, v in (("steps", steps), ("seeds", seeds)):
        if not _positive_int(v):
            raise ValueError(f"{key} must be a positive integer, got {v!r}")
    if not _positive_number(tol):
        raise ValueError(f"tol must be a positive number, got {tol!r}")


def _positive_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1


def _positive_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and 0 < v < math.inf


def head_dims(head_dim: int | Callable[[int], int] | None, widths: Sequence[int]) -> Callable[[int], int | None]:
    """width -> the attention head dim (`head_dim` a number, or a function of the width), checked a positive integer
    at each of `widths`: a head dim of 0 divided by zero in the head-dim slope log(d(n1) / d(n0)) / log(n1 / n0)."""
    heads = head_dim if callable(head_dim) else (lambda _: head_dim)
    for w in widths if head_dim is not None else ():
        if not _positive_int(heads(w)):
            raise ValueError(f"head_dim must be a positive integer (or a function of the width giving one), got "
                             f"{heads(w)!r} at width {w}")
    return heads


def check_batch(batch: Mapping[str, Any]) -> None:
    """The batch: a mapping with arrays "x" (inputs) and "y" (labels) of the same leading (batch) size."""
    if not isinstance(batch, Mapping) or not {"x", "y"} <= set(batch):
        raise ValueError("batch must be a dict with 'x' (inputs) and 'y' (integer labels), got "
                         + (f"keys {sorted(batch)}" if isinstance(batch, Mapping) else type(batch).__name__))
    x, y = (np.shape(batch[k]) for k in ("x", "y"))
    if not x or not y or x[0] != y[0]:
        raise ValueError(f"batch 'x' {x} and 'y' {y} must have the same leading (batch) size")


def check_apply(init: Init, apply: Apply, batch: Mapping[str, Any], width: int, depth: int) -> jax.ShapeDtypeStruct:
    """apply(params, x, width, depth) must return (output, intermediates): intermediates a dict of arrays (nested
    dicts allowed). Traced abstractly at one size: nothing is computed. Returns the output's shape and dtype."""
    params = jax.eval_shape(lambda k: init(k, width, depth), jax.random.key(0))
    out = jax.eval_shape(lambda p, x: apply(p, x, width, depth), params, jnp.asarray(batch["x"]))
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Mapping)):
        got = (f"a {type(out).__name__} of {len(out)}" if isinstance(out, (tuple, list)) else
               "one array" if hasattr(out, "shape") else type(out).__name__)
        raise TypeError(f"apply must return (output, intermediates), intermediates a dict of arrays; got {got}"
                        + (f" with {type(out[1]).__name__} intermediates" if isinstance(out, tuple) and
                           len(out) == 2 else ""))
    return out[0]


def check_labels(y: Any, out_shape: tuple[int, ...]) -> None:
    """The default loss (softmax cross-entropy) takes the logits (B, ..., classes) and integer labels (B, ...) in
    [0, classes): a label out of range gave a loss with no word (optax reads no logit for it), float labels or
    labels of another shape an error deep in optax."""
    y = np.asarray(y)
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"batch 'y' must hold integer labels for the cross-entropy loss, got {y.dtype} (give "
                         "coord_check a loss= for other targets)")
    if len(out_shape) < 1 or y.shape != tuple(out_shape[:-1]):
        raise ValueError(f"batch 'y' {y.shape} must have the output's shape {tuple(out_shape)} less its last (class) "
                         "axis for the cross-entropy loss (give coord_check a loss= for other targets)")
    classes = out_shape[-1]
    if y.size and (y.min() < 0 or y.max() >= classes):
        raise ValueError(f"batch 'y' holds labels from {y.min()} to {y.max()}, but the output has {classes} classes "
                         f"(its last axis): labels must lie in [0, {classes})")


def inner_kinds(tags: Any) -> set[str]:
    """The kinds of the parameters before the readout, whose exponents set the predicted slopes (zoo.param.predict):
    all but the readout layer's, its weight (output kind) and its bias (role readout_bias: infer_tags marks a scalar
    beside an output weight), which acts after every hidden activation. Counted as a scalar before the readout, such a
    bias made the predicted hidden slope of NTK 0 instead of -1/2."""
    return {t.kind for t in tag_leaves(tags) if t.kind != "output" and not t.role.startswith("readout")}


SP_INIT_SLOPE = {"hidden": -0.5, "output": -0.5, "input": 0.0, "vector": 0.0, "scalar": 0.0}
INIT_TOL, INIT_MIN_ENTRIES = 0.2, 64


def check_sp_init(init: Init, tags: Any, widths: tuple[int, int], depth: int, seed: int) -> None:
    """The multiplier-free form rescales the model's own init, which must be SP's: each leaf's RMS scales like
    n^-1/2 for hidden and output kinds (fan-in std) and n^0 for the rest (an embedding's std does not depend on the
    width it writes). Measured from the init at the two widths (key `seed`), on leaves of at least INIT_MIN_ENTRIES
    entries not all zero at both; a slope off by more than INIT_TOL is a ValueError naming the leaf (Flax Linen's
    nn.Embed draws std 1/sqrt(features), slope -1/2; a GPT-2 style constant std 0.02 on hidden matrices, slope 0)."""
    def rms(w):
        params = init(jax.random.key(seed), w, depth)
        return jax.tree.map(lambda x: jnp.sqrt(jnp.mean(jnp.square(jnp.asarray(x, jnp.float32))))
                            if is_array(x) else None, params)

    def by_path(tree, leaf=None):
        flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=leaf)[0]
        return {key_path(p): x for p, x in flat}

    small, large = (by_path(jax.jit(functools.partial(rms, w))()) for w in widths)
    shapes = by_path(jax.eval_shape(lambda k: init(k, widths[0], depth), jax.random.key(seed)))
    for path, tag in by_path(tags, lambda x: isinstance(x, Tag)).items():
        a, b = float(small[path]), float(large[path])
        if math.prod(shapes[path].shape) < INIT_MIN_ENTRIES or min(a, b) <= 0:
            continue
        slope, want = math.log(b / a) / math.log(widths[1] / widths[0]), SP_INIT_SLOPE[tag.kind]
        if abs(slope - want) > INIT_TOL:
            raise ValueError(f"the model's own init of {path!r} ({tag.kind}) has RMS {a:.3g} at width {widths[0]} "
                             f"and {b:.3g} at {widths[1]}, like n^{slope:+.2f}; the multiplier-free form rescales an "
                             f"SP init, n^{want:+.1f} for this kind: give it SP's init (hidden and output matrices "
                             "std 1/sqrt(fan_in), the rest a std independent of width), or if the kind is wrong a "
                             "layout or kind rule (an Equinox embedding [vocab, width] under out_in: 'in_out')")


def tags_at(init: Init, width: int, depth: int, base_width: int, base_depth: int, **infer: Any) -> Any:
    """Tags of the model at (width, depth) against base_width (zoo.param.infer_tags_from: at the base width itself
    the kinds come from a model twice as wide, with multiplier 1)."""
    def shapes(w):
        return jax.eval_shape(lambda k: init(k, w, depth), jax.random.key(0))

    return infer_tags_from(shapes, base_width=base_width, width=width, depth=depth, base_depth=base_depth, **infer)


def changes(init: Init, apply: Apply, free: Parametrization, tags: Any, batch: Mapping[str, jax.Array], width: int,
            depth: int, seeds: Sequence[int], steps: int, optimizer: str, lr: float, *,
            loss: Callable[[jax.Array, jax.Array], jax.Array]) -> coord.Changes:
    """Layer -> [seed, step] RMS of the change h_t - h_0 of each intermediate and of the output ("output") from inits
    with the keys `seeds`, trained at `lr` (and with each part's parameters alone moved), and layer -> [seed] RMS of
    h_0."""
    optim_cfg = optim.OptimConfig(name=optimizer)
    rules = [f32(r) for r in optim.rules(free, tags, optim_cfg)]
    route = optim.routes(optim_cfg, tags)  # static structure: it passes through jit as the tree's shape
    parts, masks = part_plan(free, tags)
    run = _program(init, apply, width, depth, steps, optimizer, loss)
    runs = [run(jax.random.key(s), init_factors(free, tags), rules, route, jnp.float32(lr), jnp.asarray(batch["x"]),
                jnp.asarray(batch["y"]), masks) for s in seeds]

    def stacked(part):
        return jax.tree.map(lambda *r: np.stack(r).astype(np.float64), *part)

    at_init, moved, alone = (stacked(part) for part in zip(*runs, strict=True))
    return coord.Changes(coord.per_layer(moved), {}, coord.per_layer(at_init, steps=False),
                         coord.split_parts(parts, alone))


def f32(tree: Any) -> Any:
    return jax.tree.map(lambda v: jnp.asarray(v, jnp.float32), tree)


def init_factors(free: Parametrization, tags: Any) -> Any:
    """What rescale_init multiplies each leaf of the model's own init by (float32; None where no tag)."""
    return f32(jax.tree.map(free.init_factor, tags, is_leaf=lambda t: isinstance(t, Tag)))


def part_plan(free: Parametrization, tags: Any) -> tuple[tuple[str, ...], Any]:
    """The parts that train and their masks, a tree like the model's params (coord.part_masks)."""
    def is_tag(t):
        return t is None or isinstance(t, Tag)

    leaves = jax.tree.leaves(tags, is_leaf=is_tag)
    parts = coord.trained_parts(free, [t for t in leaves if t is not None])
    return parts, coord.part_masks(jax.tree.map(lambda t: 0, tags, is_leaf=is_tag), leaves, parts)


def reached_at(init: Init, apply: Apply, free: Parametrization, tags: Any, x: jax.Array, width: int, depth: int,
               seed: int) -> dict[str, set[str]]:
    """Part -> the layers its parameters move (coord.reach at the init of key `seed`, rescaled)."""
    parts, masks = part_plan(free, tags)
    moves = _reach_program(init, apply, width, depth)(jax.random.key(seed), init_factors(free, tags), jnp.asarray(x),
                                                      masks)
    return coord.reached_layers(parts, moves)


def features_of(apply: Apply, width: int, depth: int) -> Callable[[Any, jax.Array], dict[str, jax.Array]]:
    """(params, x) -> every intermediate and the output ("output")."""
    def features(params, x):
        out, inter = apply(params, x, width, depth)
        return {**inter, "output": out}

    return features


@functools.lru_cache(maxsize=16)
def _reach_program(init: Init, apply: Apply, width: int, depth: int):
    """jit((key, init factors, x, part masks) -> coord.reach at that init) for one size."""
    features = features_of(apply, width, depth)

    @jit_run_once  # runs once per size and plugin: compiled fast
    def run(key, factors, x, masks):
        params0 = scale_leaves(init(key, width, depth), factors)
        stacked = coord.stacked_entries(features, params0, x)
        return coord.reach(lambda params: features(params, x), params0, masks, stacked)

    return run


@functools.lru_cache(maxsize=16)
def _program(init: Init, apply: Apply, width: int, depth: int, steps: int, optimizer: str,
             loss: Callable) -> Callable:
    """The jitted run of one size: init, rescale, `steps` steps, RMS of h_0 and of the changes. The plugin enters only
    through the init factors and the optimizer's per-parameter trees, and the LR through the optimizer state: all
    arguments, so every plugin and LR shares one compile."""
    optim_cfg = optim.OptimConfig(name=optimizer)
    features = features_of(apply, width, depth)

    @jit_run_once  # runs once per size and plugin: compiled fast
    def run(key, factors, rules, route, lr, x, y, masks):
        params0 = scale_leaves(init(key, width, depth), factors)
        tx = optim.chain(optim_cfg, *rules, route=route)
        stacked = coord.stacked_entries(features, params0, x)

        def step(carry, _):  # h_t is read before update t + 1: h_0 and h_t come from the same code, bit for bit
            params, opt = carry
            h = features(params, x)
            alone = coord.each_part(lambda m: features(coord.moved_only(params, params0, m), x), masks)
            grads = jax.grad(lambda p: loss(apply(p, x, width, depth)[0], y))(params)
            updates, opt = tx.update(grads, opt, params)
            return (optax.apply_updates(params, updates), opt), (h, alone)

        hs, alone = jax.lax.scan(step, (params0, optim.set_lr(tx.init(params0), lr)), length=steps + 1)[1]

        def changes(h, s):  # [step, ...] -> [step(, L)]: RMS of h_t - h_0
            return jax.vmap(lambda ht: coord.rms(ht - h[0], s))(h[1:])

        def part_changes(h, s):  # [step, part, ...] -> [step, part(, L)]
            return jax.vmap(functools.partial(changes, s=s), in_axes=1, out_axes=1)(h)

        return (jax.tree.map(lambda h, s: coord.rms(h[0], s), hs, stacked), jax.tree.map(changes, hs, stacked),
                jax.tree.map(part_changes, alone, stacked))

    return run
