"""The one training loop (design.md section 6), composed in `train()`, one part per line:

    setup                   data, model config, plugin, program (the config resolved)     setup.py
    backend.start           the backend; a large step on CPU runs inline, the heap kept   backend.py, heap.py
    MeshPlan                devices, mesh axes, shardings                                  mesh.py
    check_fits, sources,    everything checkable, before anything is written               compiled.py, state.py,
      workers                                                                              input.py
    Run.open                run dir, lock, identity, finished?                             run.py
    restore_or_init         verified checkpoints, --fork-from, --init-from                 state.py
    open_input              the batch of (seed, step): on the device or streamed           input.py
    Compiled                the jitted train and eval steps, their memory checked          compiled.py
    Loop.run                the steps, then the due hooks: log, eval, the caller's,        hooks.py
                            checkpoint; metrics one step late, the divergence guard        guard.py
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Sequence
from shlex import quote
from typing import Any

import jax
import jax.numpy as jnp

import zoo.models
from zoo.config import RunConfig
from zoo.data import card
from zoo.data.stream import DataError
from zoo.errors import CheckpointError, CheckpointFormat, TrainingDiverged, sigterm_stops
from zoo.schedule import longest_warmup, outlasts, warmup_span
from zoo.train import backend, distributed, memory
from zoo.train.checkpoint import Checkpoints
from zoo.train.compiled import Compiled, abstract_batch, check_fits, kept_activations
from zoo.train.evals import Evals
from zoo.train.guard import DivergenceGuard, StopSignals
from zoo.train.hooks import Hook, checkpoint_hook, due, eval_hook, log_hook
from zoo.train.input import check_workers, open_input
from zoo.train.logger import Logger
from zoo.train.mesh import MeshPlan, per_device_bytes
from zoo.train.run import Run, say_on
from zoo.train.setup import Setup, setup
from zoo.train.state import abstract_state, check_sources, restore_or_init
from zoo.train.step import jit_run_once

# SIGTERM outside the steps (restoring, compiling, writing the summary): no step ran since the last checkpoint
OUTSIDE_STEPS = ("stopped by SIGTERM outside the train steps (starting, compiling or finishing): nothing was lost; "
                 "rerun the same command to go on")
HOST_LOCAL = ("data_dir", "cache_dir", "workers")  # settings the processes of a multi-host run may each set their own


def train(cfg: RunConfig, hooks: Sequence[Hook] = ()) -> dict[str, Any]:
    """Runs (or resumes, or finds finished) the training described by `cfg`; returns the summary. `hooks`: the
    caller's periodic work (zoo.train.hooks), run after the eval and before the checkpoint of a step."""
    started = time.perf_counter()
    distributed.check_same_settings(cfg.flat(), local=HOST_LOCAL)
    s = setup(cfg)
    s.data.check_batch("train", s.cfg.loop.batch_size)  # here, not when the first batch is drawn after the compile
    forward = memory.forward_bytes(s.program, abstract_batch(s))
    activations = kept_activations(s, forward)
    inline = backend.start(activations)
    plan = MeshPlan.from_spec(s.cfg.loop.mesh)
    target = abstract_state(s, plan)  # the state's shapes and shardings, traced once
    check_fits(s, plan, target[0], forward)
    check_sources(s)
    check_workers(s.cfg.data.workers, s.data, s.cfg.data.name)
    with sigterm_stops(OUTSIDE_STEPS), Run.open(s.cfg) as run:  # the steps' own stop: Loop.run's StopSignals
        if (summary := run.finished_summary()) is not None:
            if (damage := _unreadable(run.dir, s.steps)) is None:
                run.say(f"{run.dir} is finished ({s.steps} steps); nothing to do. Best eval: {_best(summary)}")
                return summary
            run.say(f"{run.dir} is finished, but {damage}: its last steps are trained again from the newest "
                    "checkpoint that reads, to remake it")
        with Checkpoints(run.dir, keep=s.cfg.loop.keep) as ckpts:
            state, start, meta = restore_or_init(s, plan, target, ckpts, run.say)
            run.say(_describe(s, state, run))
            if (note := _warmup_note(s)) is not None:
                run.say(note)
            if inline:
                run.say(f"a large step for a CPU ({activations / 2**20:.0f} MiB of activations): steps run on this "
                        "thread, the heap kept between them (zoo.train.backend.start)")
            with contextlib.closing(open_input(s.data, plan, s.cfg, start)) as batches:
                if jax.process_count() > 1:  # every process says what it reads
                    say_on(True)(f"process {jax.process_index()} of {jax.process_count()} reads rows "
                                 f"{batches.rows.start}:{batches.rows.stop} of every batch of {s.cfg.loop.batch_size}")
                compiled = Compiled(s, plan, batches, state, run.say, trains=start < s.steps)
                run.start(start)
                loop = Loop(s, compiled, state, Logger(run.dir, s.steps, start, *_unit(s), run.say, run.main),
                            DivergenceGuard(s.cfg.loop.max_loss_ratio, meta.get("first_loss"), _advice(ckpts)),
                            [*hooks, checkpoint_hook(ckpts, s.cfg.loop.ckpt_every)], started)
                loop.evals.resumed(meta)  # a resumed run's run-start report, and its clock
                summary = loop.run(start)
        run.finish(summary)
        speed = f"; {summary['ms_per_step']:.1f} ms/step" if summary.get("ms_per_step") is not None else ""
        run.say(f"done: best eval {_best(summary)}{speed}; curves in {run.dir / 'curves.png'}")
        return summary


def _unreadable(run_dir: Any, step: int) -> str | None:
    """Why a finished run's final checkpoint cannot be read, from its metadata alone (None where it reads): every
    reader of a run whose final state is lost fell back to an older one while the rerun said 'nothing to do'; the
    rerun resumes instead (the damaged one moved to corrupt/, as any is), which remakes it bit for bit."""
    with Checkpoints(run_dir, read_only=True) as ckpts:
        try:
            ckpts.meta(step)
        except CheckpointFormat:  # another zoo's layout: it reads (the run is finished), only not into this zoo
            return None
        except CheckpointError as e:
            return str(e)
    return None


class Loop:
    """The steps from `start` to the end. After each step the hooks that are due run in order: the log (on the
    metrics, fetched one step late so the next step is already queued, at once where a step ran inline; the
    divergence guard sees every step), eval, the caller's, checkpoint. A SIGTERM or SIGINT saves at the next step
    and stops (exit 143 or 130)."""

    def __init__(self, s: Setup, compiled: Compiled, state: Any, logger: Logger, guard: DivergenceGuard,
                 hooks: Sequence[Hook], started: float | None = None):
        self.s, self.compiled, self.logger, self.guard = s, compiled, logger, guard
        self.leaves = compiled.flatten(state)  # the state, as the train step takes it
        loop = s.cfg.loop
        self.hooks = [log_hook(loop.log_every), eval_hook(loop.eval_every, loop.eval_iters), *hooks]
        self.evals = Evals(logger, logger.earlier_evals, time.perf_counter() if started is None else started)
        self.metrics: dict[str, float] = {}  # the newest fetched train metrics
        self.pending: tuple[int, Any] | None = None  # (step, metrics on the device)
        self.busy_s = 0.0  # time in hooks that touch the state (evals, checkpoints), left out of the step time
        self.signals: StopSignals | None = None  # while it runs

    def run(self, start: int) -> dict[str, Any]:
        total = self.s.steps
        self.signals = signals = StopSignals()
        t0 = time.perf_counter()
        try:
            if start == 0:
                self._run_hooks([h for h in self.hooks if h.at_start], 0)
            elif not self.evals.logged(start):  # its eval was due and did not finish (killed, or left for a signal)
                self._run_hooks([h for h in self.hooks if h.name == "eval" and due(start, h.every, total)], start)
            if signals.requested:  # it came during those: an eval left unfinished is the rerun's first work again
                self.logger.say(f"stopped by {signal.Signals(signals.signum).name} at step {start}, before its next "
                                "step; nothing was lost: rerun the same command to go on")
                signals.raise_stop()
            for step in range(start, total):
                self.leaves, metrics = self.compiled.train(self.leaves, self.compiled.batches.train_args(step))
                self.observe()
                self.pending = (step + 1, metrics)
                if all(m.is_ready() for m in jax.tree.leaves(metrics)):  # a step run inline: nothing to overlap,
                    self.observe()  # and the log's rate times it when it ends, not when the next one does
                stopping = signals.requested
                ran = [h for h in self.hooks if not h.metrics and not h.at_start and
                       (due(step + 1, h.every, total) or (stopping and h.on_stop))]
                self._run_hooks(ran, step + 1)
                if signals.requested and not stopping:  # it came during a hook: an eval left itself unfinished
                    stopping = True
                    self._run_hooks([h for h in self.hooks if h.on_stop and h not in ran], step + 1)
                if stopping:
                    self.logger.say(f"stopped by {signal.Signals(signals.signum).name} at step {step + 1}; checkpoint "
                               f"saved; rerun the same command to resume ({self.s.cfg.run_dir()})")
                    signals.raise_stop()
            self.observe()
        finally:
            signals.restore()
            self.logger.close()
        return self.summary(time.perf_counter() - t0 - self.busy_s, total - start)

    @property
    def stop_requested(self) -> bool:
        """A SIGTERM or SIGINT came: long work in a hook (an eval) leaves itself unfinished."""
        return self.signals is not None and self.signals.requested

    @property
    def state(self) -> Any:
        """The state's pytree, rebuilt from its leaves (for the hooks)."""
        return self.compiled.unflatten(self.leaves)

    def observe(self) -> None:
        """The pending step's metrics: fetched, guarded, and given to the metrics hooks that are due."""
        if self.pending is None:
            return
        step, metrics = self.pending
        self.pending = None
        self.metrics = jax.device_get(metrics)
        self.guard.check(step, self.metrics)
        self.logger.tick(step, self.metrics)
        for hook in self.hooks:
            if hook.metrics and due(step, hook.every, self.s.steps):
                hook.fn(self, step)

    def _run_hooks(self, hooks: list[Hook], step: int) -> None:
        if not hooks:
            return
        self.observe()  # a state is only evaluated or saved after its loss passed the guard
        t0 = time.perf_counter()
        for i, hook in enumerate(hooks):
            try:
                hook.fn(self, step)
            except DataError as err:
                # a streamed eval set's bad file, found when read: the step is saved first, as a stop saves it (the
                # steps since the last checkpoint were lost), and the rerun evaluates it first; not on several hosts,
                # whose other processes wait in a collective
                if jax.process_count() > 1:
                    raise
                for saver in (h for h in self.hooks if h.on_stop and h not in hooks[:i + 1]):
                    saver.fn(self, step)
                raise DataError(f"{err}; step {step} is saved: fix it and rerun to go on") from None
        self.busy_s += time.perf_counter() - t0
        self.logger.paused(time.perf_counter() - t0)

    def checkpoint_meta(self, step: int) -> dict[str, Any]:
        """Before a save: the state is finite and its loss on the next batch passes the guard; the metadata saved
        with it."""
        state = self.state
        if not bool(all_finite(state["params"])):
            raise TrainingDiverged(f"the parameters became non-finite at step {step}; stopped without saving this "
                                   f"state. {self.guard.advice()}")
        self.guard.check(step + 1, self._next_loss(state, step))
        return {"step": step, "data_position": step, "config": self.s.cfg.to_json(), "plugin": self.s.plugin.spec(),
                "first_loss": self.guard.first_loss, "summary_extra": self.evals.extra, **self.evals.clock(),
                "train_examples": self.s.data.size("train"), "train_digest": self.s.data.digest("train"),
                **card.record(self.s.data)}

    def _next_loss(self, state: Any, step: int) -> dict[str, float]:
        """The state's loss on the next step's batch; on the last trained one where the next cannot be read (a corrupt
        file of a streamed set, which the stream names when a step reaches it): a batch no step trained cost the run
        its last checkpoint."""
        try:
            return self.compiled.loss_at(state, step)
        except DataError as err:
            if step == 0:
                raise
            self.logger.say(f"warning: {err}; the state of step {step} is checked on step {step - 1}'s batch instead")
            return self.compiled.loss_at(state, step - 1)

    def summary(self, train_s: float, ran: int) -> dict[str, Any]:
        cfg = self.s.cfg
        per_step = self.logger.per_step
        speed = {"ms_per_step": 1e3 * train_s / ran if ran else None,  # None: this process trained no step (a run
                 "examples_per_s": per_step * ran / train_s if ran else None}  # killed before its summary was written)
        return {"steps": self.s.steps, "best_eval": self.evals.best, "final_eval": self.evals.last,
                "time_to_best_s": self.evals.best_time, "wall_s": time.perf_counter() - self.evals.started,
                "params": zoo.models.param_count(self.state["params"]), "run_dir": cfg.run_dir(), **speed,
                **self.evals.extra}


@jit_run_once  # once per save: compiled fast, not tuned
def all_finite(tree: Any) -> jax.Array:
    return jnp.all(jnp.stack([jnp.isfinite(x).all() for x in jax.tree.leaves(tree)]))


def _unit(s: Setup) -> tuple[str, int]:
    text = s.data.kind == "text"
    return ("tok" if text else "img"), s.cfg.loop.batch_size * (s.cfg.data.seq_len if text else 1)


def _advice(ckpts: Checkpoints):
    def advice() -> str:
        last = ckpts.latest_step()
        if last is None:
            return "No checkpoint was saved: lower --lr and start again in a new --run-dir."
        return (f"The last good checkpoint is step {last}. To go on with a lower LR, rerun with --fork-from "
                f"{quote(f'{ckpts.run_dir}:{last}')} --run-dir NEW_DIR --lr LOWER, or start again in a new --run-dir.")

    return advice


def _describe(s: Setup, state: Any, run: Run) -> str:
    m = s.cfg.model
    held = per_device_bytes({"params": state["params"], "opt": state["opt"]})
    return (f"{m.name} width {m.width} depth {m.depth} under {s.cfg.param.name}: "
            f"{zoo.models.param_count(state['params']):,} parameters (with the optimizer state "
            f"{held / 2**20:.3f} MiB per device); {s.steps} steps of batch {s.cfg.loop.batch_size}; run dir {run.dir}")


def _warmup_note(s: Setup) -> str | None:
    """A line when the warmup leaves the run no step of its schedule's decay: a ramp (t + 1) / D (D =
    zoo.schedule.warmup_span: W, or W + 1 under --warmup-peak after) with D > steps, which zoo.config.check_warmup lets
    through (the recipe's, set for its own length, under a shorter --steps; a horizon given in --epochs), ends at
    steps / D; and, under a cosine or linear schedule, D = steps, which reaches the peak on the last step and so never
    decays to --min-lr-ratio."""
    warmup, span, steps, schedule = s.cfg.optim.warmup, warmup_span(s.cfg.optim), s.steps, s.cfg.optim.schedule
    decays = schedule != "constant" and steps > 1
    if span < steps or (span == steps and not decays):
        return None
    decay = f", and the {schedule} decay never starts" if schedule != "constant" else ""
    longest = longest_warmup(s.cfg.optim, steps)
    advice = f"give --warmup {longest - 1} or less to decay" if decays else \
        f"give --warmup {longest} or less to reach it"
    if span == steps:
        return (f"note: the warmup of {warmup} steps takes the whole run: the LR reaches --lr {s.cfg.optim.lr:g} on "
                f"its last step{decay} (--min-lr-ratio {s.cfg.optim.min_lr_ratio:g} unused); {advice}")
    return (f"note: the warmup of {warmup} steps {outlasts(warmup, steps)}: the LR ends at "
            f"{steps / span:.3g} of --lr {s.cfg.optim.lr:g}{decay}; {advice}")


def _best(summary: dict[str, Any]) -> str:
    return json.dumps({k: round(v, 4) for k, v in summary.get("best_eval", {}).items()})
