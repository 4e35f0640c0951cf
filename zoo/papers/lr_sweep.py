"""Learning-rate sweeps for the papers' transfer figures, judged on the training loss as the papers plot it.

The members (arm x LR x seed, an arm being a set of plugin options) of each shape train as one vmapped program
(zoo.sweeps.engine.MemberTrainer with a program family) on batches all members share, or split over worker processes
as `python -m zoo.sweep --processes` splits them (`python -m zoo.papers run NAME --processes N`; the same numbers:
each member's init, LR and batches are its own wherever it trains); a member's loss is its mean
training loss over the last 10% of steps, and a member that blew up is marked diverged (zoo.sweeps.runner.
summarize). There is no eval pass: the figures are of training loss. The records have zoo.sweeps.report's format,
so `report.summarize` gives the best LR per size and the transfer score.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import zoo.param
from zoo import models
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.sweeps import report
from zoo.sweeps.engine import MemberTrainer
from zoo.sweeps.grid import members
from zoo.sweeps.processes import MemberPool, Result, train_members, workers
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


@dataclasses.dataclass(frozen=True)
class Plugin:
    """options -> zoo.param.get(name, **fixed, **options): a plugin whose member options are traced, picklable for
    a sweep's worker processes (zoo.sweeps.processes)."""

    name: str
    fixed: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __call__(self, options: dict[str, Any]) -> Parametrization:
        return zoo.param.get(self.name, **self.fixed, **options)


@dataclasses.dataclass(frozen=True)
class Family:
    """options -> the Program of `model_name` (config `cfg`) under plugin(options) (a MemberTrainer program family;
    picklable where the plugin is: a `Plugin` or a module-level function)."""

    model_name: str
    cfg: Any
    plugin: Callable[[dict[str, Any]], Parametrization]
    optim_cfg: OptimConfig

    def __call__(self, options: dict[str, Any]) -> Program:
        p = self.plugin(options)
        return build_program(lambda r: models.create(self.model_name, self.cfg, p, r), p, self.optim_cfg)


def member_trainer(family: Family, load: Callable[[], Any], batch_size: int, chunk: int, fast_compile: bool,
                   data: Any = None) -> MemberTrainer:
    """The vmapped trainer of one shape's members (a worker process loads its own data: `data` None)."""
    return MemberTrainer(family, load() if data is None else data, batch_size, chunk=chunk, fast_compile=fast_compile)


def train_shape(pool: MemberPool | None, make: Callable[..., MemberTrainer], data: Any, lrs: np.ndarray,
                seeds: np.ndarray, steps: int, options: dict[str, np.ndarray], **evaluate: Any) -> Result:
    """The members (`lrs[i]`, `seeds[i]`, `options[k][i]`) of the trainer `make(data)` from fresh states through `steps`
    steps, in the pool's worker processes (each building `make()`, loading its own data) or in this one;
    `evaluate`: train_members' eval arguments."""
    if pool is not None:
        return pool.run(make, lrs, seeds, steps, options=options, **evaluate)
    return train_members(make(data), lrs, seeds, steps, options=options, **evaluate)


def sweep(model_name: str, plugin: Callable[[dict[str, Any]], Parametrization], arms: dict[str, dict[str, float]],
          optim_cfg: OptimConfig, load: Callable[[], Any], shapes: Sequence[tuple[int, int]],
          log2_lrs: Sequence[float], *, steps: int, batch_size: int, seeds: int = 1, fast_compile: bool = False,
          processes: int = 1, echo: Callable[[str], None] = log, **model_opts: Any) -> list[dict[str, Any]]:
    """Every arm (plugin options) x LR x seed of each shape in one vmapped program, or split over `processes`
    worker processes as `python -m zoo.sweep --processes` splits its members (zoo.sweeps.processes: `plugin` and
    `load`, the data's loader, must then pickle); one record per member: arm, width, depth, lr, log2_lr, seed,
    train_loss (mean of the last 10% of steps) and diverged. fast_compile: for runs of a few steps (MemberTrainer)."""
    records = []
    lr_one, seed_one = members([2.0**x for x in log2_lrs], seeds)
    labels = [a for a in arms for _ in lr_one]
    lrs, member_seeds = np.tile(lr_one, len(arms)), np.tile(seed_one, len(arms))
    options = {k: np.array([arms[a][k] for a in labels]) for k in next(iter(arms.values()))}
    data = load()
    chance = math.log(data.num_classes)
    with workers(processes) as pool:
        for width, depth in shapes:
            cfg = model_config(model_name, data, width=width, depth=depth, **model_opts)
            make = functools.partial(member_trainer, Family(model_name, cfg, plugin, optim_cfg), load, batch_size,
                                     min(steps, 100), fast_compile)
            t0 = time.perf_counter()
            result = train_shape(pool, make, data, lrs, member_seeds, steps, options, evaluate=False)
            for i, arm in enumerate(labels):
                loss, diverged = summarize(result.losses[:, i], chance)
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
