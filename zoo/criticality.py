"""`python -m zoo.criticality`: chi_hat, correlation length and trainable depth of a model under the `critical`
plugin, the APJN profile J^{0,l} with its power-law exponent, a phase diagram over two of (sigma_w, sigma_b, mu),
or the critical value of one of them.

    python -m zoo.criticality --model mlp_resnet --depth 50 --model-opt mean_subtract=false
    python -m zoo.criticality --model mlp_resnet --depth 50 --model-opt pre_ln=true --profile --out runs/profile
    python -m zoo.criticality --model mlp_resnet --model-opt activation=erf --model-opt mean_subtract=false \\
        --model-opt bias=true --param-opt mu=0 --grid sigma_b=0:1:9 --grid sigma_w=0.25:2.5:9 --out runs/phase
    python -m zoo.criticality --model mlp_resnet --model-opt pre_ln=true --model-opt pre_nonlin=true \\
        --model-opt activation=erf --model-opt bias=true --param-opt mu=0 --param-opt sigma_w=1 \\
        --find sigma_b=0:1

Options of `critical` left out take the model's critical point. Bad input: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from zoo.cli import _kv
from zoo.diagnostics.jacobian import AXES


def _grid(text: str) -> tuple[str, list[float]]:
    """name=lo:hi:n -> (name, n evenly spaced values)."""
    name, _, spec = text.partition("=")
    parts = spec.split(":")
    if name not in AXES or len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected NAME=lo:hi:n with NAME in {', '.join(AXES)}, got {text!r}")
    try:
        lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad grid {text!r}: lo and hi are numbers, n an integer") from None
    if n < 2:
        raise argparse.ArgumentTypeError(f"a grid needs at least 2 points, got {text!r}")
    return name, [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def _find(text: str) -> tuple[str, float, float]:
    name, _, spec = text.partition("=")
    parts = spec.split(":")
    if name not in AXES or len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected NAME=lo:hi with NAME in {', '.join(AXES)}, got {text!r}")
    try:
        return name, float(parts[0]), float(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad range {text!r}") from None


def parser() -> argparse.ArgumentParser:
    import zoo.models

    p = argparse.ArgumentParser(prog="python -m zoo.criticality", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    a = p.add_argument
    a("--model", default="mlp_resnet", help=f"one of {', '.join(zoo.models.names())}")
    a("--width", type=int, default=256, help="model width")
    a("--depth", type=int, default=30, help="number of blocks L")
    a("--model-opt", action="append", type=_kv, default=[], metavar="K=V", help="model option (e.g. pre_ln=true)")
    a("--param-opt", action="append", type=_kv, default=[], metavar="K=V",
      help="option of the critical plugin: sigma_w, sigma_b, mu (default: the model's critical point)")
    a("--seeds", type=int, default=8, help="initializations averaged")
    a("--batch", type=int, default=8, help="random inputs per initialization")
    a("--probes", type=int, default=2, help="Hutchinson probes per input")
    a("--grid", action="append", type=_grid, default=[], metavar="NAME=lo:hi:n",
      help="phase-diagram axis, twice (x then y)")
    a("--find", type=_find, metavar="NAME=lo:hi", help="bisect NAME for chi_hat = 1")
    a("--profile", action="store_true", help="measure J^{0,l} for every block l, fit its power-law exponent over "
      "l in [L/5, L] and plot it (apjn_profile.png)")
    a("--out", default="runs/criticality", help="output directory (apjn_profile.png, phase_diagram.png, "
      "criticality.json)")
    return p


def run(args: argparse.Namespace) -> dict[str, Any]:
    from rich.console import Console
    from rich.table import Table

    import zoo.models
    import zoo.param
    from zoo.diagnostics import jacobian, phase, run_report
    from zoo.diagnostics.options import model_overrides

    overrides = model_overrides(args.model, args.model_opt)
    cfg = zoo.models.config(args.model, width=args.width, depth=args.depth, **overrides)
    if args.width < 1 or args.depth < 2:
        raise ValueError(f"width must be positive and depth at least 2, got {args.width} and {args.depth}")
    plugin = zoo.param.get("critical", **dict(args.param_opt))
    estimate = {"seeds": args.seeds, "batch": args.batch, "probes": args.probes}
    if min(estimate.values()) < 1:
        raise ValueError("--seeds, --batch and --probes must be positive")
    if len(args.grid) not in (0, 2):
        raise ValueError("--grid takes exactly two axes (x, then y)")
    varied = [name for name, _ in args.grid] + ([args.find[0]] if args.find else [])
    if "sigma_b" in varied and getattr(cfg, "bias", True) is False:
        raise ValueError(f"sigma_b has no effect: {args.model} is built without biases (add --model-opt bias=true)")
    fixed = {k: float(v) for k, v in dict(args.param_opt).items()}
    out: dict[str, Any] = {"model": args.model, "config": {k: v for k, v in vars(cfg).items()}, **estimate}
    console = Console()
    if args.find:
        name, lo, hi = args.find
        value = jacobian.find_critical(args.model, cfg, name, lo, hi, fixed=fixed, **estimate)
        out["critical"] = {name: value}
        console.print(f"critical {name} = {value:.4f}  (chi_hat = 1 with {fixed or 'the default options'})")
        plugin = zoo.param.get("critical", **{**fixed, name: value})
    report = run_report(args.model, cfg, plugin, **estimate)
    out["report"] = report
    table = Table(title=f"{args.model} width {args.width} depth {args.depth}, critical plugin")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    notes = [value for value in report.values() if isinstance(value, str)]
    for key, value in report.items():
        if not isinstance(value, str):
            table.add_row(key, f"{value:.4g}")
    console.print(table)
    for note in notes:
        console.print(note)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.profile:
        out["profile"] = _profile(args, cfg, plugin.for_model(args.model, cfg), estimate, console)
    if args.grid:
        (xn, xs), (yn, ys) = args.grid
        rest = {k: v for k, v in fixed.items() if k not in (xn, yn)}
        chi, err = phase.phase_diagram(args.model, cfg, (xn, xs), (yn, ys), rest, **estimate)
        line = phase.theory_line(cfg, (xn, xs), rest) if args.model == "mlp_resnet" and yn == "sigma_w" else None
        png = Path(args.out) / "phase_diagram.png"
        title = f"{args.model} L={args.depth} n={args.width} " + " ".join(f"{k}={v}" for k, v in overrides.items())
        phase.plot(chi, (xn, xs), (yn, ys), png, title=title, line=line)
        out["phase_diagram"] = {"x": [xn, xs], "y": [yn, ys], "chi": chi.tolist(), "stderr": err.tolist()}
        console.print(f"phase diagram: {png}")
    (Path(args.out) / "criticality.json").write_text(json.dumps(_plain(out), indent=1))
    return out


def _profile(args: argparse.Namespace, cfg: Any, plugin: Any, estimate: dict[str, int], console: Any) -> dict:
    """J^{0,l} for l = 0..L, its fitted exponent, the figure; the infinite-width product of the chi^l for the
    MLP-ResNet. Prints ten rows of the profile and the exponent."""
    from zoo.diagnostics import jacobian, profile
    from zoo.param import mean_field_theory as theory

    mean, err = jacobian.apjn(args.model, cfg, plugin, 0, **estimate)
    depth = cfg.depth
    slope, (lo, hi) = profile.exponent(mean, depth), profile.fit_range(depth)
    infinite = None
    if args.model == "mlp_resnet":
        block = theory.Block.of(cfg, float(plugin.branch_multiplier(cfg.depth, cfg.base_depth or cfg.depth)))
        chis, _ = theory.recursion(block, float(plugin.sigma_w), float(plugin.sigma_b), float(plugin.mu), depth)
        infinite = np.cumprod(chis) if len(chis) == depth else None
    rows = sorted({int(round(v)) for v in np.geomspace(1, depth, 10)})
    console.print("APJN J^{0,l}: " + "  ".join(f"l={l}: {mean[l]:.4g}" for l in rows))
    console.print(f"power-law exponent of J^{{0,l}} over l in [{lo}, {hi}]: {slope:+.3f}")
    png = Path(args.out) / "apjn_profile.png"
    profile.plot(mean, err, png, f"{args.model} L={depth} n={args.width}", infinite)
    console.print(f"APJN profile: {png}")
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


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
