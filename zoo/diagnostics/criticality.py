"""The criticality experiment (`python -m zoo.criticality`): chi_hat, correlation length and trainable depth of a
model under the `critical` plugin, the APJN profile J^{0,l} with its power-law exponent, a phase diagram over two of
(sigma_w, sigma_b, mu), or the critical value of one of them (Doshi, He, Gromov; seed_partial_jacobians.md)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

import zoo.models
import zoo.param
from zoo.diagnostics import jacobian, phase, profile
from zoo.diagnostics.report import run_report
from zoo.param import mean_field_theory as theory


@dataclasses.dataclass(frozen=True)
class CriticalitySpec:
    """grid: two (name, values) axes of a phase diagram (x, then y); find: (name, lo, hi) to bisect for chi = 1."""

    model: str = "mlp_resnet"
    width: int = 256
    depth: int = 30
    model_opt: dict[str, Any] = dataclasses.field(default_factory=dict)
    param_opt: dict[str, float] = dataclasses.field(default_factory=dict)
    seeds: int = 8
    batch: int = 8
    probes: int = 2
    grid: tuple[tuple[str, list[float]], ...] = ()
    find: tuple[str, float, float] | None = None
    profile: bool = False


def criticality(spec: CriticalitySpec, out: Path) -> dict[str, Any]:
    """Every measurement the spec asks for, as one record; the figures (apjn_profile.png, phase_diagram.png) and
    criticality.json written into `out`."""
    cfg = zoo.models.config(spec.model, width=spec.width, depth=spec.depth, **spec.model_opt)
    if spec.width < 1 or spec.depth < 2:
        raise ValueError(f"width must be positive and depth at least 2, got {spec.width} and {spec.depth}")
    estimate = {"seeds": spec.seeds, "batch": spec.batch, "probes": spec.probes}
    if min(estimate.values()) < 1:
        raise ValueError("--seeds, --batch and --probes must be positive")
    if len(spec.grid) not in (0, 2):
        raise ValueError("--grid takes exactly two axes (x, then y)")
    varied = [name for name, _ in spec.grid] + ([spec.find[0]] if spec.find else [])
    if "sigma_b" in varied and getattr(cfg, "bias", True) is False:
        raise ValueError(f"sigma_b has no effect: {spec.model} is built without biases (add --model-opt bias=true)")
    fixed = {k: float(v) for k, v in spec.param_opt.items()}
    plugin = zoo.param.get("critical", **fixed)
    record: dict[str, Any] = {"model": spec.model, "config": dict(vars(cfg)), **estimate}
    if spec.find:
        name, lo, hi = spec.find
        value = jacobian.find_critical(spec.model, cfg, name, lo, hi, fixed=fixed, **estimate)
        record["critical"] = {name: value}
        plugin = dataclasses.replace(jacobian.held_fixed(spec.model, cfg, plugin, {name: value}), **{name: value})
    record["report"] = run_report(spec.model, cfg, plugin, **estimate)
    out.mkdir(parents=True, exist_ok=True)
    if spec.profile:
        record["profile"] = _profile(spec, cfg, plugin.for_model(spec.model, cfg), estimate, out)
    if spec.grid:
        (xn, xs), (yn, ys) = spec.grid
        rest = {k: v for k, v in fixed.items() if k not in (xn, yn)}
        chi, err = phase.phase_diagram(spec.model, cfg, (xn, xs), (yn, ys), rest, **estimate)
        line = phase.theory_line(cfg, (xn, xs), rest) if theory.describes(cfg) and yn == "sigma_w" else None
        title = f"{spec.model} L={spec.depth} n={spec.width} " + " ".join(f"{k}={v}" for k, v in spec.model_opt.items())
        phase.plot(chi, (xn, xs), (yn, ys), out / "phase_diagram.png", title=title, line=line)
        record["phase_diagram"] = {"x": [xn, xs], "y": [yn, ys], "chi": chi.tolist(), "stderr": err.tolist()}
    (out / "criticality.json").write_text(json.dumps(_plain(record), indent=1))
    return record


def _profile(spec: CriticalitySpec, cfg: Any, plugin: Any, estimate: dict[str, int], out: Path) -> dict:
    """J^{0,l} for l = 0..L, its fitted exponent, the figure; the infinite-width product of the chi^l for the
    MLP-ResNet."""
    mean, err = jacobian.apjn(spec.model, cfg, plugin, 0, **estimate)
    depth = cfg.depth
    slope, (lo, hi) = profile.exponent(mean, depth), profile.fit_range(depth)
    infinite = None
    if theory.describes(cfg):
        block = theory.Block.of(cfg, float(plugin.branch_multiplier(cfg.depth, cfg.base_depth or cfg.depth)))
        chis, _ = theory.recursion(block, float(plugin.sigma_w), float(plugin.sigma_b), float(plugin.mu), depth)
        infinite = np.cumprod(chis) if len(chis) == depth else None
    profile.plot(mean, err, out / "apjn_profile.png", f"{spec.model} L={depth} n={spec.width}", infinite)
    return {"apjn": mean.tolist(), "stderr": err.tolist(), "exponent": slope, "fit": [lo, hi],
            "infinite_width": None if infinite is None else [1.0, *infinite.tolist()]}


def _plain(x: Any) -> Any:
    """JSON-safe: non-finite floats as strings, tuples as lists."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x
