"""The eval results of a run (zoo.train.loop.Loop.evals): each logged, the last and the best kept for the summary;
hooks add theirs (a diagnostic's metric, a run-start report)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from zoo.train.compiled import BITS
from zoo.train.logger import Logger


class Evals:
    """Eval results: each logged; the last, and the best so far (lowest loss, bits and sampled loss, highest
    accuracy) over the whole run, a resumed run's `earlier` eval rows (metrics.jsonl's, before its start) included;
    `best_time`: the run's wall seconds from `started` (the first process's train() call) to the end of each best's
    eval; `extra` holds what hooks add to the summary (a run-start report). Both are saved with each checkpoint
    (`clock`) for a resumed run (`resumed`), whose clock goes on from the checkpoint's: each process counts from its
    start to its last checkpoint (the steps after it are trained again, and their first try's time is not counted)."""

    def __init__(self, logger: Logger, earlier: Sequence[dict[str, Any]] = (), started: float = 0.0):
        self.logger, self.step, self.started = logger, -1, started
        self.last: dict[str, float] = {}
        self.best: dict[str, float] = {}
        self.best_time: dict[str, float] = {}
        self.extra: dict[str, Any] = {}
        for row in earlier:
            self.keep(row["step"], {k: v for k, v in row.items() if k not in ("step", "split", "time")})

    def clock(self) -> dict[str, Any]:
        """What a checkpoint keeps of the run's time: its wall seconds so far and each best's time."""
        return {"wall_s": time.perf_counter() - self.started, "best_time": dict(self.best_time)}

    def resumed(self, meta: dict[str, Any]) -> None:
        """Go on from a checkpoint's metadata: its summary additions, its wall seconds (the clock starts that much
        earlier) and the times of the bests it had, which are this run's bests from before the resume. A checkpoint
        from before the clock was kept (format 1) has no times: a best from before the resume then has none."""
        self.extra.update(meta.get("summary_extra", {}))
        wall = meta.get("wall_s")
        if _seconds(wall):
            self.started -= float(wall)
        times = meta.get("best_time")
        if isinstance(times, dict):
            self.best_time.update({k: v for k, v in times.items() if k in self.best and k not in self.best_time
                                   and _seconds(v)})

    def logged(self, step: int) -> bool:
        """Whether the eval of `step` is among the kept (a resumed run's earlier rows included)."""
        return self.step == step and "loss" in self.last

    def add(self, step: int, metrics: dict[str, float]) -> None:
        """Log `metrics` of `step` and keep them."""
        self.logger.eval(step, metrics)
        self.keep(step, metrics, time.perf_counter() - self.started)

    def keep(self, step: int, metrics: dict[str, float], elapsed: float | None = None) -> None:
        """`metrics` of `step` (measured `elapsed` seconds after the start; None: before a resume) as the last and in
        the best; several calls at one step (eval, then a diagnostic) make one `last`."""
        self.last = {**self.last, **metrics} if step == self.step else dict(metrics)
        self.step = step
        for k, v in metrics.items():
            if k in ("loss", "sampled_loss", *BITS.values(), "accuracy") and (
                    k not in self.best or (v > self.best[k] if k == "accuracy" else v < self.best[k])):
                self.best[k] = v
                if elapsed is None:
                    self.best_time.pop(k, None)
                else:
                    self.best_time[k] = round(elapsed, 3)


def _seconds(v: Any) -> bool:
    """Whether a checkpoint's recorded time is a number of seconds (a damaged one is left out)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
