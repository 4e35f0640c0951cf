"""The muTransfer recipe (Tensor Programs V, Yang et al. 2022, Sec. 4): tune the LR on a small proxy, train the
big target at the proxy's best LR, and run the same recipe under a comparison parametrization (SP by default,
whose best LR moves with width, so its transferred LR is off at the target).

    spec = TransferSpec(run=resolve({"model": "gpt", "param": "mup", "steps": 2000}),
                        lrs=parse_lrs("2^-12:2^-6:1"), proxy=(128, 6), target=(1024, 6), out=Path("runs/t"))
    arms = run_transfer(spec)  # one Arm per parametrization: the proxy sweep, the target run, the check

Every run is a sweep-engine run (zoo.sweeps.runner.run_sweep): the target is a vmapped program of one member
per target seed (plus the --check-target LRs), on the same batches as the proxy, so proxy and target losses are
measured alike, and a rerun skips what is finished. Runs live in OUT/<param>/proxy and OUT/<param>/target.

The proxy may also train at another batch size and horizon (proxy_batch, proxy_steps); a scaling policy
(zoo.policy) then maps its tuned settings to the target's (the LR, betas, epsilon, weight decay, warmup), and each
arm's `rules` say which policy produced each number.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from zoo.config import RunConfig
from zoo.outputs import check_own_folder
from zoo.policy import Change, Rule, ScalingPolicy
from zoo.sweeps import report
from zoo.sweeps.grid import check_positive, check_seeds, lr_key, valid_lrs
from zoo.sweeps.processes import check_processes
from zoo.sweeps.runner import SweepSpec, check_shapes, load_data, run_sweep
from zoo.train.lock import claim

CHECK_STEPS = 2  # the default --check-target grid: the transferred LR +- this many proxy grid steps


@dataclasses.dataclass
class TransferSpec:
    """run: the shared settings (its param is the arm under test; width and depth are ignored). proxy and
    target: (width, depth). The base width and depth default to the proxy's. compare: another parametrization
    tuned the same way, or None. check: None (no target sweep), [] (the transferred LR +- CHECK_STEPS grid steps)
    or the LRs to sweep at the target."""

    run: RunConfig
    lrs: list[float]
    proxy: tuple[int, int]
    target: tuple[int, int]
    out: Path
    compare: str | None = "sp"
    seeds: int = 1
    target_seeds: int = 1
    check: list[float] | None = None
    metric: str = "train_loss"
    chunk: int = 100
    processes: int = 1
    policy: ScalingPolicy | None = None
    proxy_batch: int | None = None  # None: the target's
    proxy_steps: int | None = None

    def __post_init__(self) -> None:
        """Refuse what cannot be a transfer: a target not bigger than the proxy (it must be at least the proxy's
        size in width and in depth, and bigger in one), sizes, seeds, a chunk or a process count below 1, a seed
        beyond int32, an LR that is not positive and finite, a comparison that is the parametrization under test (one
        arm would run under a report set up to compare two, both writing OUT/<param>); the LRs kept distinct and
        sorted."""
        (pw, pd), (tw, td) = self.proxy, self.target
        for what, v in (("the proxy width", pw), ("the proxy depth", pd), ("the target width", tw),
                        ("the target depth", td), ("the seed count", self.seeds),
                        ("the target seed count", self.target_seeds), ("the chunk", self.chunk),
                        ("the process count", self.processes)):
            check_positive(what, [v])
        check_seeds(self.run.loop.seed, self.seeds)
        check_seeds(self.run.loop.seed, self.target_seeds, "--target-seeds")
        for what, v in (("the proxy batch size", self.proxy_batch), ("the proxy steps", self.proxy_steps)):
            if v is not None:
                check_positive(what, [v])
        smaller = [axis for axis, t, p in (("width", tw, pw), ("depth", td, pd)) if t < p]
        if smaller:
            raise ValueError(f"the target (width {tw}, depth {td}) is smaller than the proxy (width {pw}, depth {pd}) "
                             f"in {' and '.join(smaller)}; muTransfer tunes a small proxy and transfers to a bigger "
                             "target")
        if self.proxy == self.target and not self.rescaled:
            raise ValueError(f"the proxy (width {pw}, depth {pd}) is the target; give a smaller --proxy-width or "
                             "--proxy-depth, or another --proxy-batch-size or --proxy-steps")
        if self.compare == self.run.param.name:
            raise ValueError(f"--compare {self.compare} is the parametrization under test (--param {self.compare}): "
                             "compare with another one, or give --compare none")
        if self.policy is not None:  # a fitted law is of one plugin: the comparison arm's LRs would move by it too
            for run in self.arms():
                try:
                    self.policy.check_run(run)
                except ValueError as e:
                    if run.param.name != self.compare:
                        raise
                    raise ValueError(f"the comparison arm (--compare {self.compare}): {e}; or give --compare "
                                     "none") from None
        self.lrs = valid_lrs(self.lrs)
        if self.check:
            self.check = valid_lrs(self.check)

    @property
    def rescaled(self) -> bool:
        """Whether the proxy trains at another batch size or horizon than the target."""
        loop = self.run.loop
        return (self.proxy_batch or loop.batch_size) != loop.batch_size or (
            self.proxy_steps is not None and self.proxy_steps != loop.steps)

    def proxy_run(self, run: RunConfig) -> RunConfig:
        """An arm's settings at the proxy's batch size and horizon."""
        return run.replace(batch_size=self.proxy_batch or run.loop.batch_size,
                           steps=self.proxy_steps or run.loop.steps)

    def change(self, data: Any) -> Change:
        """Proxy -> target, the horizons in steps (a target given in --epochs counted on `data`)."""
        from zoo.train.setup import epoch_steps

        steps = self.run.loop.steps or epoch_steps(self.run, data)
        size = data.size("train")
        return Change(self.proxy_batch or self.run.loop.batch_size, self.run.loop.batch_size,
                      self.proxy_steps or steps, steps, size, size, self.proxy[0], self.target[0], self.proxy[1],
                      self.target[1])

    def arms(self) -> list[RunConfig]:
        """The run settings of each parametrization: the one under test, then the comparison (no options)."""
        m = self.run.model
        base = dict(base_width=m.base_width or self.proxy[0], base_depth=m.base_depth or self.proxy[1])
        runs = [self.run.replace(**base)]
        if self.compare:
            runs.append(self.run.replace(param=self.compare, param_opt={}, **base))
        return runs


@dataclasses.dataclass
class Arm:
    """One parametrization's recipe. proxy: its LR sweep; seed_best: each seed's best log2 LR there; lr_log2: the
    transferred LR (None when every proxy LR diverged); target: the target's curve over the LRs it trained (the
    transferred one, plus the check LRs), seeds averaged; target_losses: per target seed at the transferred LR."""

    param: str
    param_opt: dict[str, Any]
    proxy: report.Summary
    seed_best: list[float | None]
    lr_log2: float | None
    target: report.Summary | None
    target_losses: list[float | None]
    checked: bool
    rules: list[Rule] = dataclasses.field(default_factory=list)  # the policy's map of each setting (none: kept)
    factor: float = 1.0  # target LR / proxy LR, the policy's

    @property
    def lr(self) -> float | None:
        """The transferred LR as the proxy's members held it (2^lr_log2 up to the rounding of lr_log2)."""
        return self.proxy.curves[0].best_lr

    @property
    def target_lr_log2(self) -> float | None:
        """The log2 LR the target trained at: the transferred one times the policy's factor."""
        return None if self.lr_log2 is None else self.lr_log2 + math.log2(self.factor)

    @property
    def target_curve(self) -> report.Curve | None:
        return None if self.target is None else self.target.curves[0]

    @property
    def transferred(self) -> int | None:
        """Index of the transferred LR in the target curve: the point of the same rounded log2 LR (the key members
        are matched by; np.isclose took a check LR within 1e-5 relative of it, 1.9531e-3 beside 2^-9, for it)."""
        c = self.target_curve
        if c is None or self.lr_log2 is None:
            return None
        return int(np.flatnonzero(c.log2_lr == lr_key(self.lr * self.factor))[0])

    @property
    def target_loss(self) -> float | None:
        """The target's loss at the transferred LR, seeds averaged; None if it diverged."""
        i = self.transferred
        return None if i is None or self.target_curve.diverged[i] else float(self.target_curve.loss[i])

    @property
    def target_diverged(self) -> bool:
        i = self.transferred
        return i is not None and bool(self.target_curve.diverged[i])

    @property
    def miss(self) -> float | None:
        """(transferred - the target's own best log2 LR) in proxy grid steps, when the target was checked."""
        c = self.target_curve
        if not self.checked or c is None or c.best is None or self.lr is None:
            return None
        return report.steps_between(math.log2(self.lr * self.factor), math.log2(c.best_lr), self.proxy.grid_step)


def check_lrs(lr_log2: float, grid_step: float, lrs: list[float] | None) -> list[float]:
    """The check LRs: `lrs` as given, or the transferred LR +- CHECK_STEPS proxy grid steps."""
    if lrs:
        return lrs
    return [2.0 ** (lr_log2 + k * grid_step) for k in range(-CHECK_STEPS, CHECK_STEPS + 1)]


def select(records: list[dict[str, Any]], size: tuple[int, int], lrs: list[float], seeds: range
           ) -> list[dict[str, Any]]:
    """The records of this (width, depth), these LRs and seeds (a sweep dir may also hold earlier runs' members)."""
    keys = {lr_key(lr) for lr in lrs}
    return [r for r in records
            if (r["width"], r["depth"]) == size and lr_key(r["lr"]) in keys and r["seed"] in seeds]


def run_arm(spec: TransferSpec, run: RunConfig, data: Any, echo: Callable[[str], None]) -> Arm:
    """The proxy sweep, its best LR, and the target trained there (and at the check LRs)."""
    name, seed = run.param.name, run.loop.seed
    out = spec.out / name
    (pw, pd), (tw, td) = spec.proxy, spec.target
    seeds = range(seed, seed + spec.seeds)
    proxy_spec = SweepSpec(run=spec.proxy_run(run), lrs=spec.lrs, out=out / "proxy", widths=[pw], depths=[pd],
                           seeds=spec.seeds, chunk=spec.chunk, processes=spec.processes)
    proxy_records = select(run_sweep(proxy_spec, lambda s: echo(f"[{name} proxy] {s}"), data),
                           spec.proxy, spec.lrs, seeds)
    proxy = report.summarize(proxy_records, spec.metric)
    seed_best = [report.summarize([r for r in proxy_records if r["seed"] == s], spec.metric).curves[0].best_log2_lr
                 for s in seeds]
    best = proxy.curves[0].best_log2_lr
    if best is None:
        echo(f"[{name}] every proxy LR diverged: no LR to transfer")
        return Arm(name, run.param.options, proxy, seed_best, None, None, [], spec.check is not None)
    run, rules = target_run(spec, run, proxy.curves[0].best_lr, data)  # the proxy's own LR: 2^best is another
    lr = run.optim.lr  # float32 where it is not a power of 2; times the policy's factor
    target_lrs = [lr]
    if spec.check is not None:  # one member per rounded log2 LR: a check LR equal to the transferred one is it
        by_key = {lr_key(x): x for x in check_lrs(math.log2(lr), proxy.grid_step, spec.check)}
        target_lrs = sorted({**by_key, lr_key(lr): lr}.values())
    target_seeds = range(seed, seed + spec.target_seeds)
    target_spec = SweepSpec(run=run, lrs=target_lrs, out=out / "target", widths=[tw], depths=[td],
                            seeds=spec.target_seeds, chunk=spec.chunk, processes=spec.processes)
    target_records = select(run_sweep(target_spec, lambda s: echo(f"[{name} target] {s}"), data),
                            spec.target, target_lrs, target_seeds)
    target = report.summarize(target_records, spec.metric)  # first: it checks the records hold what is read here
    at_lr = sorted((r for r in target_records if lr_key(r["lr"]) == lr_key(lr)), key=lambda r: r["seed"])
    losses = [None if r["diverged"] or r[spec.metric] is None else float(r[spec.metric]) for r in at_lr]
    return Arm(name, run.param.options, proxy, seed_best, best, target, losses, spec.check is not None, rules,
               lr / proxy.curves[0].best_lr)


def target_run(spec: TransferSpec, run: RunConfig, lr: float, data: Any) -> tuple[RunConfig, list[Rule]]:
    """An arm's target settings: the proxy's tuned `lr` and its optimizer settings mapped by the policy (none: kept),
    and the rules that mapped them."""
    import zoo.policy

    policy = spec.policy or zoo.policy.get("none")
    optim, rules = policy.apply(dataclasses.replace(run.optim, lr=lr), spec.change(data))
    return run.replace(**{r.setting: getattr(optim, r.setting) for r in rules}), rules


def target_config(spec: TransferSpec, run: RunConfig, lr: float, rules: list[Rule] | None = None
                  ) -> dict[str, Any]:
    """The target as a train.py config file (`train.py --config FILE`): the arm's settings at the target size,
    its base size, the target's LR `lr` and the settings a policy mapped (`rules`), for a run with checkpoints and
    curves; with `rules`, its `provenance` (which train.py leaves out of the settings) says which policy produced each
    number."""
    mapped = {r.setting: r.target for r in rules or []}
    config = run.replace(width=spec.target[0], depth=spec.target[1], **{**mapped, "lr": lr}).to_json()
    return {**config, "provenance": provenance(spec, rules)} if rules else config


def provenance(spec: TransferSpec, rules: list[Rule]) -> dict[str, Any]:
    """Which policy produced each target setting from which proxy value, by what law; the proxy's batch and steps."""
    policy = spec.policy.spec() if spec.policy else {"name": "none", "options": {}}
    change = spec.proxy_batch or spec.run.loop.batch_size, spec.proxy_steps or spec.run.loop.steps
    return {"tool": "zoo.transfer", "policy": policy, "proxy": {"width": spec.proxy[0], "depth": spec.proxy[1],
                                                                "batch_size": change[0], "steps": change[1]},
            "settings": {r.setting: r.record() for r in rules}}


def run_transfer(spec: TransferSpec, data: Any = None, echo: Callable[[str], None] = print) -> list[Arm]:
    """The recipe under spec.run.param, then under spec.compare; the data is loaded once for all runs. This process
    holds spec.out meanwhile (another transfer into it is refused)."""
    check_own_folder(spec.out, "--out", "transfer")
    check_processes(spec.processes)
    if data is None:
        data = load_data(spec.run)
    for run in spec.arms():  # every size of every arm is one the model takes, and the policy maps it, before any trains
        target, _ = target_run(spec, run, spec.lrs[0], data)  # a law's factor float32 cannot hold: refused now
        for size, sized in ((spec.proxy, spec.proxy_run(run)), (spec.target, target)):  # each at its batch and steps
            check_shapes(SweepSpec(run=sized, lrs=spec.lrs, out=spec.out, widths=[size[0]], depths=[size[1]]), data)
    with claim(spec.out, echo, what="transfer", flag="--out"):
        return [run_arm(spec, run, data, echo) for run in spec.arms()]
