"""Learning-rate sweeps for the papers' transfer figures, judged on the training loss as the papers plot it.

The members (arm x LR x seed, an arm being a set of plugin options) of each shape train as one vmapped program
(zoo.sweeps.engine.MemberTrainer with a program family) on batches all members share; a member's loss is its mean
training loss over the last 10% of steps, and a member that blew up is marked diverged (zoo.sweeps.runner.
summarize). There is no eval pass: the figures are of training loss. The records have zoo.sweeps.report's format,
so `report.summarize` gives the best LR per size and the transfer score.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zoo import models
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.sweeps import report
from zoo.sweeps.engine import MemberTrainer
from zoo.sweeps.grid import members
from zoo.sweeps.runner import summarize
from zoo.train.step import Program, build_program


def log(text: str) -> None:
    """Progress of a long run, on stderr."""
    print(text, file=sys.stderr, flush=True)


def model_config(model_name: str, data: Any, **overrides: Any) -> Any:
    """The model's config for `data` (input shape, classes or vocabulary, context) with `overrides`."""
    fields = {f.name for f in dataclasses.fields(models.config(model_name))}
    facts = {"in_shape": tuple(data.in_shape), "num_classes": data.num_classes, "vocab_size": data.num_classes,
             "seq_len": data.seq_len}
    return models.config(model_name, **{**{k: v for k, v in facts.items() if k in fields and v is not None},
                                        **overrides})


def family(model_name: str, cfg: Any, plugin: Callable[[dict[str, Any]], Parametrization],
           optim_cfg: OptimConfig) -> Callable[[dict[str, Any]], Program]:
    """options -> the Program of `model_name` under plugin(options) (a MemberTrainer program family)."""

    def make(options: dict[str, Any]) -> Program:
        p = plugin(options)
        return build_program(lambda r: models.create(model_name, cfg, p, r), p, optim_cfg)

    return make


def sweep(model_name: str, plugin: Callable[[dict[str, Any]], Parametrization], arms: dict[str, dict[str, float]],
          optim_cfg: OptimConfig, data: Any, shapes: Sequence[tuple[int, int]], log2_lrs: Sequence[float], *,
          steps: int, batch_size: int, seeds: int = 1, fast_compile: bool = False, echo: Callable[[str], None] = log,
          **model_opts: Any) -> list[dict[str, Any]]:
    """Every arm (plugin options) x LR x seed of each shape in one vmapped program; one record per member: arm,
    width, depth, lr, log2_lr, seed, train_loss (mean of the last 10% of steps) and diverged. fast_compile: for
    runs of a few steps (MemberTrainer)."""
    records = []
    lr_one, seed_one = members([2.0**x for x in log2_lrs], seeds)
    labels = [a for a in arms for _ in lr_one]
    lrs, member_seeds = np.tile(lr_one, len(arms)), np.tile(seed_one, len(arms))
    options = {k: np.array([arms[a][k] for a in labels]) for k in next(iter(arms.values()))}
    chance = math.log(data.num_classes)
    for width, depth in shapes:
        t0 = time.perf_counter()
        cfg = model_config(model_name, data, width=width, depth=depth, **model_opts)
        trainer = MemberTrainer(family(model_name, cfg, plugin, optim_cfg), data, batch_size, chunk=min(steps, 100),
                                fast_compile=fast_compile)
        _, losses = trainer.train(trainer.init(lrs, member_seeds, options), steps)
        for i, arm in enumerate(labels):
            loss, diverged = summarize(losses[:, i], chance)
            records.append({"arm": arm, "width": width, "depth": depth, "lr": float(lrs[i]),
                            "log2_lr": math.log2(lrs[i]), "seed": int(member_seeds[i]), "train_loss": loss,
                            "diverged": diverged, "eval_accuracy": None})
        echo(f"  width {width} depth {depth}: {len(lrs)} members, {steps} steps, {time.perf_counter() - t0:.0f} s")
    return records


def by_arm(records: list[dict[str, Any]], arm: str) -> list[dict[str, Any]]:
    return [r for r in records if r["arm"] == arm]


def best_spread(summary: report.Summary, axis: str = "depth", sizes: Sequence[int] | None = None
                ) -> tuple[float | None, str]:
    """How far the best LR moves over `sizes` (default: all) of a summary, max - min of the best log2 LR in grid steps,
    when the sweep located it at each: (None, why) where fewer than two sizes are given, every LR diverged at one, or
    one's best lies on the grid's edge (the loss may fall further beyond it, so a best that stays on the edge
    measures the grid, not the optimum). An empty why otherwise."""
    curves = [c for c in summary.curves if sizes is None or getattr(c, axis) in sizes]
    if len(curves) < 2:
        return None, f"one {axis} is no spread: the LR cannot move over fewer than two"
    lost = [getattr(c, axis) for c in curves if c.best is None or c.at_edge]
    if lost:
        return None, (f"no located best LR at {axis} {', '.join(map(str, lost))}: every LR diverged or the best is "
                      "at the grid's edge (widen the grid)")
    best = [math.log2(c.best_lr) for c in curves]
    return report.steps_between(max(best), min(best), summary.grid_step), ""


def by_size(summary: report.Summary, attr: str, axis: str = "depth") -> dict[int, float | None]:
    """Size (depth or width) -> a curve's `attr` (best_log2_lr, best_loss) over a summary's curves."""
    return {getattr(c, axis): getattr(c, attr) for c in summary.curves}
