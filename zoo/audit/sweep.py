"""An audit: a run measured at two or more widths (and depths), every parameter's quantities fitted against size and
judged against theory's laws.

    result = audit(ZooRun("gpt", zoo.param.get("mup"), OptimConfig("muon", lr=1e-2)), widths=[64, 128, 256])
    result.passed, result.failures()          # one line per failing parameter, naming the rule

The width sweep runs at one depth (base depth = that depth, so r = 1) with base width the smallest width; the depth
sweep at the base width with base depth the smallest depth. The kind each parameter is judged as comes from its
shapes across the widths (zoo.audit.shapes), its optimizer family from that kind and the run's optimizer
(zoo.param.families); a tag that disagrees with its shapes is a failure of its own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
from flax import nnx

from zoo.audit import judge, laws, shapes
from zoo.audit.probe import REDRAWN, free_multipliers, paths, probe
from zoo.audit.subjects import AnyRun, ZooRun
from zoo.param import families
from zoo.param.base import Parametrization
from zoo.param.tags import Tag
from zoo.train.mesh import MeshPlan

Run = ZooRun | AnyRun
# quantities of the effective weight: times the realized multiplier
EFFECTIVE = ("init_rms", "init_spectral", "update_rms", "update_spectral", "spectral_step")
FROM_GRADIENT = ("update_rms", "update_spectral", "spectral_step", "step_size", "eps_scale", "eps_ratio",
                 "clip_factor")


@dataclasses.dataclass
class ParamResult:
    """One parameter along one axis: its kind by shapes and by tag, its family, and the checks."""

    kind: str
    tag_kind: str
    family: str
    branch: bool
    checks: list[judge.Check]

    @property
    def passed(self) -> bool:
        return all(c.passed is not False for c in self.checks)


@dataclasses.dataclass
class Axis:
    axis: str
    sizes: list[int]
    params: dict[str, ParamResult]

    @property
    def passed(self) -> bool:
        return all(p.passed for p in self.params.values())


@dataclasses.dataclass
class Audit:
    """The run audited, its axes, the tolerance, and what a run dir's saved optimizer state contradicts."""

    run: dict[str, Any]
    axes: list[Axis]
    tol: float
    saved: list[str] = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(a.passed for a in self.axes) and not self.saved

    def failures(self) -> list[str]:
        """`axis parameter: rule slope x, theory y; ...` for each failing parameter."""
        return [f"{a.axis} {path}: " + "; ".join(judge.failures(p.checks))
                for a in self.axes for path, p in a.params.items() if not p.passed] + self.saved


@dataclasses.dataclass
class Size:
    """One size measured: the tags, the shapes and the probe's numbers of every parameter; the plugin the laws read
    and what is folded into parameters there (zoo.audit.subjects)."""

    tags: dict[str, Tag]
    shapes: dict[str, tuple[int, ...]]
    numbers: dict[str, dict[str, float]]
    plugin: Parametrization
    folds: dict[str, float]
    free: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # probe.free_multipliers


def measure_size(run: Run, width: int, depth: int, base_width: int, base_depth: int, seed: int) -> Size:
    prog, cfg = run.program(width, depth, base_width, base_depth)
    key = jax.random.key(seed)
    numbers = probe(prog, MeshPlan.from_spec(run.mesh), run.batch(cfg, jax.random.fold_in(key, 7)), run.optim, key)
    numbers = {run.param_path(p): n for p, n in numbers.items()}
    _, abstract, rest = nnx.split(nnx.eval_shape(lambda: prog.make_model(nnx.Rngs(0))), nnx.Param, ...)
    variables = {run.param_path(p): v for p, v in paths(abstract).items()}
    tags = {p: v.get_metadata()["tag"] for p, v in variables.items()}
    return Size(tags, {p: tuple(v.get_value().shape) for p, v in variables.items()}, numbers,
                run.law_plugin(width, base_width), run.folds(width, base_width, tags), free_multipliers(rest))


def check_sweep(name: str, sizes: Sequence[int] | None) -> None:
    """An audit fits slopes: a sweep given needs two different positive sizes, each once (a repeated one is measured
    again and weighs twice in the fit)."""
    if sizes and (len(set(sizes)) < 2 or len(set(sizes)) < len(sizes) or min(sizes) < 1):
        raise ValueError(f"an audit needs at least two different positive {name}, each once; got {list(sizes)}")


def audit(run: Run, widths: Sequence[int] = (), depths: Sequence[int] = (), *, width: int | None = None,
          depth: int | None = None, tol: float = 0.1, seed: int = 0) -> Audit:
    """Measure `run` at each width (at `depth`, default the model's) and each depth (at `width`, default the
    smallest width or the model's), and judge every parameter."""
    check_sweep("widths", widths)
    check_sweep("depths", depths)
    if not widths and not depths:
        raise ValueError("give the widths (and/or depths) to measure at")
    axes, kinds, measured = [], {}, {}

    def at(*size: int) -> Size:  # (width, depth, base width, base depth): a size both sweeps hold is measured once
        if size not in measured:
            measured[size] = measure_size(run, *size, seed)
        return measured[size]

    if widths:
        d = depth or run.default_size()[1]
        ws = sorted(widths)
        sizes = [at(w, d, ws[0], d) for w in ws]
        kinds = shapes.kinds({p: (sizes[0].shapes[p], sizes[-1].shapes[p]) for p in sizes[-1].tags},
                             sizes[-1].tags)
        axes.append(judge_axis(run, "width", ws, sizes, kinds, None, tol))
    if depths:
        w = width or (min(widths) if widths else run.default_size()[0])
        ds = sorted(depths)
        sizes = [at(w, d, w, ds[0]) for d in ds]
        # one parameter per stacked block: a leading axis that grows with depth marks the branches; a model with a
        # parameter per block (unstacked) has other parameters at each depth, and its tags say which are branches
        stacked = all(s.tags.keys() == sizes[0].tags.keys() for s in sizes)
        branch = shapes.branches({p: (sizes[0].shapes[p], sizes[-1].shapes[p]) for p in sizes[-1].tags}) \
            if stacked else None
        axes.append(judge_axis(run, "depth", ds, sizes, kinds, branch, tol))
    return Audit(run.describe(), axes, tol)


def judge_axis(run: Run, axis: str, xs: list[int], sizes: list[Size], kinds: dict[str, str],
               branch: dict[str, bool] | None, tol: float) -> Axis:
    """Every parameter present at all `sizes`, judged along `axis`; `branch`: branch membership by shapes (None: by
    tags)."""
    out = {}
    nulls = [judge.null_directions({p: n.get("grad_rms", 0.0) for p, n in s.numbers.items()}) for s in sizes]
    redrawn_nulls = [judge.null_directions({p: n.get(REDRAWN + "grad_rms", 0.0) for p, n in s.numbers.items()})
                     for s in sizes]  # all of them where nothing was redrawn
    present = {kinds.get(p, t.kind) for p, t in sizes[-1].tags.items()}
    for path, tag in sizes[-1].tags.items():
        if any(path not in s.tags for s in sizes):
            continue
        kind = kinds.get(path, tag.kind)
        in_branch = tag.branch if branch is None else branch[path]
        family = families.family(run.optim.name, kind, run.optim.muon_io)
        facts = [laws.Facts(s.tags[path], kind, family, in_branch, s.folds.get(path, 0.0), laws.aligned_exponent(
            s.plugin, s.tags[path], run.optim.name, run.optim.muon_io, present) if kind == "scalar" else 0.0)
                 for s in sizes]
        realized = {f for s in sizes for f in ("spectral", "adam") if s.numbers.get(path, {}).get("in_" + f)}
        checks = [c for c in (structure_check(axis, tag, kind, in_branch), family_check(family, realized)) if c]
        still = laws.frozen(sizes[-1].plugin, kind)
        if still:
            checks.append(judge.frozen_check([s.numbers.get(path, {}) for s in sizes]))
        for q in (q for q in laws.QUANTITIES if not (still and q in laws.MOVES)):
            logs = [laws.log_law(q, s.plugin, f) for s, f in zip(sizes, facts, strict=True)] \
                if laws.has_law(q, facts[-1], run.optim.name) else None
            values = [value(q, s.numbers.get(path, {}), run.optim.eps, path in null, path in redrawn) for s, null,
                      redrawn in zip(sizes, nulls, redrawn_nulls, strict=True)]
            why = "null direction" if q in FROM_GRADIENT else "zero init"  # null: a gradient of rounding noise
            # a realized init's RMS carries the sampling noise of its draws (a 1 x n class token's is large)
            slack = judge.sampling_slack(xs, [math.prod(s.shapes[path]) for s in sizes]) if q == "init_rms" else 0.0
            if logs is not None or q in ("update_rms", "update_spectral") and any(v is not None for v in values):
                checks.append(judge.check(q, xs, values, logs, tol, why, laws.judged(q, facts[-1], run.optim.name),
                                          slack))
        out[path] = ParamResult(kind, tag.kind, family, in_branch, checks)
    for path in sizes[-1].free:
        if all(path in s.free for s in sizes):
            out[path] = free_result(xs, sizes, path, run.optim.eps, tol)
    return Axis(axis, xs, out)


def free_result(xs: list[int], sizes: list[Size], path: str, eps: float, tol: float) -> ParamResult:
    """A forward multiplier on no parameter of its own (a branch multiplier, an attention scale, a tied readout's),
    judged against its stated rule (laws.free_multiplier_law); the multiplier is its one quantity."""
    rule = sizes[-1].free[path]["rule"]
    logs = [laws.free_multiplier_law(s.plugin, s.free[path]) for s in sizes]
    values = [value("multiplier", s.numbers[path], eps, False) for s in sizes]
    return ParamResult(rule, rule, "-", rule == "branch", [judge.check("multiplier", xs, values, logs, tol)])


def structure_check(axis: str, tag: Tag, kind: str, in_branch: bool) -> judge.Check | None:
    """A failed check when the tag disagrees with the shapes: its kind (width sweeps), its branch (depth sweeps)."""
    if axis == "width" and tag.kind != kind:
        return judge.Check("kind", [], None, None, False, f"tagged {tag.kind}, shapes say {kind}")
    if axis == "depth" and tag.branch != in_branch:
        said = "in a residual branch" if in_branch else "outside the residual branches"
        return judge.Check("branch", [], None, None, False, f"tagged branch={tag.branch}, shapes say {said}")
    return None


def family_check(expected: str, realized: set[str]) -> judge.Check | None:
    """A failed check when the optimizer's state shows another family than theory's for the parameter's kind (a
    vector in Muon's momentum; a matrix Muon should take in Adam's moments)."""
    held = {"spectral": "Muon's momentum", "adam": "Adam's moments"}
    for family in realized:
        if family != expected:
            return judge.Check("family", [], None, None, False, f"{held[family]} hold it; theory: {expected}")
    return None


def value(quantity: str, n: dict[str, float], eps: float, null: bool, redrawn_null: bool = True) -> float | None:
    """The measured value of `quantity` at one size (effective: times the realized multiplier mult^power); a
    gradient's quantity where the gradient is null at the init is read from the step at drawn zero matrices
    (probe.REDRAWN), unless it is null there too."""
    if quantity in FROM_GRADIENT and null:
        if redrawn_null:
            return None
        n = {**n, **{k.removeprefix(REDRAWN): v for k, v in n.items() if k.startswith(REDRAWN)}}
    multiplier = n["mult"] ** n["power"] if "mult" in n else 1.0
    if quantity == "multiplier":
        return multiplier
    if quantity == "step_size":  # the step before clipping: the clip factor is the gradient's business, not a rule's
        return abs(multiplier) * n["small_step_rms"] / n["grad_rms"]
    if quantity == "eps_scale":
        return eps * n["grad_rms"] / n["small_sqrt_v_rms"] if n.get("small_sqrt_v_rms") else None
    if quantity == "eps_ratio":
        return eps / n["sqrt_v_rms"] if n.get("sqrt_v_rms") else None
    if quantity == "clip_factor":
        return n["sqrt_v_rms"] / n["small_sqrt_v_rms"] if n.get("small_sqrt_v_rms") else None
    if quantity not in n:
        return None
    if quantity in EFFECTIVE:
        return n[quantity] * abs(multiplier) if n[quantity] > 0 else None
    return n[quantity]
