"""The one training loop (design.md section 6): a short driver over named parts.

    s = setup(cfg)                               data, model, plugin, program               (setup.py)
    run = Run.open(cfg)                          run dir, lock, identity, finished?         (run.py)
    plan = MeshPlan.from_spec(cfg.mesh)          devices, mesh axes, shardings              (mesh.py)
    state, start = restore_or_init(...)          verified checkpoints, --fork-from, --init-from (state.py)
    batches = open_input(...)                    the batch of (seed, step): on device or streamed (input.py)
    steps = Steps(...)                           jitted train and eval steps, memory checked (below)
    Session(...).run(): for each step, train;    metrics one step late, divergence guard, eval, checkpoints,
        then after_step                          signals                                    (below, guard.py)
"""

from __future__ import annotations

import json
import math
import signal
import time
from typing import Any

import jax
import jax.numpy as jnp

import zoo.models
from zoo.config import RunConfig
from zoo.diagnostics.report import describe, run_report
from zoo.train import memory
from zoo.train.checkpoint import Checkpoints
from zoo.train.errors import TrainingDiverged
from zoo.train.guard import DivergenceGuard, StopSignals
from zoo.train.input import MemoryInput, StreamInput, open_input
from zoo.train.logger import Logger, console
from zoo.train.mesh import MeshPlan, per_device_bytes
from zoo.train.run import Run
from zoo.train.setup import Setup, setup
from zoo.train.state import restore_or_init


def train(cfg: RunConfig) -> dict[str, Any]:
    """Runs (or resumes, or finds finished) the training described by `cfg`; returns the summary."""
    s = setup(cfg)
    with Run.open(cfg) as run:
        say = _say(run.main)
        summary = run.finished_summary(s.steps)
        if summary is not None:
            say(f"{run.dir} is finished ({s.steps} steps); nothing to do. Best eval: "
                f"{json.dumps({k: round(v, 4) for k, v in summary.get('best_eval', {}).items()})}")
            return summary
        plan = MeshPlan.from_spec(cfg.mesh)
        ckpts = Checkpoints(run.dir, keep=cfg.keep)
        try:
            summary = Session(s, run, plan, ckpts, say).run()
        finally:
            ckpts.close()
        run.finish(summary)
        say(f"done: best eval {json.dumps({k: round(v, 4) for k, v in summary['best_eval'].items()})}; "
            f"{summary.get('ms_per_step', 0):.1f} ms/step; curves in {run.dir / 'curves.png'}")
        return summary


def _say(main: bool):
    return (lambda text: console.print(text, highlight=False)) if main else (lambda text: None)


class Steps:
    """The train step jitted with the state's and the batch's shardings and the state donated, compiled ahead of
    time (so its memory is checked before it runs); eval as weighted sums over fixed-size batches."""

    def __init__(self, s: Setup, plan: MeshPlan, batches: MemoryInput | StreamInput, state: Any, say):
        prog = s.program
        state_sh = jax.tree.map(lambda x: x.sharding, state)
        train = jax.jit(lambda st, args: prog.train_step(st, batches.batch(args)),
                        in_shardings=(state_sh, batches.shardings), out_shardings=(state_sh, plan.replicated),
                        donate_argnums=0)
        args = batches.args_at(0)
        flash = s.cfg.precision == "bf16" and jax.default_backend() == "gpu"
        needed = memory.activation_bytes(prog, state, jax.eval_shape(batches.batch, args), flash)
        memory.check_activations(needed, plan.batch_ways, s.cfg.grad_accum,
                                 s.model_cfg.depth if s.cfg.remat == "block" else 1)
        say(f"compiling the train step (batch {s.cfg.batch_size} on {jax.device_count()} "
            f"{jax.devices()[0].platform} device(s), mesh {_mesh_text(plan)})")
        t0 = time.perf_counter()
        self.train = train.lower(state, args).compile()
        used = memory.check_compiled(self.train)
        say(f"compiled in {time.perf_counter() - t0:.1f} s" +
            (f"; {used / memory.GB:.2f} GB per device (XLA's estimate)" if used else ""))
        self._eval = jax.jit(lambda st, args: prog.eval_sums(st, batches.batch(args), args["weight"]),
                             in_shardings=(state_sh, batches.eval_shardings), out_shardings=plan.replicated)
        self._loss = jax.jit(lambda st, args: prog.eval_step(st, batches.batch(args)),
                             in_shardings=(state_sh, batches.shardings), out_shardings=plan.replicated)
        self.batches, self.text = batches, s.data.kind == "text"

    def loss_at(self, state: Any, step: int) -> dict[str, float]:
        """The loss of `state` on step `step`'s batch (no dropout): checked before a state is saved."""
        return jax.device_get(self._loss(state, self.batches.args_at(step)))

    def evaluate(self, state: Any) -> dict[str, float]:
        totals: dict[str, float] = {}
        for args in self.batches.eval_args():
            for k, v in jax.device_get(self._eval(state, args)).items():
                totals[k] = totals.get(k, 0.0) + float(v)
        count = totals.pop("count")
        out = {k: v / count for k, v in totals.items()}
        if self.text:
            out["bpc"] = out["loss"] / math.log(2)
        return out


def _mesh_text(plan: MeshPlan) -> str:
    return ",".join(f"{k}={v}" for k, v in plan.sizes.items() if v > 1) or "data=1"


class Session:
    """One training session, from the restored step to the end. `run()` is the step loop; after each step the
    named parts run on schedule: `observe` (metrics one step late, the divergence guard, the log), `evaluate`,
    `checkpoint` and `stop` (a signal asked for it)."""

    def __init__(self, s: Setup, run: Run, plan: MeshPlan, ckpts: Checkpoints, say):
        cfg = self.cfg = s.cfg
        self.s, self.run_dir, self.ckpts, self.say = s, run.dir, ckpts, say
        self.state, self.start, meta = restore_or_init(s, plan, ckpts, say)
        plan.check_model(self.state)
        run.start(self.start)
        self.n_params = zoo.models.param_count(self.state["params"])
        held = per_device_bytes({"params": self.state["params"], "opt": self.state["opt"]})
        say(f"{cfg.model} width {cfg.width} depth {cfg.depth} under {cfg.param}: {self.n_params:,} parameters "
            f"(with the optimizer state {held / 2**20:.3f} MiB per device); {s.steps} steps of batch "
            f"{cfg.batch_size}; run dir {run.dir}")
        self.plugin_report = (run_report(cfg.model, s.model_cfg, s.plugin, seeds=2, batch=4, probes=1)
                              if self.start == 0 else {})
        if self.plugin_report:
            say(f"{cfg.param}: " + describe(self.plugin_report))
        self.batches = open_input(s.data, plan, cfg, self.start)
        if jax.process_count() > 1:
            console.print(f"process {jax.process_index()} of {jax.process_count()} reads rows "
                          f"{self.batches.rows.start}:{self.batches.rows.stop} of every batch of {cfg.batch_size}",
                          highlight=False)
        self.steps = Steps(s, plan, self.batches, self.state, say)
        self.diversity = _diversity_probe(s)
        text = s.data.kind == "text"
        self.per_step = cfg.batch_size * (cfg.seq_len if text else 1)
        self.logger = Logger(run.dir, s.steps, self.start, "tok" if text else "img", self.per_step,
                             enabled=run.main)
        self.guard = DivergenceGuard(cfg.max_loss_ratio, meta.get("first_loss"), self.advice)
        self.best: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.pending = None  # (step, metrics on device): fetched one step late
        self.busy_s = 0.0  # time spent on evals and checkpoints, left out of the step time

    def run(self) -> dict[str, Any]:
        signals = StopSignals()
        t0 = time.perf_counter()
        try:
            for step in range(self.start, self.s.steps):
                self.state, metrics = self.steps.train(self.state, self.batches.train_args(step))
                self.after_step(step + 1, metrics, signals)
            self.observe()
        finally:
            signals.restore()
            self.logger.close()
            self.batches.close()
        self.ckpts.wait()
        return self.summary(time.perf_counter() - t0 - self.busy_s)

    def after_step(self, done: int, metrics: Any, signals: StopSignals) -> None:
        self.observe()
        self.pending = (done, metrics)
        evaluate = done % self.cfg.eval_every == 0 or done == self.s.steps
        save = done % self.cfg.ckpt_every == 0 or done == self.s.steps or signals.requested
        if evaluate or save:
            self.observe()
        t0 = time.perf_counter()
        if evaluate:
            self.evaluate(done)
        if save:
            self.checkpoint(done)
        self.busy_s += time.perf_counter() - t0
        if signals.requested:
            self.ckpts.wait()
            self.say(f"stopped by {_signal_name(signals.signum)} at step {done}; checkpoint saved; rerun the same "
                     f"command to resume ({self.run_dir})")
            signals.raise_stop()

    def observe(self) -> None:
        """The pending step's metrics: fetched (the next step is already queued), guarded, logged."""
        if self.pending is None:
            return
        step, metrics = self.pending
        self.pending = None
        m = jax.device_get(metrics)
        self.guard.check(step, m)
        self.logger.train(step, m, log=step % self.cfg.log_every == 0 or step == self.s.steps)

    def evaluate(self, done: int) -> None:
        self.last = self.steps.evaluate(self.state)
        if self.diversity is not None:
            self.last["diversity_slope"] = self.diversity(self.state)
        self.logger.eval(done, self.last)
        self.best = _better(self.best, self.last)

    def checkpoint(self, done: int) -> None:
        """Save, unless the state diverged: non-finite parameters, or a bad loss on the next batch."""
        if not bool(all_finite(self.state["params"])):
            raise TrainingDiverged(f"the parameters became non-finite at step {done}; stopped without saving this "
                                   f"state. {self.advice()}")
        self.guard.check(done + 1, self.steps.loss_at(self.state, done))
        self.ckpts.save(done, self.state, {"step": done, "data_position": done, "config": self.cfg.to_json(),
                                           "plugin": self.s.plugin.spec(), "first_loss": self.guard.first_loss})

    def advice(self) -> str:
        last = self.ckpts.latest_step()
        if last is None:
            return "No checkpoint was saved: lower --lr and start again in a new --run-dir."
        return (f"The last good checkpoint is step {last}. To go on with a lower LR, rerun with --fork-from "
                f"{self.run_dir}:{last} --run-dir NEW_DIR --lr LOWER, or start again in a new --run-dir.")

    def summary(self, train_s: float) -> dict[str, Any]:
        ran = self.s.steps - self.start
        speed = {"ms_per_step": 1e3 * train_s / ran, "examples_per_s": self.per_step * ran / train_s} if ran else {}
        return {"steps": self.s.steps, "best_eval": self.best, "final_eval": self.last, "params": self.n_params,
                "run_dir": str(self.run_dir), **speed,
                **({"plugin_report": self.plugin_report} if self.plugin_report else {})}


def _signal_name(signum: int | None) -> str:
    return signal.Signals(signum).name if signum else "signal"


def _diversity_probe(s: Setup) -> Any:
    """With --diversity LAMBDA: state -> the log-log slope of feature diversity d(eps) at depth fraction LAMBDA
    (zoo.diagnostics.diversity) on the first (up to) 256 eval inputs; None otherwise."""
    if s.cfg.diversity is None:
        return None
    from zoo.diagnostics.diversity import default_eps, diversity_probe

    default_eps(s.model_cfg.depth, s.cfg.diversity)  # a too-shallow model is refused before training starts
    idx = next(iter(s.data.eval_indices(min(256, s.cfg.eval_batch_size))))
    x = jnp.asarray(s.data.read(s.data.eval_split, idx)["x"])
    probe = diversity_probe(s.program, s.cfg.diversity)
    return lambda state: probe(state, x)[1]


@jax.jit
def all_finite(tree: Any) -> jax.Array:
    return jnp.all(jnp.stack([jnp.isfinite(x).all() for x in jax.tree.leaves(tree)]))


def _better(best: dict[str, float], ev: dict[str, float]) -> dict[str, float]:
    """Best eval so far: lowest loss/bpc, highest accuracy (diagnostics such as diversity_slope are not ranked)."""
    out = dict(best)
    for k, v in ev.items():
        if k in ("loss", "bpc", "accuracy") and (k not in out or (v > out[k] if k == "accuracy" else v < out[k])):
            out[k] = v
    return out
