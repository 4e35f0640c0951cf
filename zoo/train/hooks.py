"""Periodic work of the loop as hooks with one schedule: `due(step, every, total)` (big_vision's `itstime`,
levanter's `add_hook(every=N)`).

The loop's own hooks are the log (train metrics, fetched one step late), eval and checkpoint; callers add theirs
(the command line adds the diagnostics: the run-start report, the feature-diversity probe) through
`train(cfg, hooks=[...])`, so the loop imports nothing above it. A hook sees the loop as a `LoopView` (what
zoo.train.loop.Loop offers it), so this module and the loop do not import each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from zoo.train.estimate import sampled_losses

if TYPE_CHECKING:
    from zoo.train.checkpoint import Checkpoints
    from zoo.train.compiled import Compiled
    from zoo.train.evals import Evals
    from zoo.train.logger import Logger
    from zoo.train.setup import Setup


class LoopView(Protocol):
    """What a hook reads of the running loop: the run's setup, the compiled steps, the logger, the evals (where a
    hook adds its metrics and summary entries), the newest train metrics, the state and whether a signal asked it
    to stop."""

    s: Setup
    compiled: Compiled
    logger: Logger
    evals: Evals
    metrics: dict[str, float]

    @property
    def state(self) -> Any: ...

    @property
    def stop_requested(self) -> bool: ...

    def checkpoint_meta(self, step: int) -> dict[str, Any]: ...


def due(step: int, every: int | None, total: int) -> bool:
    """After `step` of `total`: every `every` steps (None: never) and at the last step."""
    return step == total or (every is not None and every > 0 and step % every == 0)


@dataclasses.dataclass(frozen=True)
class Hook:
    """`fn(loop, step)` after each step where `due(step, every, total)` holds.

    metrics: the hook reads the step's train metrics (`loop.metrics`), which arrive one step late; at_start: it runs
    once, before the first step of a fresh run (step 0), instead of periodically; on_stop: it also runs when a
    signal stops the run.
    """

    name: str
    fn: Callable[[LoopView, int], Any]
    every: int | None = None
    metrics: bool = False
    at_start: bool = False
    on_stop: bool = False


def log_hook(every: int) -> Hook:
    """Train metrics to metrics.jsonl and the progress line."""
    return Hook("log", lambda loop, step: loop.logger.train(step, loop.metrics), every, metrics=True)


def eval_hook(every: int, iters: int = 0) -> Hook:
    """The eval split's loss and accuracy, logged; the best so far kept for the summary. With `iters`, also nanoGPT's
    estimate of both splits' losses over that many random batches (zoo.train.estimate)."""

    def evaluate(loop: LoopView, step: int) -> None:
        def stop() -> bool:  # a signal leaves the eval unfinished: the rerun does it first
            return loop.stop_requested

        metrics = loop.compiled.evaluate(loop.state, stop)
        sampled = sampled_losses(loop.compiled, loop.state, step, iters, loop.s.cfg.loop.seed, stop) if iters else {}
        if metrics is not None and sampled is not None:
            loop.evals.add(step, {**metrics, **sampled})

    return Hook("eval", evaluate, every)


def checkpoint_hook(ckpts: Checkpoints, every: int) -> Hook:
    """Save the state (async), after checking it did not diverge (zoo.train.loop.Loop.checkpoint_meta)."""
    return Hook("checkpoint", lambda loop, step: ckpts.save(step, loop.state, loop.checkpoint_meta(step)), every,
                on_stop=True)
