"""Coordinate-check verdicts: each layer's measured log-log slope against the slope its plugin predicts.

Layers fall in groups: "embed" (the input layer's output) is input, "output" the logits, "attn_logits/l"
attention, "blocks/l" (the residual stream after block l) stream, everything else (pre-activations inside the
blocks) hidden. The expectation is the plugin's prediction (Parametrization.expected_slopes, TP IVb section 3, TP VI
section 7). A layer matches when |slope - expected| <= tol at every step it moved; attention logits only need
slope <= expected + tol (under muP with 1/d they shrink at small widths, a finite-size transient that plateaus near
n ~ 1024; seed_tp4b_adam.md section 6.5).

A plugin that theory calls unstable along the swept axis never passes, whatever the slopes at the sizes measured:
a positive expected slope for a group the model has (its changes grow without bound), or an init that blows up
(Parametrization.instabilities). A flat slope there only means the sizes were too small to see the growth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx

from zoo import models
from zoo.param.base import Parametrization

ONE_SIDED = ("attention",)


def group_of(layer: str) -> str:
    """input, hidden, stream, output or attention."""
    if layer == "embed":
        return "input"
    if layer == "output":
        return "output"
    if layer.startswith("blocks"):
        return "stream"
    return "attention" if layer.startswith("attn_logits") else "hidden"


def model_kinds(model_name: str, cfg: Any, plugin: Parametrization) -> tuple[str, ...]:
    """Kinds of the parameters before the readout (they set the hidden feature-learning exponent r)."""
    abstract = nnx.eval_shape(lambda: models.create(model_name, cfg, plugin, nnx.Rngs(0)))
    params = jax.tree.leaves(nnx.state(abstract, nnx.Param), is_leaf=lambda x: isinstance(x, nnx.Variable))
    tags = [p.get_metadata()["tag"] for p in params]
    return tuple(sorted({t.kind for t in tags if t.kind != "output" and not t.role.startswith("readout")}))


@dataclasses.dataclass
class Expectation:
    """Group -> predicted slope with every parameter trained (`total`) and, in depth, with only the residual-branch
    parameters moved (`branch`); `unstable`: theory's reasons this plugin blows up along the axis (none: stable)."""

    total: dict[str, float]
    branch: dict[str, float]
    unstable: list[str]


def expected(model_name: str, cfg: Any, plugin: Parametrization, optimizer: str, axis: str = "width",
             groups: Sequence[str] | None = None) -> Expectation:
    """The plugin's predictions along width or depth for a zoo model; `groups`: those the model has (default: every
    group)."""
    head_dim_slope = 0.0 if getattr(cfg, "scale_heads", True) else 1.0
    return expectation(plugin, optimizer, axis, model_kinds(model_name, cfg, plugin), head_dim_slope, groups)


def expectation(plugin: Parametrization, optimizer: str, axis: str, kinds: tuple[str, ...],
                head_dim_slope: float, groups: Sequence[str] | None = None) -> Expectation:
    """The plugin's predictions for a model whose pre-readout parameters have `kinds` and whose head dim grows like
    width^head_dim_slope; unstable where theory says the init blows up or a present group's change grows."""
    total = plugin.expected_slopes(optimizer, axis, kinds, head_dim_slope)
    branch = plugin.expected_slopes(optimizer, axis, kinds, head_dim_slope, branch_only=True) if axis == "depth" \
        else {}
    present = set(total) if groups is None else set(groups)
    growing = {g: s for part in (total, branch) for g, s in part.items() if g in present and s > 0}
    unstable = plugin.instabilities(axis, kinds) + [
        f"the {g} change grows like {axis}^{s:+.2f}" for g, s in sorted(growing.items())]
    return Expectation(total, branch, list(dict.fromkeys(unstable)))


@dataclasses.dataclass
class LayerVerdict:
    layer: str
    group: str
    slopes: list[float]  # one per step
    expected: float
    matches: bool  # the slopes agree with the prediction
    passed: bool  # matches, and the plugin is stable by theory


def judge(slopes: dict[str, np.ndarray], data: dict[str, np.ndarray], expectations: dict[str, float],
          tol: float = 0.15, stable: bool = True) -> list[LayerVerdict]:
    """One verdict per layer. A step where the layer did not move at any size (zero change: hidden layers at t = 1
    under a zero-initialized readout) is skipped; any other NaN slope (diverged training) fails."""
    out = []
    for layer, s in slopes.items():
        group = group_of(layer)
        exp = expectations[group]
        s = np.atleast_1d(np.asarray(s, np.float64))
        still = np.all(np.asarray(data[layer]).reshape(-1, len(s)) == 0, axis=0)
        dev = s - exp if group in ONE_SIDED else np.abs(s - exp)
        moved = ~still
        matches = bool(moved.any() and np.all(np.isfinite(s[moved])) and np.all(dev[moved] <= tol))
        out.append(LayerVerdict(layer, group, [float(v) for v in s], exp, matches, matches and stable))
    return out


def at_depth_fractions(data: dict[str, np.ndarray], depth: int,
                       fractions: Sequence[float] = (0.25, 0.5, 0.75, 1.0)) -> dict[str, np.ndarray]:
    """Per-block layers "name/l" of a depth-L model -> "name@f", the block at relative depth f (l = ceil(f L) - 1);
    unstacked layers unchanged. Makes layers of different depths comparable."""
    out = {}
    for layer, v in data.items():
        name, _, idx = layer.rpartition("/")
        if name and idx.isdigit():
            for f in fractions:
                if int(idx) == max(int(np.ceil(f * depth)) - 1, 0):
                    out[f"{name}@{f:g}"] = v
        else:
            out[layer] = v
    return out
