"""The fit of a set of sweeps: each size's optimum of each swept hyperparameter (the LR; the weight decay where
swept) with its interval, the power law across sizes, and the held-out sizes' prediction against measurement.

Refused, in one line: a size with fewer than 3 grid points (a single LR locates no optimum), fewer than 3 sizes to
fit (or no more sizes than the law has terms), a size on the grid's edge or beside a diverged LR counted out of them,
--axes that leave out an axis two sizes alike in the named ones differ in, a hold-out no size matches. Where the
weight decay is swept too, a hyperparameter whose optima are too few for a law (a short LR grid whose best is on its
edge) is left without one, said in `unfitted`, as long as the other has its law."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from zoo.fit import law as laws
from zoo.fit.optimum import MIN_POINTS, Optimum, optimum
from zoo.fit.read import Grid, Sweeps

HYPER = {"lr": "LR", "weight_decay": "weight decay"}
MIN_SIZES = 3


@dataclasses.dataclass
class SizeFit:
    grid: Grid
    optima: dict[str, Optimum | None]  # hyperparameter -> its optimum (None: < MIN_POINTS trained)
    held_out: bool


@dataclasses.dataclass
class Check:
    """A held-out size: the law's prediction (log2, with its interval) against the measured optimum, in grid
    steps."""

    size: dict[str, int]
    hyper: str
    predicted: tuple[float, float, float]
    measured: Optimum
    grid_step: float

    @property
    def error_steps(self) -> float:
        return (self.predicted[0] - self.measured.x) / self.grid_step

    @property
    def within_one_step(self) -> bool | None:
        """Whether the prediction is within one grid step of the measured optimum; None where the measured best is on
        the grid's edge: that bounds the optimum (at or past the edge), it does not locate it."""
        return None if self.measured.at_edge else abs(self.error_steps) <= 1.0

    def record(self) -> dict[str, Any]:
        return {"size": self.size, "hyperparameter": self.hyper, "predicted": list(self.predicted),
                "measured": self.measured.record(), "grid_step": self.grid_step, "error_grid_steps": self.error_steps,
                "within_one_grid_step": self.within_one_step}


@dataclasses.dataclass
class Result:
    sweeps: Sweeps
    sizes: list[SizeFit]
    laws: dict[str, laws.Fit]
    grid_steps: dict[str, float]
    checks: list[Check]
    policy: dict[str, Any]
    unfitted: dict[str, str] = dataclasses.field(default_factory=dict)  # hyperparameter -> why it has no law


def grid_step(values: list[np.ndarray]) -> float:
    gaps = np.diff(np.unique(np.round(np.concatenate(values), 6)))
    return float(gaps.min()) if len(gaps) else 1.0


def fit(sweeps: Sweeps, holdout: dict[str, int] | None = None, boot: int = 1000, seed: int = 0,
        policy: dict[str, Any] | None = None, axes: list[str] | None = None) -> Result:
    """Fit `sweeps` (zoo.fit.read.load): the laws over the sizes not held out (`holdout`: axis -> value), in the
    `axes` given (default: every axis that varies; give one of two that move together, as the steps E / B of a batch
    sweep at a fixed number of examples E)."""
    if axes:
        still = [a for a in axes if a not in sweeps.axes]
        if still:
            raise ValueError(f"--axes {','.join(axes)}: {', '.join(still)} does not vary across the sweeps (what "
                             f"varies: {', '.join(sweeps.axes) or 'nothing'})")
        sweeps = dataclasses.replace(sweeps, axes=tuple(axes))
        check_axes_tell_sizes_apart(sweeps)
    hypers = ["lr", "weight_decay"] if sweeps.wd_swept else ["lr"]
    for g in sweeps.grids:
        for h in hypers:
            n = len(g.lr if h == "lr" else g.wd)
            if n < MIN_POINTS:
                raise ValueError(f"{'a single' if n == 1 else n} {HYPER[h]}{'' if n == 1 else 's'} at "
                                 f"{g.label(sweeps.axes)}: zoo.fit locates each size's best {HYPER[h]} between grid "
                                 f"points and needs {MIN_POINTS} or more per size")
    held = [holds(g, holdout) for g in sweeps.grids]
    if holdout and not any(held):
        raise ValueError(f"no size has {', '.join(f'{a} {v}' for a, v in holdout.items())} to hold out; sizes: "
                         + "; ".join(g.label(sweeps.axes) for g in sweeps.grids))
    fitted = len(sweeps.grids) - sum(held)
    if fitted < MIN_SIZES:
        raise ValueError(f"{fitted} size{'' if fitted == 1 else 's'} to fit ({len(sweeps.grids)} swept, {sum(held)} "
                         f"held out): a law needs {MIN_SIZES} or more (sweep more widths, depths, batch sizes or "
                         "steps)")
    rng = np.random.default_rng(seed)
    sizes = [SizeFit(g, {h: size_optimum(g, h, rng, boot) for h in hypers}, k) for g, k in
             zip(sweeps.grids, held, strict=True)]
    steps = {h: grid_step([g.lr if h == "lr" else g.wd for g in sweeps.grids]) for h in hypers}
    fits, unfitted = {}, {}
    for h in hypers:
        try:
            fits[h] = law_of(sweeps, sizes, h, rng)
        except ValueError as e:
            unfitted[h] = str(e)
    if not fits:
        raise ValueError("; ".join(unfitted.values()))
    checks = [Check(s.grid.size, h, fits[h].predict(s.grid.size), s.optima[h],
                    grid_step([s.grid.lr if h == "lr" else s.grid.wd]))  # its own grid's step (a policy moves grids)
              for s in sizes if s.held_out for h in fits if s.optima[h] is not None]
    return Result(sweeps, sizes, fits, steps, checks, policy or {"name": "none", "options": {}}, unfitted)


def check_axes_tell_sizes_apart(sweeps: Sweeps) -> None:
    """Refuses --axes that leave out an axis on which two sizes alike in the named axes differ: the law would not see
    it, and the table would label different sizes alike (an axis that moves with a named one may be left out)."""
    seen: dict[tuple[int, ...], Grid] = {}
    for g in sweeps.grids:
        first = seen.setdefault(tuple(g.size[a] for a in sweeps.axes), g)
        apart = [a for a in g.size if g.size[a] != first.size[a]]
        if apart:
            raise ValueError(f"--axes {','.join(sweeps.axes)}: two sizes at {g.label(sweeps.axes)} differ in "
                             f"{', '.join(apart)}, which the law would not see; name {' and '.join(apart)} in --axes "
                             "too, or fit the sweeps where it is fixed")


def holds(g: Grid, holdout: dict[str, int] | None) -> bool:
    return bool(holdout) and all(g.size.get(a) == v for a, v in holdout.items())


def size_optimum(g: Grid, hyper: str, rng: np.random.Generator, boot: int) -> Optimum | None:
    if hyper == "lr":
        return optimum(g.lr, g.loss, g.diverged, rng, boot)
    return optimum(g.wd, g.loss.transpose(1, 0, 2), g.diverged.T, rng, boot)


def law_of(sweeps: Sweeps, sizes: list[SizeFit], hyper: str, rng: np.random.Generator) -> laws.Fit:
    """The law of `hyper` over the sizes fitted: not held out, an optimum located inside the grid."""
    used = [s for s in sizes if not s.held_out and s.optima[hyper] is not None and not s.optima[hyper].at_edge]
    lost = [s.grid.label(sweeps.axes) for s in sizes if not s.held_out and s not in used]
    axes = sweeps.axes
    needed = max(MIN_SIZES, len(axes) + 2)  # more sizes than the law's terms (a constant and an exponent per axis)
    if len(used) > len(axes):  # as many sizes as terms: axes that move together (a batch sweep at fixed examples)
        x = laws.features([s.grid.size for s in used], axes, {a: 1.0 for a in axes})  # need --axes, not more sizes
        if np.linalg.matrix_rank(x) < x.shape[1]:
            raise ValueError(f"the sizes fitted do not tell the {', '.join(axes)} exponents apart (each axis needs "
                             "two values among them, not moving together): sweep sizes that vary them apart, or fit "
                             "one of those that move together (--axes)")
    if len(used) < needed:
        why = f"; none at {'; '.join(lost)} (fewer than {MIN_POINTS} points trained without diverging, or the best " \
            "is on the grid's edge or beside a diverged LR: widen or refine the grid)" if lost else ""
        raise ValueError(f"{len(used)} size{'' if len(used) == 1 else 's'} with a located best {HYPER[hyper]}{why}: "
                         f"a law over {', '.join(axes)} has {len(axes) + 1} terms and needs {needed} or more sizes "
                         "(as many fit it exactly, and say nothing of its error)")
    return laws.fit([s.grid.size for s in used], [s.optima[hyper].x for s in used],
                    np.stack([s.optima[hyper].replicates for s in used]), axes, rng)
