"""Sweep dirs (zoo.sweep's --out: sweep.json and results.jsonl, zoo.sweeps.results) read as grids per size.

A size is a point of the axes width, depth (per member), batch_size and steps (per dir); the grids are the swept
hyperparameters, the LR (per member) and the weight decay (per dir). Every other setting must be the same in every
dir (one model, plugin, optimizer, data and recipe), but for those a scaling policy maps with the batch and the
horizon (MAPPED): without a policy they must agree too; with one, each dir's must be the proxy's mapped by it, and
its LRs and weight decays are read back in the proxy's units (divided by the policy's factors), so the law fitted is
what the policy leaves.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from zoo.config import RunConfig
from zoo.models import MODELS
from zoo.option_defaults import changed_settings
from zoo.param import PLUGINS
from zoo.policy.base import Change, ScalingPolicy
from zoo.sweeps import results
from zoo.sweeps.grid import lr_key
from zoo.sweeps.results import check_record

AXES = ("width", "depth", "batch_size", "steps")
MAPPED = ("b1", "b2", "eps", "momentum", "muon_beta", "warmup")
FREE = ("batch_size", "steps", "weight_decay", *MAPPED)  # may differ between dirs
FIRST = ("model", "param", "optimizer", "data", "model_opt", "param_opt", "base_width", "base_depth")  # named first
INPUT_ADVICE = "give the folder of a whole sweep (python -m zoo.sweep --out), or rerun the sweep into a new one"


@dataclasses.dataclass
class Grid:
    """One size: log2 LR grid, weight decays (log2 where swept, else the one value), loss [lr, wd, seed] (NaN where
    missing or diverged) and diverged [lr, wd] (a seed diverged there)."""

    size: dict[str, int]
    lr: np.ndarray
    wd: np.ndarray
    loss: np.ndarray
    diverged: np.ndarray
    seeds: tuple[int, ...] = ()  # the loss's seed columns
    uneven: tuple[int, ...] = ()  # seeds left out: missing at some point (a mean over others there biases the curve)

    def label(self, axes: tuple[str, ...]) -> str:
        return ", ".join(f"{a} {self.size[a]}" for a in axes) or "the one size"


@dataclasses.dataclass
class Sweeps:
    """The dirs' grids, the axes that vary, whether the wd was swept, their shared settings (`run`) and where the
    numbers came from."""

    grids: list[Grid]
    axes: tuple[str, ...]
    wd_swept: bool
    run: RunConfig
    dirs: list[str]
    metric: str
    unreadable: dict[str, int] = dataclasses.field(default_factory=dict)  # per dir: lines skipped (results.unreadable)
    notes: list[str] = dataclasses.field(default_factory=list)  # what was read but could not be checked

    def warnings(self) -> list[str]:
        """What could not be checked (`notes`), and the lines of the dirs' results.jsonl that were skipped (a sweep's
        torn last line, one edited by hand, e.g. an lr of 0, or a member's second line with other numbers)."""
        return self.notes + [results.skipped_lines(n, f"{d}/{results.RESULTS}") for d, n in self.unreadable.items()
                             if n]


def run_config(d: Path, settings: dict[str, Any] | None = None) -> RunConfig:
    """The run config of sweep dir `d` (its settings, read unless given); a value no run takes (a batch size of -3
    edited in) is named by its file, not by a flag never given."""
    where = str(Path(d) / results.SETTINGS)
    try:
        return RunConfig.from_json(results.read_settings(d, INPUT_ADVICE) if settings is None else settings, where)
    except ValueError as e:
        raise ValueError(str(e) if where in str(e) else f"{where}: {e}") from None


def load(dirs: list[Path], metric: str = "train_loss", policy: ScalingPolicy | None = None,
         proxy: tuple[int | None, int | None] = (None, None)) -> Sweeps:
    """The grids of `dirs` (each a zoo.sweep --out); `policy`: read LRs and wds in the proxy's units, the proxy at
    batch and steps `proxy` (what is not given: `proxy_of` the dirs)."""
    if not dirs:
        raise ValueError("give one or more sweep dirs")
    found = [(d, results.read_settings(d, INPUT_ADVICE), results.read(d)) for d in dirs]
    for d, s, rec in found:
        if not rec:
            why = "is missing" if not (Path(d) / results.RESULTS).exists() else "holds no readable record"
            raise ValueError(f"{d} holds no results ({results.RESULTS} {why}): run the sweep first")
        repeated = results.line_faults(d)[1]
        if repeated:  # the other sweep's members that this one never ran would be fitted as its own
            raise ValueError(f"{d}/{results.RESULTS} gives {repeated} member(s) twice with other numbers: the results "
                             f"of two sweeps mixed (one's {results.RESULTS} appended to the other's?), which the fit "
                             f"cannot tell apart; {INPUT_ADVICE}")
        for registry, key in ((MODELS, "model"), (PLUGINS, "param")):  # a law of a model no run is refused by
            if ":" not in str(s.get(key)) and s.get(key) not in registry.names():  # (module:Object: the user's code)
                raise ValueError(f"{Path(d) / results.SETTINGS}: unknown {registry.what} {s.get(key)!r}; choose from "
                                 f"{', '.join(registry.names())}")
        for key in ("batch_size", "steps"):  # each a size of the law (null: the model's default, which no dir names)
            if type(s.get(key)) is not int:
                raise ValueError(f"{Path(d) / results.SETTINGS}: {key} must be an integer, got {s.get(key)!r}")
        run_config(d, s)
    check_same(found)
    proxy = proxy_of({(s["batch_size"], s["steps"]) for _, s, _ in found}, proxy)
    notes = check_mapped(found, policy, proxy)
    points: dict[tuple, dict[tuple, list]] = {}
    origin: dict[tuple, Path] = {}  # (size, lr, wd, seed) -> the dir that holds it
    for d, s, rec in found:
        lr_factor, wd_factor = factors(s, policy, proxy)
        wd = float(f"{decay(s) / wd_factor:.10g}")  # one key for a wd the factors reach by two roundings
        for r in rec:
            try:  # each field the fit reads, of its type (a record edited by hand: a width "16", an lr of NaN or 0)
                check_record(r, metric)
            except ValueError as e:
                raise ValueError(f"{d}: {e}") from None
            size = (r["width"], r["depth"], s["batch_size"], s["steps"])
            loss = None if r["diverged"] or r[metric] is None else float(r[metric])
            key = (lr_key(r["lr"] / lr_factor), wd)
            first = origin.setdefault((size, *key, r["seed"]), d)
            if first != d:
                raise ValueError(f"{first} and {d} both hold the member at {member_label(size, r)}: the same sizes "
                                 "and seeds twice (a copied or rerun sweep), and one would replace the other; give "
                                 "one of them")
            points.setdefault(size, {}).setdefault(key, []).append((r["seed"], loss))
    grids = [grid(dict(zip(AXES, size, strict=True)), by_point) for size, by_point in sorted(points.items())]
    axes = tuple(a for a in AXES if len({g.size[a] for g in grids}) > 1)
    notes += [f"{g.label(axes)}: seed(s) {', '.join(map(str, g.uneven))} missing at some of its points (a sweep "
              f"stopped, or rerun with other seeds or LRs): its optimum averages the seeds at every point, "
              f"{', '.join(map(str, g.seeds))}" for g in grids if g.uneven]
    wd_swept = any(len(g.wd) > 1 for g in grids)
    if wd_swept:
        for g in grids:
            if np.any(g.wd <= 0):
                raise ValueError(f"a weight-decay sweep includes wd 0 at {g.label(axes)}: its optimum is fitted in "
                                 "log2 wd; sweep positive weight decays")
            g.wd = np.log2(g.wd)
    run = run_config(dirs[0], found[0][1])
    return Sweeps(grids, axes, wd_swept, run, [str(d) for d in dirs], metric,
                  {str(d): results.unreadable(d) for d in dirs}, notes)


def proxy_of(sizes: set[tuple[int, int]], given: tuple[int | None, int | None]) -> tuple[int, int]:
    """The proxy's (batch size, steps) among the dirs' `sizes`: as given; a batch size not given, the smallest of the
    dirs at the given steps (else of all); steps not given, the fewest of the dirs at that batch size (else of all).
    So a batch sweep at a fixed number of examples, whose steps fall as its batch grows, has its proxy in its
    smallest batch's dir, not at that batch with the largest batch's steps, a pair no dir holds."""
    batch, steps = given
    if batch is None:
        batch = min((b for b, t in sizes if t == steps), default=min(b for b, _ in sizes))
    if steps is None:
        steps = min((t for b, t in sizes if b == batch), default=min(t for _, t in sizes))
    return batch, steps


def member_label(size: tuple, record: dict[str, Any]) -> str:
    return ", ".join(f"{a} {v}" for a, v in zip(AXES, size, strict=True)) + f", lr {record['lr']:g}, seed " \
        f"{record['seed']}"


def grid(size: dict[str, int], by_point: dict[tuple, list]) -> Grid:
    """One size's grid, of the seeds at every (lr, wd) point: seeds differ by a shared offset, so a point averaging
    fewer seeds than its neighbours moved the parabola's vertex (0.18 log2 LR, outside its own 95% interval)."""
    lrs = np.array(sorted({k[0] for k in by_point}))
    wds = np.array(sorted({k[1] for k in by_point}))
    present = [{s for s, _ in v} for v in by_point.values()]
    seeds = sorted(set.intersection(*present))
    uneven = tuple(sorted(set.union(*present) - set(seeds)))
    if not seeds:
        where = ", ".join(f"{a} {v}" for a, v in size.items())
        raise ValueError(f"{where}: no seed was trained at every LR and weight decay; {INPUT_ADVICE}")
    by_point = {k: [(s, v) for s, v in members if s in seeds] for k, members in by_point.items()}
    loss = np.full((len(lrs), len(wds), len(seeds)), np.nan)
    diverged = np.zeros((len(lrs), len(wds)), bool)
    for (lr, wd), members in by_point.items():
        i, j = int(np.searchsorted(lrs, lr)), int(np.searchsorted(wds, wd))
        for seed, value in members:
            if value is None:
                diverged[i, j] = True
            else:
                loss[i, j, seeds.index(seed)] = value
    return Grid(size, lrs, wds, loss, diverged, tuple(seeds), uneven)


def decay(settings: dict[str, Any]) -> float:
    """The weight decay a dir's members applied (zoo.optim.OptimConfig.decay: 0.1 for adamw when not given)."""
    wd = settings.get("weight_decay")
    return float(wd) if wd is not None else 0.1 if settings.get("optimizer") == "adamw" else 0.0


def check_same(found: list[tuple[Path, dict, list]]) -> None:
    """One line when two dirs differ in a setting that is no size axis nor mapped by a policy."""
    (d0, s0, _), rest = found[0], found[1:]
    for d, s, _ in rest:
        differ = sorted((k for k in changed_settings(s0, s) if k not in FREE),
                        key=lambda k: (k not in FIRST, FIRST.index(k) if k in FIRST else 0, k))
        if differ:
            k = differ[0]
            raise ValueError(f"the sweep dirs differ in {', '.join(differ)} ({k} {s0.get(k)!r} in {d0}, {s.get(k)!r} "
                             f"in {d}): zoo.fit fits the sweeps of one model and recipe, over batch size, steps, "
                             "weight decay, width and depth")


def factors(settings: dict[str, Any], policy: ScalingPolicy | None, proxy: tuple[int, int]) -> tuple[float, float]:
    """(lr'/lr, wd'/wd) the policy applies from the proxy to this dir's batch and steps (1, 1 without a policy)."""
    if policy is None:
        return 1.0, 1.0
    optim = RunConfig.from_json(settings).optim
    unit = dataclasses.replace(optim, lr=1.0, weight_decay=1.0)
    target, _ = policy.apply(unit, change(settings, proxy))
    return target.lr, target.decay


def change(settings: dict[str, Any], proxy: tuple[int, int]) -> Change:
    return Change(proxy[0], settings["batch_size"], proxy[1], settings["steps"])


def check_mapped(found: list[tuple[Path, dict, list]], policy: ScalingPolicy | None,
                 proxy: tuple[int, int]) -> list[str]:
    """Without a policy the MAPPED settings agree in every dir; with one, each dir's are the proxy dir's (at batch and
    steps `proxy`) as the policy maps them (rel. 1e-6); no proxy dir: not checked, and a warning says so."""
    (d0, s0, _), *_ = found
    if policy is None:
        for d, s, _ in found[1:]:
            differ = [k for k in MAPPED if s0.get(k) != s.get(k)]
            if differ:
                k = differ[0]
                raise ValueError(f"the sweep dirs differ in {', '.join(differ)} ({k} {s0.get(k)!r} in {d0}, "
                                 f"{s.get(k)!r} in {d}): if a scaling policy mapped them, give it (--policy)")
        return []
    at_proxy = [s for _, s, _ in found if (s["batch_size"], s["steps"]) == proxy]
    if not at_proxy:
        return [f"no sweep dir is at the proxy (batch {proxy[0]}, {proxy[1]} steps), so their {', '.join(MAPPED)} "
                f"were not checked against policy {policy.name}'s map of the proxy's"]
    cfg = RunConfig.from_json(at_proxy[0]).optim
    for d, s, _ in found:
        target, _ = policy.apply(cfg, change(s, proxy))
        for k in MAPPED:
            want, got = getattr(target, k), s.get(k)
            if got is not None and not math.isclose(float(want), float(got), rel_tol=1e-6):
                raise ValueError(f"{d}: {k} {got!r} is not what policy {policy.name} maps the proxy's "
                                 f"{getattr(cfg, k)!r} to at batch {s['batch_size']}, {s['steps']} steps ({want!r}): "
                                 "were these sweeps run under another policy?")
    return []
