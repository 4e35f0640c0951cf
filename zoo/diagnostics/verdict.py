"""Coordinate-check verdicts: each layer's measured log-log slope against the slope its plugin predicts.

Layers fall in groups: "embed" (the input layer's output) is input, "output" the logits, "attn_logits/l"
attention, "blocks/l" (the residual stream after block l) stream, everything else (pre-activations inside the
blocks) hidden. The expectation is the plugin's prediction (Parametrization.expected_slopes, TP IVb section 3, TP VI
section 7). A layer matches when |slope - expected| <= tol at every step it moved (an SGD-like scalar's part: the
first step against its CLT sum at init, `Expectation.first_parts`); attention logits only need
slope <= expected + tol (under muP with 1/d they shrink at small widths, a finite-size transient that plateaus near
n ~ 1024; seed_tp4b_adam.md section 6.5).

A plugin that theory calls unstable along the swept axis never passes, whatever the slopes at the sizes measured:
a positive expected slope for a group the model has (its changes grow without bound), or an init that blows up
(Parametrization.instabilities). A flat slope there only means the sizes were too small to see the growth, so such a
FAIL also says whether the data show the growth (`measured_growth`): each layer of a growing group gets its slope at
the last step, fitted over every (size, seed) point, its standard error from the spread about the fit, and the
one-sided p-value of "no growth" (Student's t); the growth is significant at p < P_SIGNIFICANT.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import scipy.special
from flax import nnx

from zoo import models
from zoo.diagnostics.coord import slopes
from zoo.param.base import Parametrization
from zoo.param.predict import READOUT_BIAS

ONE_SIDED = ("attention",)
P_SIGNIFICANT = 0.01


def group_of(layer: str) -> str:
    """input, hidden, stream, output or attention."""
    if layer == "embed":
        return "input"
    if layer == "output":
        return "output"
    if layer.startswith("blocks"):
        return "stream"
    return "attention" if layer.startswith("attn_logits") else "hidden"


def model_kinds(model_name: str, cfg: Any, plugin: Parametrization) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Kinds of the parameters before the readout (they set the hidden feature-learning exponent r), and kinds of
    the parameters outside the residual branches (the readout's included)."""
    abstract = nnx.eval_shape(lambda: models.create(model_name, cfg, plugin, nnx.Rngs(0)))
    params = jax.tree.leaves(nnx.state(abstract, nnx.Param), is_leaf=lambda x: isinstance(x, nnx.Variable))
    tags = [p.get_metadata()["tag"] for p in params]
    return (tuple(sorted({t.kind for t in tags if t.kind != "output" and not t.role.startswith("readout")})),
            tuple(sorted({t.kind for t in tags if not t.branch})))


@dataclasses.dataclass
class Expectation:
    """Group -> predicted slope with every parameter trained (`total`), in depth with only the residual-branch
    parameters moved (`branch`), and in width with only one part's parameters moved (`parts`: part -> group ->
    slope; zoo.param.predict.part_slopes), after the first update where that differs (`first_parts`: an SGD-like
    scalar kind's, a CLT sum at init); `unstable`: theory's reasons this plugin blows up along the axis (none:
    stable)."""

    total: dict[str, float]
    branch: dict[str, float]
    unstable: list[str]
    parts: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    first_parts: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    zero_readout: bool = False  # the readout starts at 0 (zero_init, and a readout weight of the model's own)


def expected(model_name: str, cfg: Any, plugin: Parametrization, optimizer: str, axis: str = "width",
             groups: Sequence[str] | None = None, muon_io: bool = False) -> Expectation:
    """The plugin's predictions along width or depth for a zoo model; `groups`: those the model has (default: every
    group); `muon_io`: Muon also trains the input and output layers."""
    head_dim_slope = 0.0 if getattr(cfg, "scale_heads", True) else 1.0
    kinds, outside = model_kinds(model_name, cfg, plugin)
    return expectation(plugin, optimizer, axis, kinds, head_dim_slope, groups, outside, muon_io)


def expectation(plugin: Parametrization, optimizer: str, axis: str, kinds: tuple[str, ...],
                head_dim_slope: float, groups: Sequence[str] | None = None,
                outside: tuple[str, ...] | None = None, muon_io: bool = False) -> Expectation:
    """The plugin's predictions for a model whose pre-readout parameters have `kinds` (those outside the residual
    branches `outside`; None: unknown, some train) and whose head dim grows like width^head_dim_slope; unstable where
    theory says the init blows up or a present group's change grows. A model without an output-kind parameter (a
    readout tied to the input embedding) keeps a random readout under zero_init."""
    own = {"muon_io": muon_io, "own_readout": outside is None or "output" in outside}
    total = plugin.expected_slopes(optimizer, axis, kinds, head_dim_slope, outside=outside, **own)
    branch = plugin.expected_slopes(optimizer, axis, kinds, head_dim_slope, branch_only=True) if axis == "depth" \
        else {}
    parts = {p: plugin.expected_slopes(optimizer, axis, kinds, head_dim_slope, part=p, **own)
             for p in (*kinds, "output", READOUT_BIAS)} if axis == "width" else {}
    first = {p: plugin.expected_slopes(optimizer, axis, kinds, head_dim_slope, part=p, at_init=True, **own)
             for p in parts}
    present = set(total) if groups is None else set(groups)
    growing = {g: s for part in (total, branch) for g, s in part.items() if g in present and s > 0}
    unstable = plugin.instabilities(axis, kinds) + [
        f"the {g} change grows like {axis}^{s:+.2f}" for g, s in sorted(growing.items())]
    return Expectation(total, branch, list(dict.fromkeys(unstable)), parts,
                       {p: s for p, s in first.items() if s != parts[p]},
                       bool(plugin.zero_init) and own["own_readout"])


@dataclasses.dataclass
class LayerVerdict:
    layer: str
    group: str
    slopes: list[float]  # one per step; NaN where the layer did not move (`still`)
    expected: float
    matches: bool  # the slopes agree with the prediction
    passed: bool  # matches, and the plugin is stable by theory
    first: float | None = None  # expected after the first update where it differs (an SGD-like scalar's CLT sum)

    def against_prediction(self) -> str:
        """'as predicted', or how the slopes miss it: every step's above its prediction (`judge`'s: `first` at t = 1
        where it differs, then the span of both), every one below, or neither (a stream that grows geometrically in
        depth has slopes that rise past L^1)."""
        if self.matches:
            return "as predicted"
        first = self.expected if self.first is None else self.first
        bounds = [(first, first)] + [(min(first, self.expected), max(first, self.expected))] * (len(self.slopes) - 1)
        moved = [(x, lo, hi) for x, (lo, hi) in zip(self.slopes, bounds, strict=True) if x == x]
        if moved and all(x > hi for x, _, hi in moved):
            return "faster than predicted"
        if moved and all(x < lo for x, lo, _ in moved):
            return "slower than predicted"
        return "not as predicted"


def judge(slopes: dict[str, np.ndarray], data: dict[str, np.ndarray], expectations: dict[str, float],
          tol: float = 0.15, stable: bool = True, first: dict[str, float] | None = None,
          init: dict[str, np.ndarray] | None = None) -> list[LayerVerdict]:
    """One verdict per layer. A step where the layer did not move at any size is skipped: hidden layers at t = 1
    under a zero-initialized readout, whose change is 0, or float32's rounding of it (`still`, against the layer's
    RMS at init per size where `init` has it); any other NaN slope
    (diverged training) fails. A group theory says does not move (expected NaN: every parameter that would move it is
    frozen) matches when it never moved. `first`: the groups' slopes after the first update where they differ from
    `expectations` (an SGD-like scalar's gradient sums over the width as a CLT sum at init and grows coherent as the
    features move along the readout): the slope at t = 1 is judged against it, later ones against the span of both."""
    out = []
    for layer, s in slopes.items():
        group = group_of(layer)
        exp = expectations[group]
        at_first = (first or {}).get(group, exp)
        s = np.atleast_1d(np.asarray(s, np.float64))
        low = np.r_[at_first, np.full(len(s) - 1, min(exp, at_first))]
        high = np.r_[at_first, np.full(len(s) - 1, max(exp, at_first))]
        dev = s - high if group in ONE_SIDED else np.maximum(low - s, s - high)
        moved = ~still(np.asarray(data[layer]).reshape(-1, len(s)), (init or {}).get(layer))
        matches = bool(not moved.any()) if np.isnan(exp) else \
            bool(moved.any() and np.all(np.isfinite(s[moved])) and np.all(dev[moved] <= tol))
        shown = np.where(moved, s, np.nan)  # a step it did not move has no slope: rounding's would read as one
        out.append(LayerVerdict(layer, group, [float(v) for v in shown], exp, matches, matches and stable,
                                None if at_first == exp or np.isnan(exp) else at_first))
    return out


ROUNDING = 1e-3  # a change this small against the layer's largest over the steps is float32's rounding of a zero
ROUND_OFF = 64 * float(np.finfo(np.float32).eps)  # float32's rounding of an activation through a few dozen operations


def still(changes: np.ndarray, init: np.ndarray | None = None) -> np.ndarray:
    """Per step, whether the layer did not move at any size (`changes` [size, step]): a change of 0, at most ROUNDING
    of the same size's largest change over the steps, or at most ROUND_OFF of the layer's RMS at init at that size
    (`init` [size]). A change that is 0 in exact arithmetic (the hidden layers at t = 1 under a zero readout) comes
    out of float32 as h_t - h_0 of O(1) activations: 0, or about 6e-7 of their RMS, which where the later steps
    move little (5e-4 at widths 96 and 160 under a small LR) is more than ROUNDING of them."""
    largest = np.nan_to_num(changes, nan=np.inf).max(axis=1, keepdims=True)
    floor = 0.0 if init is None else ROUND_OFF * np.asarray(init, np.float64).reshape(-1, 1)
    return np.all((changes == 0) | (changes <= ROUNDING * largest) | (changes <= floor), axis=0)


def judge_parts(sizes: Sequence[int], parts: dict[str, dict[str, np.ndarray]],
                expectations: dict[str, dict[str, float]], tol: float = 0.15, stable: bool = True,
                first: dict[str, dict[str, float]] | None = None,
                init: dict[str, np.ndarray] | None = None) -> dict[str, list[LayerVerdict]]:
    """Part -> one verdict per layer the part reaches (`parts`: part -> layer -> [size, step]), against that part's
    predicted slope (zoo.param.predict.part_slopes; `first`: after the first update, where it differs); a reached
    layer that never moved fails, as a rule that moves nothing."""
    return {p: judge(slopes(sizes, data), data, expectations[p], tol, stable, (first or {}).get(p), init)
            for p, data in parts.items()}


DEPTH_FRACTIONS = (0.25, 0.5, 0.75, 1.0)


def check_depths(depths: Sequence[int], plugin: Parametrization) -> None:
    """A depth sweep tests a plugin's depth scaling (TP VI: alpha, gamma), so the plugin must have one
    (`Parametrization.no_depth_law`); it compares the blocks at relative depths DEPTH_FRACTIONS: every depth must have
    a block at each (a multiple of 4), else a shallow model's block stands for another relative depth and tilts every
    slope."""
    if plugin.no_depth_law:
        raise ValueError(f"a depth coordinate check tests a plugin's depth scaling; {plugin.name} has none: "
                         f"{plugin.no_depth_law}")
    off = [d for d in depths if any((f * d) % 1 for f in DEPTH_FRACTIONS)]
    if off:
        raise ValueError(f"a depth sweep compares the blocks at {', '.join(f'{f:g}' for f in DEPTH_FRACTIONS)} of the "
                         f"depth: each depth must be a multiple of 4, got {', '.join(map(str, off))}")


def at_depth_fractions(data: dict[str, np.ndarray], depth: int) -> dict[str, np.ndarray]:
    """Per-block layers "name/l" of a depth-L model -> "name@f", the block at relative depth f (l = f L - 1, f in
    DEPTH_FRACTIONS; the sweep's depths passed check_depths); unstacked layers unchanged. Makes layers of different
    depths comparable."""
    out = {}
    for layer, v in data.items():
        name, _, idx = layer.rpartition("/")
        if name and idx.isdigit():
            for f in DEPTH_FRACTIONS:
                if int(idx) == round(f * depth) - 1:
                    out[f"{name}@{f:g}"] = v
        else:
            out[layer] = v
    return out


@dataclasses.dataclass
class Growth:
    """The measured growth of a layer whose group theory expects to grow (expected slope > 0): the log-log slope at
    the last step, its standard error, the one-sided p-value of slope <= 0 and whether p < P_SIGNIFICANT (NaN and
    False where the data cannot tell: one seed at two sizes). `branch`: the residual-branch parameters' part."""

    layer: str
    group: str
    expected: float
    slope: float
    stderr: float
    p_value: float
    significant: bool
    branch: bool = False


def measured_growth(sizes: Sequence[int], per_size: Sequence[dict[str, np.ndarray]], expectations: dict[str, float],
                    branch: bool = False) -> list[Growth]:
    """One Growth per layer of a group with a positive expected slope. per_size[i]: layer -> [seed, step] RMS change
    at sizes[i]. Ordinary least squares of log RMS at the last step against log size over all (size, seed) points:
    the slope equals the one fitted to the seeds' geometric mean, and its standard error
    s / sqrt(sum (log n - mean)^2) takes s from the residuals (the seeds' spread, and any curvature across sizes),
    with sizes * seeds - 2 degrees of freedom."""
    out = []
    for layer in per_size[0]:
        group = group_of(layer)
        expected = expectations.get(group, 0.0)
        if not expected > 0:  # NaN: a frozen group
            continue
        with np.errstate(divide="ignore"):
            logs = [np.log(np.asarray(r[layer], np.float64)[:, -1]) for r in per_size]
        x = np.concatenate([np.full(len(v), np.log(n)) for v, n in zip(logs, sizes, strict=True)])
        y = np.concatenate(logs)
        slope, stderr, p = np.nan, np.nan, np.nan
        if np.all(np.isfinite(y)):
            dof = len(y) - 2
            sxx = np.sum((x - x.mean()) ** 2)
            slope = float(np.sum((x - x.mean()) * (y - y.mean())) / sxx)
            if dof > 0:
                residual = y - y.mean() - slope * (x - x.mean())
                stderr = float(np.sqrt(np.sum(residual**2) / dof / sxx))
                p = float(scipy.special.stdtr(dof, -slope / stderr)) if stderr > 0 else float(slope <= 0)
        out.append(Growth(layer, group, expected, slope, stderr, p, bool(p < P_SIGNIFICANT), branch))
    return out


def growth_summary(growth: Sequence[Growth]) -> str:
    """One clause per growing group: how many of its layers grow significantly, with the clearest layer's slope +-
    standard error (and its p-value where none does), or that no slope exists where every layer's changes are not
    finite (the training diverged); empty when no layer was expected to grow."""
    groups: dict[tuple[str, bool], list[Growth]] = {}
    for g in growth:
        groups.setdefault((g.group, g.branch), []).append(g)
    clauses = []
    for (group, branch), layers in sorted(groups.items()):
        name = group + (" (branch)" if branch else "")
        fitted = [g for g in layers if g.slope == g.slope]
        if not fitted:
            clauses.append(f"{name}: no slope, its changes are not finite (the training diverged)")
            continue
        clearest = min(fitted, key=lambda g: g.p_value if g.p_value == g.p_value else np.inf)
        if clearest.stderr != clearest.stderr:
            clauses.append(f"{name}: slope {clearest.slope:+.2f}, significance unknown (one seed at two sizes)")
            continue
        fit = f"{clearest.layer} {clearest.slope:+.2f} +- {clearest.stderr:.2f}"
        grown = sum(g.significant for g in layers)
        if grown:
            clauses.append(f"{name} grows in {grown} of {len(layers)} layers (p < {P_SIGNIFICANT:g}; {fit})")
        else:
            clauses.append(f"{name}: no significant growth at these sizes ({fit}, p = {clearest.p_value:.2g})")
    return "; ".join(clauses)
