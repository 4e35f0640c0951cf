"""Where a run's first state comes from: its own newest verified checkpoint (resume), another run's full state
(--fork-from, new settings), another run's parameters (--init-from, finetuning), or a fresh init. Other runs are
only read (zoo.train.load), so they may still be training."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from shlex import quote
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import zoo.models
import zoo.param
from zoo.outputs import check_outside
from zoo.train.checkpoint import Checkpoints
from zoo.train.load import (
    by_name,
    changed_data_note,
    load_run,
    other_tokens_note,
    parse_run_spec,
    read_config,
    read_state,
    same_data,
)
from zoo.train.mesh import MeshPlan
from zoo.train.setup import Setup, model_config
from zoo.train.step import Program, run_once_options
from zoo.tree import fill_by_name, key_path

State = dict[str, Any]
Report = Callable[[str], None]


def abstract_state(s: Setup, plan: MeshPlan) -> tuple[Any, Any]:
    """(ShapeDtypeStructs placed as the mesh shards them, the shardings) of `s`'s train state."""
    abstract = jax.eval_shape(s.program.init, jax.random.PRNGKey(s.cfg.loop.seed))
    shardings = plan.state_shardings(abstract)
    return _placed(abstract, shardings), shardings


def _placed(abstract: Any, shardings: Any) -> Any:
    return jax.tree.map(lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), abstract, shardings)


def check_sources(s: Setup) -> None:
    """--fork-from and --init-from name runs that can be read, before anything is written: a fork's step exists
    and lies before this run's last step."""
    loop = s.cfg.loop
    src, step = parse_run_spec(loop.fork_from) if loop.fork_from else (None, None)
    for flag, source in (("--fork-from", src), ("--init-from", loop.init_from)):
        if source:
            check_outside(source, s.cfg.run_dir(), "--run-dir", flag)  # zoo.train.run's
    if loop.init_from and not Path(loop.init_from).is_dir():
        head, step = parse_run_spec(loop.init_from, "--init-from")
        if step is not None and head.is_dir():
            raise ValueError(f"--init-from {loop.init_from}: --init-from takes a run dir and reads its newest good "
                             f"checkpoint, not RUN:STEP; to start from step {step}, export it (python -m zoo.export "
                             f"{quote(str(head))} --step {step} --out DIR) and give --init-from DIR under sp")
        if not Path(loop.init_from).exists():
            raise FileNotFoundError(f"--init-from {loop.init_from}: no run dir there (it does not exist)")
    if src is not None:
        check_same_architecture(src, read_config(src).model, s.cfg.model)  # before its steps: the first thing wrong
        with Checkpoints(src, read_only=True) as ckpts:
            steps = ckpts.steps()
        if not steps:
            raise FileNotFoundError(f"--fork-from {src}: the run has no checkpoint yet")
        if step is not None and step not in steps:
            raise FileNotFoundError(f"--fork-from {loop.fork_from}: no checkpoint at step {step} (it has "
                                    f"{', '.join(map(str, steps))})")
        start = step if step is not None else steps[0]
        if start >= s.steps:
            raise ValueError(f"--fork-from {loop.fork_from} starts at step {start}, but --steps is {s.steps}: "
                             "nothing would train; give --steps beyond the fork's step")
    if loop.init_from and not (Path(loop.init_from) / "checkpoints").is_dir():
        raise FileNotFoundError(f"--init-from {loop.init_from}: no checkpoints/ folder there (is it a run dir?)")


def check_same_architecture(src: Path, was: Any, now: Any) -> None:
    """A fork's source is a run of this run's model at its width and depth (a fork takes this command's settings:
    --model and the sizes left out are the defaults, not the source's)."""
    def shown(m: Any) -> str:
        return f"{m.name} at width {m.width}, depth {m.depth}"

    if (was.name, was.width, was.depth) != (now.name, now.width, now.depth):
        raise ValueError(f"--fork-from {src} is a run of {shown(was)}, and this run's model is {shown(now)}; a fork "
                         f"keeps the architecture (give --model {was.name} --width {was.width} --depth {was.depth}), "
                         "or use --init-from to start another model from its parameters")


def restore_or_init(s: Setup, plan: MeshPlan, abstract: tuple[Any, Any], ckpts: Checkpoints,
                    report: Report) -> tuple[State, int, dict]:
    """(state, step, checkpoint metadata): resumed from the newest good checkpoint, else forked, else fresh
    (with --init-from's parameters). abstract: the state's `abstract_state`."""
    target, shardings = abstract
    found = ckpts.restore_latest(target, report, same_data(s.data, s.cfg.data.name, ckpts.run_dir, examples=True))
    if found is not None:
        state, meta, step = found
        report(f"resumed {ckpts.run_dir} from step {step}")
        if (note := changed_data_note(meta, s.data, ckpts.run_dir)) is not None:
            report(note)
        return state, step, meta
    state = fresh_state(s.program, jax.random.PRNGKey(s.cfg.loop.seed), s.cfg.optim.lr, shardings)
    if s.cfg.loop.fork_from:
        return fork(state, s, plan, report)
    if s.cfg.loop.init_from:
        state = init_from(state, s, report)
    return state, 0, {}


def fresh_state(prog: Program, key: jax.Array, lr: float, shardings: Any) -> State:
    """A fresh state (compiled without XLA's backend optimisation: it runs once); the plugin's numbers and the LR as
    arguments where the program has numbers (Program.with_numbers), so every plugin and LR of a shape shares one
    init program, as a sweep's members do (the same state, bit for bit)."""
    if prog.numbers is None:
        return jax.jit(prog.init, out_shardings=shardings).lower(key).compile(compiler_options=run_once_options())(key)
    init = jax.jit(lambda k, r, v: prog.with_numbers(v).init(k, r), out_shardings=shardings)
    args = (key, jnp.float32(lr), prog.numbers.values)
    return init.lower(*args).compile(compiler_options=run_once_options())(*args)


def fork(fresh: State, s: Setup, plan: MeshPlan, report: Report) -> tuple[State, int, dict]:
    """The full state of another run (params, optimizer moments, step, RNG, data position), continued under this
    run's settings: its peak LR is this run's --lr, and optimizer state the new optimizer lacks starts fresh. The
    metadata kept: the source's first loss (the divergence guard's reference) and its run-start report (a fork
    starts at the source's step, after the at-start hooks' step 0)."""
    src_dir, step = parse_run_spec(s.cfg.loop.fork_from)
    src_cfg = read_config(src_dir)
    if s.data.kind == "text" and src_cfg.data.seq_len != s.cfg.data.seq_len:  # the flag, not the data, changed
        raise ValueError(f"--fork-from {src_dir}: it trained at --seq-len {src_cfg.data.seq_len}, this run asks for "
                         f"{s.cfg.data.seq_len}; a fork keeps the model and its inputs' shape: give --seq-len "
                         f"{src_cfg.data.seq_len}")
    same_settings = src_cfg.data == s.cfg.data
    src = load_run(src_dir, step, data=s.data if same_settings else None,
                   place=lambda abstract: _placed(abstract, plan.state_shardings(abstract)), report=report)
    old = src.state
    # the source's own data was checked as it was read; this run's must fit its checkpoint, and where the fork goes
    # on with the source's data position, hold its examples
    same_data(s.data, s.cfg.data.name, src_dir, examples=same_settings)(src.meta)
    _same_params(fresh["params"], old["params"], src_dir)
    same_multipliers(fresh["rest"], old["rest"], _names(old["params"]), "--fork-from", src_dir, s.cfg.model.name)
    opt, started_fresh = _transplant_opt(fresh["opt"], old["opt"])
    for name in started_fresh:
        report(f"fork: {name} started fresh (the new optimizer keeps state the old one did not)")
    state = {**fresh, "params": old["params"], "opt": opt, "step": old["step"], "key": old["key"]}
    report(f"forked {src_dir} at step {src.step} into {s.cfg.run_dir()}")
    return state, int(src.step), {k: v for k, v in src.meta.items() if k in ("first_loss", "summary_extra")}


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
    states of two optimizer chains can be matched although their positions in the chain differ: Adam's moments of
    the embeddings under adamw and under muon, whose partition keeps them in a dict of states by label."""
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        for f in tree._fields:
            yield from _named(getattr(tree, f), f"{type(tree).__name__}.{f}")
    elif isinstance(tree, (tuple, list)):
        for t in tree:
            yield from _named(t, owner)
    elif isinstance(tree, dict) and tree and all(isinstance(v, tuple) for v in tree.values()):  # states by label
        for label in tree:  # (optax.partition's inner_states), not a parameter tree, whose values are no tuples
            yield from _named(tree[label], owner)
    else:
        for p, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            yield (owner, key_path(p)), leaf


def _transplant_opt(fresh: Any, old: Any) -> tuple[Any, list[str]]:
    """`fresh` with each leaf replaced by `old`'s of the same name and shape, except the peak LR (LRState.lr),
    which is the new run's. Returns the state and the states that started fresh, each with how many of its leaves
    where some carried over (adamw's moments after muon, which kept Adam's for the embeddings and gains only)."""
    olds = dict(_named(old))
    leaves, started, total = [], collections.Counter(), collections.Counter()
    for name, leaf in _named(fresh):
        prev = olds.get(name)
        total[name[0]] += 1
        if name[0] == "LRState.lr" or prev is None or np.shape(prev) != np.shape(leaf):
            if name[0] != "LRState.lr":
                started[name[0]] += 1
            leaves.append(leaf)
        else:
            leaves.append(jax.device_put(jnp.asarray(prev, leaf.dtype), leaf.sharding))
    said = [k if started[k] == total[k] else f"{k} ({started[k]} of its {total[k]} parameters' state)"
            for k in sorted(started)]
    return jax.tree.unflatten(jax.tree.structure(fresh), leaves), said


def same_multipliers(here: Any, there: Any, loaded: set[str], flag: str, src: str | Path, model: str,
                     export: bool = False) -> None:
    """Refuse weights whose multipliers differ here (another --param, --param-opt or base size): loaded under this
    run's multipliers they compute another network, silently (an sp run's weights under mup: eval loss 2.3 -> 7.2).
    `loaded`: the parameters taken from the source; a multiplier counts where it acts on one of them: its module's,
    or those the model names (`multiplier_acts_on`: the GPT's tied readout_mult, at its top level, acts on the token
    table, and was never compared); `export`: the source is zoo.export's SP form."""
    theirs, acts_on = by_name(there), getattr(zoo.models.MODELS.get(model), "multiplier_acts_on", {})
    for name, value in by_name(here).items():
        module = acts_on.get(name, name.rsplit("/", 1)[0] + "/")
        old = theirs.get(name)
        acts = any(p.startswith(module) for p in loaded)
        if acts and old is not None and old.shape == value.shape and not np.allclose(old, value, rtol=1e-6, atol=0):
            advice = ("finetune it under --param sp with --base-width and --base-depth equal to its sizes (the SP "
                      "form it was exported in)" if export else "keep its parametrization and base sizes, or export "
                      f"it to SP form (python -m zoo.export {quote(str(src))} --out DIR) and finetune DIR under sp")
            raise ValueError(f"{flag} {src}: its multiplier {name} is {_show(old)} there and {_show(value)} under this "
                             "run's settings (another --param, --param-opt, base size or --model-opt), so its weights "
                             f"would compute another network; {advice}")


def _which_model(run_dir: str | Path, s: Setup) -> str:
    """Why a source's arrays do not fit this model: its model, or the same model at another size."""
    try:
        there = read_config(run_dir).model
    except (OSError, ValueError):
        return "is it a run of another model?"
    here = s.cfg.model
    if there.name != here.name:
        return f"it is a run of {there.name}, this one of {here.name}"
    if (there.width, there.depth) == (here.width, here.depth):
        return f"it is a {there.name} of this size with other model options"
    return (f"it is a {there.name} of width {there.width}, depth {there.depth}, and this one of width {here.width}, "
            f"depth {here.depth}")


def sp_form_rest(s: Setup, export: str | Path) -> Any:
    """The multipliers (the non-parameter state) of the model `export` (zoo.export's SP form of a run) was exported
    from, as its config.json gives it (this run's model where that is another), on this run's data: under sp with
    base sizes equal to the sizes, where every plugin is SP (m = 1, r = 1). This run's own model there, as before, let
    another head split through (--model-opt head_dim: the attention scale followed it) and loaded the weights into
    other heads. Computed under jit, which drops the unused weights' init."""
    source = read_config(export)
    built = model_config(source, s.data) if source.model.name == s.cfg.model.name else s.model_cfg
    cfg = dataclasses.replace(built, base_width=built.width, base_depth=built.depth)
    return jax.jit(lambda: nnx.split(zoo.models.create(s.cfg.model.name, cfg, zoo.param.get("sp"), nnx.Rngs(0)),
                                     nnx.Param, ...)[2])()


def _names(tree: Any) -> set[str]:
    return {key_path(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _show(value: np.ndarray) -> str:
    return f"{float(value):.4g}" if value.size == 1 else f"[{', '.join(f'{float(v):.4g}' for v in value.ravel()[:4])}]"


def init_from(state: State, s: Setup, report: Report) -> State:
    """Params from another run's newest good checkpoint (or zoo.export's SP form of one), matched by name and shape;
    refused unless most of this model's parameter arrays match (a run of another model), or where they would meet
    other multipliers here; a line says how many were loaded, and one which of the source's were not."""
    run_dir = s.cfg.loop.init_from
    saved, meta = read_state(run_dir, report=report)
    source = by_name(saved["params"])
    params, fresh = fill_by_name(state["params"], source)
    total_arrays = len(jax.tree.leaves(params))
    matched = total_arrays - len(fresh)
    if 2 * matched <= total_arrays:
        raise ValueError(f"--init-from {run_dir}: only {matched} of this model's {total_arrays} parameter arrays "
                         f"match it by name and shape ({_which_model(run_dir, s)})")
    sizes = [int(np.prod(v.shape)) for v in jax.tree.leaves(params)]
    kept = {name.split(" (")[0] for name in fresh}
    export = "rest" not in saved  # an export's SP form saves no multipliers: they are sp's at base sizes = sizes
    if "head/kernel" in source and "head/kernel" not in _names(params):  # a readout of its own; here, a tied one
        how = ", as zoo.export writes a GPT" if export else ""
        raise ValueError(f"--init-from {run_dir}: its readout is a matrix of its own (head/kernel{how}), which this "
                         "tied model has no place for: dropped, the readout would be the token table, another "
                         "network; give --model-opt tie_embeddings=false")
    same_multipliers(state["rest"], sp_form_rest(s, run_dir) if export else saved["rest"], _names(params) - kept,
                     "--init-from", run_dir, s.cfg.model.name, export)
    values = sum(size for (p, _), size in zip(jax.tree_util.tree_flatten_with_path(params)[0], sizes, strict=True)
                 if key_path(p) not in kept)
    report(f"init-from: loaded {matched} of {total_arrays} parameter arrays ({values:,} of {sum(sizes):,} values) "
           f"from {run_dir} step {meta.get('step')}" +
           (f"; re-initialised by the plugin: {', '.join(f.replace('missing', 'new') for f in fresh)}" if fresh
            else ""))
    unused = sorted(set(source) - _names(params))  # (one of another shape is among the re-initialised above)
    if unused:
        report(f"init-from: not used, no parameter here by that name: {', '.join(unused)}")
    if (note := other_tokens_note(meta, s.data, run_dir)) is not None:
        report(note)
    return {**state, "params": params}
