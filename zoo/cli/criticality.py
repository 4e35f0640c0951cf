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

Options of `critical` left out take the model's critical point (zoo.diagnostics.criticality runs the experiment).
"""

from __future__ import annotations

import argparse
import functools
import math
from pathlib import Path

import numpy as np

from zoo.cli.boundary import boundary, interruptible
from zoo.cli.flags import (
    KeyValues,
    Once,
    Parser,
    ShownDefaults,
    add_compile_cache,
    kv,
    model_options,
    path_arg,
    positive,
    seed_count,
)
from zoo.diagnostics.jacobian import AXES
from zoo.schema import to_float, to_int
from zoo.train import compile_cache

MAX_POINTS = 1024  # per grid axis and of --probes, as --seeds: a diagram measures points^2 x seeds networks


def _probe_count(text: str) -> int:
    """Hutchinson probes per input: a positive integer up to MAX_POINTS (each adds one jvp through the stack: 10^8
    ran for hours, and past 2^31 JAX refused the count with an OverflowError)."""
    value = positive(text)
    if value > MAX_POINTS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_POINTS} (the probes' mean converges like 1 / sqrt of "
                                         f"their count; more seeds or inputs average more), got {text!r}")
    return value


def _finite_bound(text: str) -> float:
    value = to_float(text)
    if not math.isfinite(value):
        raise ValueError
    return value


def _grid(text: str) -> tuple[str, list[float]]:
    """name=lo:hi:n -> (name, n evenly spaced values)."""
    name, _, spec = text.partition("=")
    parts = spec.split(":")
    if name not in AXES or len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected NAME=lo:hi:n with NAME in {', '.join(AXES)}, got {text!r}")
    try:
        lo, hi, n = _finite_bound(parts[0]), _finite_bound(parts[1]), to_int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad grid {text!r}: lo and hi are numbers, n an integer") from None
    if not 2 <= n <= MAX_POINTS:
        raise argparse.ArgumentTypeError(f"a grid axis takes 2 to {MAX_POINTS} points, got {text!r}")
    if lo == hi:
        raise argparse.ArgumentTypeError(f"a grid axis needs lo != hi (its {n} points would be one), got {text!r}")
    return name, [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def _find(text: str) -> tuple[str, float, float]:
    name, _, spec = text.partition("=")
    parts = spec.split(":")
    if name not in AXES or len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected NAME=lo:hi with NAME in {', '.join(AXES)}, got {text!r}")
    try:
        return name, _finite_bound(parts[0]), _finite_bound(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad range {text!r}") from None


def parser() -> argparse.ArgumentParser:
    import zoo.models

    p = Parser(prog="python -m zoo.criticality", description=__doc__.split("\n\n")[0],
               formatter_class=ShownDefaults)
    a = p.add_argument
    a("--model", default="mlp_resnet", help=f"one of {', '.join(zoo.models.names())}, or module:Class")
    a("--width", type=positive, default=256, help="model width")
    a("--depth", type=positive, default=30, help="number of blocks L")
    a("--model-opt", action=KeyValues, type=kv, default=[], metavar="K=V", help="model option (e.g. pre_ln=true)")
    a("--param-opt", action=KeyValues, type=kv, default=[], metavar="K=V",
      help="option of the critical plugin: sigma_w, sigma_b, mu (default: the model's critical point)")
    a("--seeds", type=seed_count, default=8, help="initializations averaged")
    a("--batch", type=positive, default=8, help="random inputs per initialization")
    a("--probes", type=_probe_count, default=2, help=f"Hutchinson probes per input (at most {MAX_POINTS})")
    a("--grid", action="append", type=_grid, default=[], metavar="NAME=lo:hi:n",
      help="phase-diagram axis, twice (x then y)")
    a("--find", type=_find, metavar="NAME=lo:hi", help="bisect NAME for chi_hat = 1")
    a("--profile", action="store_true", help="measure J^{0,l} for every block l, fit its power-law exponent over "
      "l in [L/5, L] and plot it (apjn_profile.png)")
    a("--out", type=path_arg, action=Once, default="runs/criticality",
      help="output directory (apjn_profile.png, phase_diagram.png, criticality.json)")
    add_compile_cache(p)
    return p


@boundary
def main(argv: list[str] | None = None) -> None:
    from rich.table import Table

    from zoo.cli.tables import console_for
    from zoo.diagnostics.criticality import CriticalitySpec, criticality

    args = parser().parse_args(argv)
    compile_cache.use(args.compile_cache)
    options = model_options(args.model, args.model_opt, {"width": "--width", "depth": "--depth"})
    spec = CriticalitySpec(args.model, args.width, args.depth, options,
                           dict(args.param_opt), args.seeds, args.batch, args.probes, tuple(args.grid), args.find,
                           args.profile)
    out = Path(args.out)
    record = interruptible(criticality, spec, out)
    table = Table(title=f"{args.model} width {args.width} depth {args.depth}, critical plugin")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for key, value in record["report"].items():
        if not isinstance(value, str):
            table.add_row(key, f"{value:.4g}")
    console = console_for(table)
    say = functools.partial(console.print, soft_wrap=True)  # a path or a number is never cut across lines
    if args.find:
        name, value = next(iter(record["critical"].items()))
        held = ", ".join(f"{k} = {record['report'][k]:.4g}" for k in AXES if k != name)
        a, b = record["critical_interval"]
        within = f"95% interval {a:.4f}-{b:.4f} over the {args.seeds} seeds" if args.seeds > 1 else "one seed: no " \
            "interval"
        say(f"critical {name} = {value:.4f}  ({within}; chi_hat = 1 at {held})")
    console.print(table)
    for note in (value for value in record["report"].values() if isinstance(value, str)):
        say(note)
    if args.profile:
        prof = record["profile"]
        depth = args.depth
        rows = sorted({int(round(v)) for v in np.geomspace(1, depth, 10)})
        say("APJN J^{0,l}: " + "  ".join(f"l={l}: {prof['apjn'][l]:.4g}" for l in rows))
        lo, hi = prof["fit"]
        theory = prof["exponent_infinite_width"]
        say(f"power-law exponent of J^{{0,l}} over l in [{lo}, {hi}]: {prof['exponent']:+.3f}"
            + ("" if theory is None else f" (infinite width: {theory:+.3f})"))
        say(f"APJN profile: {out / 'apjn_profile.png'}")
    if args.grid:
        say(f"phase diagram: {out / 'phase_diagram.png'}")
