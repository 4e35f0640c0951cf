"""Stop a run that diverged, before its state is ever checkpointed: a non-finite loss or gradient norm, or a loss
far above its start (finite divergence: Adam at a huge LR can sit at a loss of 1e31 with grad_norm inf)."""

from __future__ import annotations

import math
import signal
from collections.abc import Callable
from typing import Any

from zoo.errors import Stopped, TrainingDiverged, stop_received


class DivergenceGuard:
    """check(step, metrics) raises TrainingDiverged; `max_ratio` x the first logged loss bounds the loss
    (0: no bound). `advice()` says how to go on (a new run dir, or --fork-from the last good step)."""

    def __init__(self, max_ratio: float, first_loss: float | None, advice: Callable[[], str]):
        self.max_ratio, self.first_loss, self.advice = max_ratio, first_loss, advice

    def check(self, step: int, metrics: dict[str, Any]) -> None:
        loss, grad_norm = float(metrics["loss"]), float(metrics.get("grad_norm", 0.0))
        why = None
        if not math.isfinite(loss):
            why = f"the loss became {loss}"
        elif not math.isfinite(grad_norm):
            why = f"the gradient norm became {grad_norm} (loss {loss:.4g})"
        elif self.first_loss is None:
            self.first_loss = loss
        elif self.max_ratio and loss > self.max_ratio * self.first_loss:
            why = (f"the loss {loss:.4g} is above {self.max_ratio:g}x the first logged loss {self.first_loss:.4g} "
                   "(--max-loss-ratio; 0 disables)")
        if why:
            raise TrainingDiverged(f"{why} at step {step}; stopped without saving this state. {self.advice()}")


class StopSignals:
    """SIGTERM and SIGINT ask the loop to save a checkpoint at the next step and stop (exit 143 / 130); so does one
    received before the loop began that was swallowed where it landed (zoo.errors.stop_received)."""

    def __init__(self):
        pending = stop_received()
        self.signum: int | None = None if pending is None else getattr(pending, "signum", signal.SIGINT)
        self.previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGTERM, signal.SIGINT)}

    def _handle(self, signum, frame):
        self.signum = signum

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def raise_stop(self) -> None:
        raise Stopped(self.signum)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
