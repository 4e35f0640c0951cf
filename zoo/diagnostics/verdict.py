"""Coordinate-check verdicts: each layer's measured log-log slope against the slope its plugin predicts.

Layers fall in groups: "embed" (the input layer's output) is input, "output" the logits, "attn_logits/l"
attention, everything else hidden. The expectation is the plugin's prediction (Parametrization.expected_slopes,
TP IVb section 3) capped at 0, the stable value: a growing coordinate means the parametrization is unstable and
the check fails. A layer passes when |slope - expected| <= tol at every step it moved; attention logits only need
slope <= expected + tol (under muP with 1/d they shrink at small widths, a finite-size transient that
plateaus near n ~ 1024; seed_tp4b_adam.md section 6.5).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx

from zoo import models
from zoo.param import predict
from zoo.param.base import Parametrization

ONE_SIDED = ("attention",)


def group_of(layer: str) -> str:
    """input, hidden, output or attention."""
    if layer == "embed":
        return "input"
    if layer == "output":
        return "output"
    return "attention" if layer.startswith("attn_logits") else "hidden"


def model_kinds(model_name: str, cfg: Any, plugin: Parametrization) -> tuple[str, ...]:
    """Kinds of the parameters before the readout (they set the hidden feature-learning exponent r)."""
    abstract = nnx.eval_shape(lambda: models.create(model_name, cfg, plugin, nnx.Rngs(0)))
    params = jax.tree.leaves(nnx.state(abstract, nnx.Param), is_leaf=lambda x: isinstance(x, nnx.Variable))
    tags = [p.get_metadata()["tag"] for p in params]
    return tuple(sorted({t.kind for t in tags if t.kind != "output" and not t.role.startswith("readout")}))


def expected(model_name: str, cfg: Any, plugin: Parametrization, optimizer: str, axis: str = "width") -> dict:
    """Group -> (stable expectation, raw prediction) of the slope against width or depth."""
    head_dim_slope = 0.0 if getattr(cfg, "scale_heads", True) else 1.0
    raw = plugin.expected_slopes(optimizer, axis, model_kinds(model_name, cfg, plugin), head_dim_slope)
    capped = predict.stable(raw)
    return {g: (capped[g], raw[g]) for g in raw}


@dataclasses.dataclass
class LayerVerdict:
    layer: str
    group: str
    slopes: list[float]  # one per step
    expected: float
    raw: float
    passed: bool


def judge(slopes: dict[str, np.ndarray], data: dict[str, np.ndarray], expectations: dict[str, tuple[float, float]],
          tol: float = 0.15) -> list[LayerVerdict]:
    """One verdict per layer. A step where the layer did not move at any size (zero change: hidden layers at t = 1
    under a zero-initialized readout) is skipped; any other NaN slope (diverged training) fails."""
    out = []
    for layer, s in slopes.items():
        group = group_of(layer)
        exp, raw = expectations[group]
        s = np.atleast_1d(np.asarray(s, np.float64))
        still = np.all(np.asarray(data[layer]).reshape(-1, len(s)) == 0, axis=0)
        dev = s - exp if group in ONE_SIDED else np.abs(s - exp)
        moved = ~still
        ok = bool(moved.any() and np.all(np.isfinite(s[moved])) and np.all(dev[moved] <= tol))
        out.append(LayerVerdict(layer, group, [float(v) for v in s], exp, raw, ok))
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
