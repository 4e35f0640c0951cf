"""The one training loop (design.md section 6): abstract init -> shardings over a mesh of the devices present
-> jitted init; one pure jitted train step with donated state and the batch sharded over a `data` axis;
eval on a schedule; metrics fetched one step late; checkpoints that resume; finetuning with --init-from."""

from __future__ import annotations

import json
import math
import os
import signal
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import zoo.data
import zoo.models
import zoo.param
from zoo.config import IDENTITY, RunConfig
from zoo.train.checkpoint import Checkpoints, load_params, path_str
from zoo.train.logger import Logger, console, plot_curves
from zoo.train.setup import Setup, setup


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


def maybe_initialize_distributed() -> None:
    """Multi-host: JAX's own runtime, when the environment names a coordinator."""
    if os.environ.get("JAX_COORDINATOR_ADDRESS") and jax.process_count() == 1:
        jax.distributed.initialize()


def train(cfg: RunConfig) -> dict[str, Any]:
    """Runs (or resumes) the training described by `cfg`; returns the summary."""
    maybe_initialize_distributed()
    s = setup(cfg)
    run_dir = Path(cfg.run_dir or cfg.default_run_dir())
    cfg.run_dir = str(run_dir)
    n_dev = jax.device_count()
    if cfg.batch_size % n_dev:
        raise ValueError(f"--batch-size {cfg.batch_size} is not divisible by the {n_dev} devices present")
    _check_same_run(run_dir, cfg)

    mesh = jax.make_mesh((n_dev,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    repl, batch_sh = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    key = jax.random.PRNGKey(cfg.seed)
    abstract = jax.eval_shape(s.program.init, key)
    state_sh = jax.tree.map(lambda _: repl, abstract)
    ckpts = Checkpoints(run_dir, keep=cfg.keep)
    start = ckpts.latest_step()
    if start is not None:
        abstract_sh = jax.tree.map(lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), abstract,
                                   state_sh)
        state, _ = ckpts.restore(abstract_sh)
        console.print(f"resumed {run_dir} from step {start}")
    else:
        start = 0
        state = jax.jit(s.program.init, out_shardings=state_sh)(key)
        if cfg.init_from:
            state = _init_from(state, cfg.init_from)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(cfg.to_json(), indent=2))
    n_params = zoo.models.param_count(state["params"])
    console.print(f"{cfg.model} width {cfg.width} depth {cfg.depth} under {cfg.param}: "
                  f"{n_params:,} parameters; {s.steps} steps of batch {cfg.batch_size} on {n_dev} "
                  f"{jax.devices()[0].platform} device(s); run dir {run_dir}")
    plugin_report = s.plugin.report(cfg.model, s.model_cfg, seeds=2, batch=4, probes=1)
    if plugin_report:
        console.print(f"{cfg.param}: " + ", ".join(f"{k} {v:.4g}" for k, v in plugin_report.items()))

    data = s.data
    train_arrays = data.device_arrays("train", repl)
    eval_arrays = data.device_arrays(data.eval_split, repl)
    train_step = jax.jit(lambda st, arr, idx: s.program.train_step(st, data.gather(arr, idx)),
                         in_shardings=(state_sh, repl, batch_sh), out_shardings=(state_sh, repl),
                         donate_argnums=0)
    eval_step = jax.jit(lambda st, arr, idx: s.program.eval_step(st, data.gather(arr, idx)))
    diversity = _diversity_probe(s, eval_arrays)

    def evaluate(st) -> dict[str, float]:
        totals: dict[str, float] = {}
        count = 0
        for idx in data.eval_indices(cfg.eval_batch_size):
            m = jax.device_get(eval_step(st, eval_arrays, jnp.asarray(idx)))
            for k, v in m.items():
                totals[k] = totals.get(k, 0.0) + float(v) * len(idx)
            count += len(idx)
        out = {k: v / count for k, v in totals.items()}
        if data.kind == "text":
            out["bpc"] = out["loss"] / math.log(2)
        if diversity is not None:
            out["diversity_slope"] = diversity(st)
        return out

    def meta(step: int) -> dict[str, Any]:
        return {"step": step, "data_position": step, "config": cfg.to_json(), "plugin": s.plugin.spec()}

    stop = _StopFlag()
    unit = "tok" if data.kind == "text" else "img"
    per_step = cfg.batch_size * (cfg.seq_len if data.kind == "text" else 1)
    logger = Logger(run_dir, s.steps, start, unit)
    best: dict[str, float] = {}
    last: dict[str, float] = {}
    pending = None  # (step, metrics on device): fetched one step late
    try:
        for step in range(start, s.steps):
            idx = jax.make_array_from_process_local_data(batch_sh, data.indices("train", step, cfg.batch_size,
                                                                               cfg.seed))
            state, metrics = train_step(state, train_arrays, idx)
            if pending is not None:
                _log(logger, *pending, per_step, cfg.log_every)
            pending = (step + 1, metrics)
            done = step + 1
            if done % cfg.eval_every == 0 or done == s.steps:
                _check_finite(*pending)
                ev = evaluate(state)
                logger.eval(done, ev)
                best, last = _better(best, ev), ev
            if done % cfg.ckpt_every == 0 or done == s.steps or stop.requested:
                _check_finite(*pending)  # never replace good checkpoints with a diverged state
                if not bool(all_finite(state["params"])):
                    raise TrainingDiverged(f"the parameters became non-finite at step {done}; stopped without "
                                           "saving, the last good checkpoint is kept (lower --lr)")
                ckpts.save(done, state, meta(done))
            if stop.requested:
                ckpts.wait()
                raise KeyboardInterrupt
        if pending is not None:
            _log(logger, *pending, per_step, 1)
    except KeyboardInterrupt:
        logger.close()
        ckpts.close()
        console.print(f"stopped by signal; checkpoint saved; rerun the same command to resume ({run_dir})")
        raise SystemExit(130) from None
    except TrainingDiverged:
        logger.close()
        ckpts.close()
        raise
    logger.close()
    ckpts.wait()
    ckpts.close()
    summary = {"steps": s.steps, "best_eval": best, "final_eval": last, "params": n_params,
               "run_dir": str(run_dir), **({"plugin_report": plugin_report} if plugin_report else {})}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot_curves(run_dir)
    console.print(f"done: best eval {json.dumps({k: round(v, 4) for k, v in best.items()})}; curves in "
                  f"{run_dir / 'curves.png'}")
    return summary


def _diversity_probe(s: Setup, eval_arrays: Any) -> Any:
    """With --diversity LAMBDA: state -> the log-log slope of feature diversity d(eps) at depth fraction LAMBDA
    (zoo.diagnostics.diversity) on the first (up to) 256 eval inputs; None otherwise."""
    if s.cfg.diversity is None:
        return None
    from zoo.diagnostics.diversity import default_eps, diversity_probe

    default_eps(s.model_cfg.depth, s.cfg.diversity)  # a too-shallow model is refused before training starts
    idx = next(iter(s.data.eval_indices(min(256, s.cfg.eval_batch_size))))
    x = s.data.gather(eval_arrays, jnp.asarray(idx))["x"]
    probe = diversity_probe(s.program, s.cfg.diversity)
    return lambda state: probe(state, x)[1]


def _log(logger: Logger, step: int, metrics: Any, per_step: int, every: int) -> None:
    if step % every:
        return
    m = jax.device_get(metrics)
    _check_finite(step, m)
    logger.train(step, m, per_step)


@jax.jit
def all_finite(tree: Any) -> jax.Array:
    return jnp.all(jnp.stack([jnp.isfinite(x).all() for x in jax.tree.leaves(tree)]))


def _check_finite(step: int, metrics: Any) -> None:
    loss = float(jax.device_get(metrics["loss"]))
    if not math.isfinite(loss):
        raise TrainingDiverged(f"the loss became {loss} at step {step}; stopped without saving, the last good "
                               "checkpoint is kept (lower --lr or change the parametrization)")


def _better(best: dict[str, float], ev: dict[str, float]) -> dict[str, float]:
    """Best eval so far: lowest loss/bpc, highest accuracy (diagnostics such as diversity_slope are not ranked)."""
    out = dict(best)
    for k, v in ev.items():
        if k in ("loss", "bpc", "accuracy") and (k not in out or (v > out[k] if k == "accuracy" else v < out[k])):
            out[k] = v
    return out


def _check_same_run(run_dir: Path, cfg: RunConfig) -> None:
    path = run_dir / "config.json"
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text())
    except json.JSONDecodeError:
        raise ValueError(f"{path} is not valid JSON; use another --run-dir") from None
    diff = [k for k in IDENTITY if k in old and old[k] != cfg.to_json()[k]]
    if diff:
        changes = ", ".join(f"{k}: {old[k]} vs {cfg.to_json()[k]}" for k in diff)
        raise ValueError(f"{run_dir} holds a different run ({changes}); pass another --run-dir")


def _init_from(state: dict[str, Any], run_dir: str) -> dict[str, Any]:
    """Params from another run's latest checkpoint; a parameter whose shape changed keeps its fresh init."""
    loaded, _ = load_params(run_dir)
    flat, treedef = jax.tree_util.tree_flatten_with_path(state["params"])
    leaves = []
    for path, fresh in flat:
        name = path_str(path)
        old = loaded.get(name)
        if old is not None and old.shape == fresh.shape:
            leaves.append(jax.device_put(jnp.asarray(old, fresh.dtype), fresh.sharding))
        else:
            why = "new" if old is None else f"shape {old.shape} -> {fresh.shape}"
            console.print(f"init-from: re-initialised {name} by the plugin ({why})")
            leaves.append(fresh)
    return {**state, "params": jax.tree_util.tree_unflatten(treedef, leaves)}


class _StopFlag:
    """SIGTERM/SIGINT ask the loop to save a checkpoint at the next step and exit."""

    def __init__(self):
        self.requested = False
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        self.requested = True


