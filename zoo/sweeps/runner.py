"""A sweep: for each shape (width, depth), all LR x seed members train as one program; shapes run one
after another, the next one's programs compiled in the background while the current one trains (zoo.sweeps.ahead;
every plugin, LR grid and seed of a shape shares its programs, kept in JAX's persistent cache), results appended as
each shape finishes, and finished members skipped on a rerun."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import zoo.data
import zoo.models
from zoo.config import RunConfig
from zoo.sweeps import results
from zoo.sweeps.ahead import Ahead
from zoo.sweeps.engine import MemberTrainer
from zoo.sweeps.grid import check_positive, check_seeds, lr_key, members, valid_lrs
from zoo.sweeps.processes import MemberPool, check_processes, train_members, workers
from zoo.train import memory
from zoo.train.compiled import abstract_batch
from zoo.train.setup import setup

# Settings set per shape and member (the rest that shapes results, the run's identity, is the sweep's own).
TAIL = 0.1  # the reported train loss averages the last 10% of steps
RISE, BLOWUP = 1.2, 10.0  # divergence bounds (see summarize)


@dataclasses.dataclass
class SweepSpec:
    """What to sweep. widths/depths empty: the model's default. base_width/base_depth None: the smallest."""

    run: RunConfig
    lrs: list[float]
    out: Path
    widths: list[int] = dataclasses.field(default_factory=list)
    depths: list[int] = dataclasses.field(default_factory=list)
    seeds: int = 1
    chunk: int = 100
    processes: int = 1

    def __post_init__(self) -> None:
        """Refuse a grid that cannot run: an LR that is not positive and finite, a size, seed count, chunk or
        process count below 1, a seed beyond int32; the LRs kept distinct and sorted (a repeated one trained a member
        twice)."""
        self.lrs = valid_lrs(self.lrs)
        for what, values in (("a width", self.widths), ("a depth", self.depths), ("the seed count", [self.seeds]),
                             ("the chunk", [self.chunk]), ("the process count", [self.processes])):
            check_positive(what, values)
        check_seeds(self.run.loop.seed, self.seeds)

    def sizes(self) -> tuple[list[int], list[int]]:
        default, m = zoo.models.config(self.run.model.name, **self.run.model.options), self.run.model
        return (sorted(self.widths or [m.width or default.width]), sorted(self.depths or [m.depth or default.depth]))

    def bases(self) -> tuple[int, int]:
        """The base width and depth: the run's, else the smallest size swept."""
        widths, depths = self.sizes()
        return self.run.model.base_width or widths[0], self.run.model.base_depth or depths[0]

    def shapes(self) -> list[RunConfig]:
        """The run config of every shape, at the base sizes."""
        widths, depths = self.sizes()
        base_width, base_depth = self.bases()
        return [self.run.replace(width=w, depth=d, base_width=base_width, base_depth=base_depth)
                for w in widths for d in depths]

    def settings(self, steps: int) -> dict[str, Any]:
        """What every shape shares (stored in DIR/sweep.json); the grid itself may grow between runs."""
        run = {k: v for k, v in json.loads(json.dumps(self.run.identity())).items() if k not in results.PER_MEMBER}
        base_width, base_depth = self.bases()
        return {**run, "steps": steps, "base_width": base_width, "base_depth": base_depth}


def load_data(run: RunConfig) -> Any:
    """The data of a sweep: members gather their batches on the device, so the set must fit in memory."""
    data = zoo.data.load(run.data)
    if data.streamed:
        raise ValueError(f"sweeps hold their data on the device; {run.data.name} streams: sweep on a subset that fits")
    return data


def run_sweep(spec: SweepSpec, echo: Callable[[str], None] = print, data: Any = None) -> list[dict[str, Any]]:
    """Train every missing member of every shape; returns all records of the sweep in spec.out, which this process
    holds meanwhile (another sweep into it is refused). data: the sweep's data, loaded from spec.run when None; worker
    processes (spec.processes > 1) load their own from spec.run, so a `data` other than that one trains them on
    other examples than this process's members."""
    run = spec.run
    if data is None:
        data = load_data(run)
    settings = spec.settings(check_shapes(spec, data))
    check_processes(spec.processes)
    with results.open_dir(spec.out, echo), workers(spec.processes) as pool:
        results.check_settings(spec.out, settings, echo,
                               base_defaulted=run.model.base_width is None or run.model.base_depth is None)
        results.check_data(spec.out, run.data.name, data.digest("train"))
        earlier = results.read(spec.out)
        for r in earlier:  # an edited record is refused before any member trains, not by the report after
            results.check_record(r)
        finished = results.done(earlier)
        lr_all, seed_all = members(spec.lrs, spec.seeds)
        seed_all = seed_all + run.loop.seed
        work = [(cfg, [i for i in range(len(lr_all)) if (cfg.model.width, cfg.model.depth, lr_key(lr_all[i]),
                                                         int(seed_all[i])) not in finished])
                for cfg in spec.shapes()]
        work = [(cfg, lr_all[todo], seed_all[todo]) for cfg, todo in work]
        ahead: dict[int, Ahead] = {}
        for i, (cfg, lrs, seeds) in enumerate(work):
            name = f"width={cfg.model.width} depth={cfg.model.depth}"
            if not len(lrs):
                echo(f"{name}: done, skipped")
                continue
            trainer = ahead.pop(i).result() if i in ahead else None
            later = next((j for j in range(i + 1, len(work)) if len(work[j][1])), None)
            if pool is None and later is not None:  # worker processes compile their own
                ahead[later] = Ahead(functools.partial(compiled_trainer, *work[later], spec.chunk, data))
                after = work[later][0].model
                echo(f"compiling width={after.width} depth={after.depth} while {name} trains")
            records = run_shape(cfg, data, lrs, seeds, spec.chunk, pool, trainer)
            results.append(spec.out, records)
            r = records[0]
            echo(f"{name}: {len(lrs)} members, compile {r['compile_s']:.1f} s, "
                 f"train+eval {r['run_s']:.1f} s, {sum(x['diverged'] for x in records)} diverged")
        return results.read(spec.out)


def check_shapes(spec: SweepSpec, data: Any) -> int:
    """Every shape set up (model, plugin, program) and its forward pass traced on an abstract batch (nothing
    compiled), before any trains and before DIR is written, as train.py does: a size the model refuses (a width that
    is no multiple of its head dim) or an option its forward pass refuses (--model-opt activation=nope) fails at
    once, not after the shapes before it, and so does a batch the training set cannot fill; returns the steps of a
    run."""
    data.indices("train", 0, spec.run.loop.batch_size, spec.run.loop.seed)
    steps = []
    for cfg in spec.shapes():
        s = setup(cfg, data)
        memory.forward_bytes(s.program, abstract_batch(s))
        steps.append(s.steps)
    return steps[0]


def run_shape(cfg: RunConfig, data: Any, lrs: np.ndarray, seeds: np.ndarray, chunk: int = 100,
              pool: MemberPool | None = None, trainer: MemberTrainer | None = None) -> list[dict[str, Any]]:
    """Train the members (lrs[i], seeds[i]) of one shape as one program over the devices (`trainer`: this shape's,
    its programs compiled ahead: `compiled_trainer`), or split over a pool's worker processes
    (zoo.sweeps.processes); one record per member, with the seconds its programs took to compile, ahead or not."""
    s = setup(cfg, data)
    t0 = time.perf_counter()
    if pool is not None:
        result = pool.run(functools.partial(shape_trainer, cfg, chunk), lrs, seeds, s.steps)
    else:
        trainer = trainer or shape_trainer(cfg, chunk, data, s.program)
        result = train_members(trainer, lrs, seeds, s.steps)
        result.compile_s = trainer.compile_s
    wall = time.perf_counter() - t0
    bound = math.log(data.num_classes)
    records = []
    for i in range(len(lrs)):
        train_loss, diverged = summarize(result.losses[:, i], bound)
        diverged = diverged or not np.isfinite(result.evals["loss"][i])
        records.append({"width": s.cfg.model.width, "depth": s.cfg.model.depth, "lr": float(lrs[i]),
                        "log2_lr": math.log2(lrs[i]),
                        "seed": int(seeds[i]), "steps": s.steps, "train_loss": train_loss,
                        "eval_loss": float(result.evals["loss"][i]),
                        "eval_accuracy": float(result.evals["accuracy"][i]), "diverged": bool(diverged),
                        "members": len(lrs), "compile_s": round(result.compile_s, 3),
                        "run_s": round(result.init_s + result.run_s, 3), "wall_s": round(wall, 3)})
    return records


def compiled_trainer(cfg: RunConfig, lrs: np.ndarray, seeds: np.ndarray, chunk: int, data: Any) -> MemberTrainer:
    """The shape's trainer with every program its members run compiled (a sweep's next shape, in the background)."""
    s = setup(cfg, data)
    trainer = shape_trainer(cfg, chunk, data, s.program)
    trainer.prepare(lrs, seeds, s.steps)
    return trainer


def shape_trainer(cfg: RunConfig, chunk: int, data: Any = None, program: Any = None) -> MemberTrainer:
    """The vmapped trainer of one shape's members (a worker process builds its own: data and program None)."""
    if data is None:
        data = load_data(cfg)
    if program is None:
        program = setup(cfg, data).program
    return MemberTrainer(program, data, cfg.loop.batch_size, eval_batch_size=cfg.loop.eval_batch_size, chunk=chunk,
                         data_seed=cfg.loop.seed)


def summarize(losses: np.ndarray, chance: float) -> tuple[float, bool]:
    """(mean train loss over the last 10% of steps, diverged).

    Diverged: a NaN/inf loss, a final loss RISE times above both the first step's and chance level (log
    classes), or one above BLOWUP times chance (a forward pass that exploded, whatever the first step's loss).
    """
    tail = losses[-max(1, int(round(len(losses) * TAIL))):]
    final = float(np.mean(tail))
    bound = min(RISE * max(float(losses[0]), chance), BLOWUP * chance)
    return final, bool(not np.all(np.isfinite(losses)) or final > bound)
