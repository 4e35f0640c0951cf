"""Where a run's first state comes from: its own newest verified checkpoint (resume), another run's full state
(--fork-from, new settings), another run's parameters (--init-from, finetuning), or a fresh init."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoo.train.checkpoint import Checkpoints, load_params
from zoo.train.mesh import MeshPlan
from zoo.train.run import read_run_config
from zoo.train.setup import Setup
from zoo.train.step import RUN_ONCE
from zoo.tree import key_path

State = dict[str, Any]
Report = Callable[[str], None]


def abstract_state(s: Setup, plan: MeshPlan) -> tuple[Any, Any]:
    """(ShapeDtypeStructs placed as the mesh shards them, the shardings) of `s`'s train state."""
    abstract = jax.eval_shape(s.program.init, jax.random.PRNGKey(s.cfg.seed))
    shardings = plan.state_shardings(abstract)
    return _placed(abstract, shardings), shardings


def _placed(abstract: Any, shardings: Any) -> Any:
    return jax.tree.map(lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), abstract, shardings)


def restore_or_init(s: Setup, plan: MeshPlan, ckpts: Checkpoints, report: Report) -> tuple[State, int, dict]:
    """(state, step, checkpoint metadata): resumed from the newest good checkpoint, else forked, else fresh
    (with --init-from's parameters)."""
    target, shardings = abstract_state(s, plan)
    found = ckpts.restore_latest(target, report)
    if found is not None:
        state, meta, step = found
        report(f"resumed {ckpts.run_dir} from step {step}")
        return state, step, meta
    key = jax.random.PRNGKey(s.cfg.seed)
    state = jax.jit(s.program.init, out_shardings=shardings).lower(key).compile(compiler_options=RUN_ONCE)(key)
    if s.cfg.fork_from:
        return fork(state, s, plan, report)
    if s.cfg.init_from:
        state = init_from(state, s.cfg.init_from, report)
    return state, 0, {}


def parse_fork(spec: str) -> tuple[Path, int | None]:
    """RUN_DIR[:STEP] -> (run dir, step or None for its newest good checkpoint)."""
    head, sep, tail = spec.rpartition(":")
    if sep and tail.isdigit():
        return Path(head), int(tail)
    return Path(spec), None


def fork(fresh: State, s: Setup, plan: MeshPlan, report: Report) -> tuple[State, int, dict]:
    """The full state of another run (params, optimizer moments, step, RNG, data position), continued under this
    run's settings: its peak LR is this run's --lr, and optimizer state the new optimizer lacks starts fresh."""
    from zoo.train.setup import setup

    src_dir, step = parse_fork(s.cfg.fork_from)
    src_cfg = read_run_config(src_dir)
    src = setup(src_cfg, s.data if src_cfg.data == s.cfg.data and src_cfg.seq_len == s.cfg.seq_len else None)
    target, _ = abstract_state(src, plan)
    ckpts = Checkpoints(src_dir)
    try:
        if step is None:
            found = ckpts.restore_latest(target, report, move_bad=False)
            if found is None:
                raise FileNotFoundError(f"--fork-from {src_dir}: the run has no checkpoint yet")
            old, meta, step = found
        else:
            if step not in ckpts.steps():
                raise FileNotFoundError(f"--fork-from {src_dir}:{step}: no checkpoint at step {step} (it has "
                                        f"{', '.join(map(str, ckpts.steps())) or 'none'})")
            old, meta = ckpts.restore(step, target)
    finally:
        ckpts.close()
    _same_params(fresh["params"], old["params"], src_dir)
    opt, started_fresh = _transplant_opt(fresh["opt"], old["opt"])
    for name in started_fresh:
        report(f"fork: {name} started fresh (the new optimizer keeps state the old one did not)")
    state = {**fresh, "params": old["params"], "opt": opt, "step": old["step"], "key": old["key"]}
    report(f"forked {src_dir} at step {step} into {s.cfg.run_dir}")
    return state, int(step), {k: v for k, v in meta.items() if k == "first_loss"}


def _same_params(new: Any, old: Any, src: Path) -> None:
    shapes = {key_path(p): v.shape for p, v in jax.tree_util.tree_flatten_with_path(new)[0]}
    before = {key_path(p): v.shape for p, v in jax.tree_util.tree_flatten_with_path(old)[0]}
    if shapes != before:
        diff = sorted(k for k in shapes.keys() | before.keys() if shapes.get(k) != before.get(k))
        raise ValueError(f"--fork-from {src}: the model differs ({', '.join(diff[:4])}"
                         f"{' ...' if len(diff) > 4 else ''}); a fork keeps the architecture, use --init-from to "
                         "start another model from its parameters")


def _named(tree: Any, owner: str = "") -> Iterator[tuple[tuple[str, str], Any]]:
    """The leaves of an optimizer state in flatten order, named by (owning state type.field, parameter path), so
    states of two optimizer chains can be matched although their positions in the chain differ."""
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        for f in tree._fields:
            yield from _named(getattr(tree, f), f"{type(tree).__name__}.{f}")
    elif isinstance(tree, (tuple, list)):
        for t in tree:
            yield from _named(t, owner)
    else:
        for p, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            yield (owner, key_path(p)), leaf


def _transplant_opt(fresh: Any, old: Any) -> tuple[Any, list[str]]:
    """`fresh` with each leaf replaced by `old`'s of the same name and shape, except the peak LR (LRState.lr),
    which is the new run's. Returns the state and the names of the states that started fresh."""
    olds = dict(_named(old))
    leaves, fresh_names = [], set()
    for name, leaf in _named(fresh):
        prev = olds.get(name)
        if name[0] == "LRState.lr" or prev is None or np.shape(prev) != np.shape(leaf):
            if name[0] != "LRState.lr":
                fresh_names.add(name[0])
            leaves.append(leaf)
        else:
            leaves.append(jax.device_put(jnp.asarray(prev, leaf.dtype), leaf.sharding))
    return jax.tree.unflatten(jax.tree.structure(fresh), leaves), sorted(fresh_names)


def init_from(state: State, run_dir: str, report: Report) -> State:
    """Params from another run's newest good checkpoint, matched by name and shape; refused unless most of this
    model's parameter arrays match (a run of another model), and a line says how many were loaded."""
    loaded, meta = load_params(run_dir)
    flat, treedef = jax.tree_util.tree_flatten_with_path(state["params"])
    leaves, fresh = [], []
    for path, new in flat:
        name = key_path(path)
        old = loaded.get(name)
        if old is not None and old.shape == new.shape:
            leaves.append(jax.device_put(jnp.asarray(old, new.dtype), new.sharding))
        else:
            fresh.append(f"{name} ({'new' if old is None else f'shape {old.shape} -> {new.shape}'})")
            leaves.append(new)
    matched = len(flat) - len(fresh)
    if 2 * matched <= len(flat):
        raise ValueError(f"--init-from {run_dir}: only {matched} of this model's {len(flat)} parameter arrays match "
                         "it by name and shape (is it a run of another model?)")
    values = sum(int(np.prod(v.shape)) for (p, v), leaf in zip(flat, leaves, strict=True) if leaf is not v)
    total = sum(int(np.prod(v.shape)) for _, v in flat)
    report(f"init-from: loaded {matched} of {len(flat)} parameter arrays ({values:,} of {total:,} values) from "
           f"{run_dir} step {meta.get('step')}" + (f"; re-initialised by the plugin: {', '.join(fresh)}" if fresh
                                                   else ""))
    return {**state, "params": jax.tree_util.tree_unflatten(treedef, leaves)}
