"""The criticality experiment (`python -m zoo.criticality`): chi_hat, correlation length and trainable depth of a
model under the `critical` plugin, the APJN profile J^{0,l} with its power-law exponent, a phase diagram over two of
(sigma_w, sigma_b, mu), or the critical value of one of them (Doshi, He, Gromov; seed_partial_jacobians.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import zoo.models
import zoo.param
from zoo.diagnostics import jacobian, phase, profile
from zoo.diagnostics.records import to_json
from zoo.diagnostics.report import run_report
from zoo.files import check_out_folder, write_atomic
from zoo.outputs import check_own_folder
from zoo.param import mean_field_theory as theory
from zoo.param.critical import check_option


@dataclasses.dataclass(frozen=True)
class CriticalitySpec:
    """grid: two (name, values) axes of a phase diagram (x, then y); find: (name, lo, hi) to bisect for chi = 1."""

    model: str = "mlp_resnet"
    width: int = 256
    depth: int = 30
    model_opt: dict[str, Any] = dataclasses.field(default_factory=dict)
    param_opt: dict[str, Any] = dataclasses.field(default_factory=dict)
    seeds: int = 8
    batch: int = 8
    probes: int = 2
    grid: tuple[tuple[str, list[float]], ...] = ()
    find: tuple[str, float, float] | None = None
    profile: bool = False


def criticality(spec: CriticalitySpec, out: Path) -> dict[str, Any]:
    """Every measurement the spec asks for, as one record; the figures (apjn_profile.png, phase_diagram.png) and
    criticality.json written into `out` once every measurement is done (a failure leaves `out` as it was)."""
    cfg = zoo.models.config(spec.model, width=spec.width, depth=spec.depth, **spec.model_opt)
    _check(spec, cfg, out)
    estimate = {"seeds": spec.seeds, "batch": spec.batch, "probes": spec.probes}
    plugin = zoo.param.get("critical", **spec.param_opt)
    fixed = {k: getattr(plugin, k) for k in spec.param_opt}  # typed by the plugin: numbers, flags, names
    record: dict[str, Any] = {"model": spec.model, "config": dict(vars(cfg)), **estimate}
    if spec.find:
        name, lo, hi = spec.find
        value = jacobian.find_critical(spec.model, cfg, name, lo, hi, fixed=fixed, **estimate)
        record["critical"] = {name: value}
        record["critical_interval"] = jacobian.critical_interval(spec.model, cfg, name, value, (lo, hi), fixed,
                                                                 **estimate)
        plugin = dataclasses.replace(jacobian.held_fixed(spec.model, cfg, plugin, {name: value}), **{name: value})
    record["report"] = run_report(spec.model, cfg, plugin, **estimate)
    figures = []
    if spec.profile:
        record["profile"], figure = _profile(spec, cfg, plugin.for_model(spec.model, cfg), estimate)
        figures.append((figure, "apjn_profile.png"))
    if spec.grid:
        (xn, xs), (yn, ys) = spec.grid
        rest = {k: v for k, v in fixed.items() if k not in (xn, yn)}
        chi, err = phase.phase_diagram(spec.model, cfg, (xn, xs), (yn, ys), rest, **estimate)
        line = phase.theory_line(cfg, (xn, xs), rest) if theory.describes(cfg) and yn == "sigma_w" else None
        title = f"{spec.model} L={spec.depth} n={spec.width} " + " ".join(f"{k}={v}" for k, v in spec.model_opt.items())
        figures.append((lambda path: phase.plot(chi, (xn, xs), (yn, ys), path, title=title, line=line),
                        "phase_diagram.png"))
        record["phase_diagram"] = {"x": [xn, xs], "y": [yn, ys], "chi": chi.tolist(), "stderr": err.tolist()}
    out.mkdir(parents=True, exist_ok=True)
    for draw, name in figures:
        draw(out / name)
    write_atomic(out / "criticality.json", to_json(record))
    return record


def _check(spec: CriticalitySpec, cfg: Any, out: Path) -> None:
    """What can be refused before anything is measured: sizes, estimate counts, the grid's axes and values (each in
    the plugin's range, zoo.param.critical.check_option) and the bisection's bounds, an option both given and varied,
    sigma_b without biases, a model too large for the memory free, and an `out` that is not a directory, cannot be
    made or holds another command's output."""
    if spec.width < 1 or spec.depth < 2:
        raise ValueError(f"width must be positive and depth at least 2, got {spec.width} and {spec.depth}")
    if min(spec.seeds, spec.batch, spec.probes) < 1:
        raise ValueError("--seeds, --batch and --probes must be positive")
    if spec.grid and spec.find:
        raise ValueError("--grid maps chi over two options and --find bisects one: give one of them")
    if len(spec.grid) not in (0, 2):
        raise ValueError("--grid takes exactly two axes (x, then y)")
    if spec.grid and spec.grid[0][0] == spec.grid[1][0]:
        raise ValueError(f"the two --grid axes must differ, got {spec.grid[0][0]} twice")
    for name, values in [*spec.grid, *([(spec.find[0], spec.find[1:])] if spec.find else [])]:
        check_option(name, values)
    varied = [name for name, _ in spec.grid] + ([spec.find[0]] if spec.find else [])
    fixed = sorted(set(varied) & set(spec.param_opt))
    if fixed:  # the grid or the bisection replaced the given value without a word
        how = "bisected (--find)" if spec.find and spec.find[0] == fixed[0] else "swept (--grid)"
        raise ValueError(f"{fixed[0]} is both given (--param-opt {fixed[0]}={spec.param_opt[fixed[0]]}) and {how}: "
                         "leave out one")
    if "sigma_b" in varied and getattr(cfg, "bias", True) is False:
        raise ValueError(f"sigma_b has no effect: {spec.model} is built without biases (add --model-opt bias=true)")
    jacobian.check_blocks(spec.model, cfg)
    jacobian.check_fits(spec.model, cfg, spec.batch)
    check_out_folder(out, "--out")
    check_own_folder(out, "--out", "criticality report")


def _profile(spec: CriticalitySpec, cfg: Any, plugin: Any, estimate: dict[str, int]
             ) -> tuple[dict, Callable[[Path], None]]:
    """J^{0,l} for l = 0..L, its fitted exponent, and for the MLP-ResNet the infinite-width product of the chi^l with
    the exponent fitted to it alike (what the measured one tends to with width); with the function that draws the
    figure into a path."""
    mean, err = jacobian.apjn(spec.model, cfg, plugin, 0, **estimate)
    bad = np.flatnonzero(~(np.isfinite(mean) & (mean > 0)))
    if bad.size:  # matplotlib's 'Data cannot be log-scaled' was the line the user got
        why = ("it underflows float32 there (deep in the ordered phase): raise sigma_w or lower the depth"
               if mean[bad[0]] == 0 else "the stream overflows float32 there (deep in the chaotic phase), where the "
               "network computes no Jacobian: lower sigma_w or the depth")
        raise ValueError(f"the APJN J^(0,l) is not a positive finite number from block {bad[0]} on: {why}")
    depth = cfg.depth
    slope, (lo, hi) = profile.exponent(mean, depth), profile.fit_range(depth)
    infinite = profile.infinite_width(cfg, plugin) if theory.describes(cfg) else None
    title = f"{spec.model} L={depth} n={spec.width}"
    record = {"apjn": mean.tolist(), "stderr": err.tolist(), "exponent": slope, "fit": [lo, hi],
              "infinite_width": None if infinite is None else [1.0, *infinite.tolist()],
              "exponent_infinite_width": None if infinite is None else profile.exponent([1.0, *infinite], depth)}
    return record, lambda path: profile.plot(mean, err, path, title, infinite)
