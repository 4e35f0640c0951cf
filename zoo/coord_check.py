"""`python -m zoo.coord_check`: does a plugin scale activations the way its theory says?

Trains each width (and depth) for a few steps on one random batch, measures the RMS of every intermediate's
change h_t - h_0 (zoo.diagnostics.coord), fits the log-log slope per layer and step, and compares it with the
slope the plugin predicts (TP IVb section 3; capped at 0: growth means instability). Prints a table, writes
coord_check.png and coord_check.json to --out, and exits 1 when any layer fails, 0 when all pass.

    python -m zoo.coord_check --model mlp_resnet --param mup
    python -m zoo.coord_check --model gpt --param sp --widths 64,128,256 --model-opt seq_len=16
    python -m zoo.coord_check --model mlp_resnet --param depth_mup --depths 4,8,16,32 --width 128

Bad input: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from zoo.cli import _kv

DEFAULT_WIDTHS = [128, 256, 512, 1024]


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parser() -> argparse.ArgumentParser:
    import zoo.models
    import zoo.param

    p = argparse.ArgumentParser(prog="python -m zoo.coord_check", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    a = p.add_argument
    a("--model", default="mlp_resnet", help=f"one of {', '.join(zoo.models.names())}")
    a("--param", default="mup", help=f"parametrization plugin: {', '.join(zoo.param.names())}")
    a("--param-opt", action="append", type=_kv, default=[], metavar="K=V", help="plugin option (e.g. alpha=1)")
    a("--model-opt", action="append", type=_kv, default=[], metavar="K=V", help="model option (e.g. activation=abs)")
    a("--widths", type=_ints, default=None, help="widths of the width sweep (default: 128,256,512,1024 unless "
      "--depths alone is given)")
    a("--depth", type=int, default=None, help="depth of the width sweep (default: the model's)")
    a("--depths", type=_ints, default=None, help="depths of a depth sweep (at --width)")
    a("--width", type=int, default=None, help="width of the depth sweep (default: the smallest of --widths)")
    a("--steps", type=int, default=3, help="training steps t = 1..T")
    a("--optimizer", default="adam", help="sgd, momentum, adam, adamw, lion, adafactor")
    a("--lr", type=float, default=1e-3, help="learning rate at the base width (constant; small enough that the "
      "changes stay below the activations, where the theory's slopes show at small widths)")
    a("--seeds", type=int, default=3, help="initializations (geometric mean)")
    a("--batch", type=int, default=16, help="examples in the one training batch")
    a("--tol", type=float, default=0.15, help="allowed |slope - expected|")
    a("--out", default="runs/coord_check", help="output directory")
    return p


def sweep(args: argparse.Namespace, axis: str, sizes: list[int], fixed: dict[str, Any]) -> dict[str, Any]:
    """One sweep over width or depth: data, slopes, expectations and verdicts (dropout off unless asked)."""
    import dataclasses

    import jax
    import numpy as np

    import zoo.models
    import zoo.param
    from zoo.diagnostics import coord, verdict
    from zoo.diagnostics.inputs import random_batch
    from zoo.diagnostics.options import model_overrides
    from zoo.optim import OptimConfig

    overrides = {**model_overrides(args.model, args.model_opt), **fixed}
    if "dropout" in {f.name for f in dataclasses.fields(zoo.models.config(args.model))}:
        overrides.setdefault("dropout", 0.0)  # the change h_t - h_0 of a deterministic step
    plugin = zoo.param.get(args.param, **dict(args.param_opt))
    optim_cfg = OptimConfig(name=args.optimizer, lr=args.lr)
    # base depth 1: every depth is then well inside the 1/sqrt(L) regime, where (1 + v/L)^L is already near its
    # limit e^v; a base of min(depths) makes the shallowest run unscaled and tilts the slopes by finite-depth terms
    base = {"base_width": min(sizes)} if axis == "width" else {"base_depth": 1}
    cfg = zoo.models.config(args.model, **{**overrides, **base, axis: sizes[0]})
    batch = random_batch(cfg, args.batch, jax.random.key(1234))
    if axis == "width":
        data = coord.coord_data(args.model, plugin, sizes, args.seeds, args.steps, optim_cfg, batch,
                                **overrides, **base)
    else:
        width, rest = overrides["width"], {k: v for k, v in overrides.items() if k != "width"}
        rows = [verdict.at_depth_fractions(
            coord.coord_data(args.model, plugin, [width], args.seeds, args.steps, optim_cfg, batch,
                             **{**rest, "depth": d, **base}), d) for d in sizes]
        data = {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
    slopes = coord.slopes(sizes, data)
    expectations = verdict.expected(args.model, cfg, plugin, args.optimizer, axis)
    verdicts = verdict.judge(slopes, data, expectations, args.tol)
    return {"axis": axis, "sizes": sizes, "data": data, "expected": expectations, "verdicts": verdicts,
            "config": {**overrides, **base}}


def report(args: argparse.Namespace, result: dict[str, Any]) -> bool:
    """Print the table, write the PNG and the JSON; True when every layer passes."""
    import dataclasses

    from rich.console import Console
    from rich.table import Table

    from zoo.diagnostics import coord_plot

    axis, sizes, verdicts = result["axis"], result["sizes"], result["verdicts"]
    table = Table(title=f"coordinate check: {args.model} / {args.param} / {args.optimizer} lr={args.lr}, "
                        f"{axis}s {','.join(map(str, sizes))}")
    for col in ("layer", "group", f"RMS at {axis} {sizes[0]}", f"at {sizes[-1]}",
                "slope t=" + ",".join(str(t + 1) for t in range(args.steps)), "expected", "verdict"):
        table.add_column(col, justify="left" if col in ("layer", "group") else "right")
    for v in verdicts:
        rms = result["data"][v.layer][:, -1]
        expected = f"{v.expected:+.2f}" + ("" if v.raw == v.expected else f" (theory {v.raw:+.2f}: unstable)")
        table.add_row(v.layer, v.group, f"{rms[0]:.3g}", f"{rms[-1]:.3g}", " ".join(_slope(s) for s in v.slopes),
                      ("<= " if v.group == "attention" else "") + expected,
                      "[green]PASS[/]" if v.passed else "[red]FAIL[/]")
    passed = all(v.passed for v in verdicts)
    console = Console(width=160)
    console.print(table)
    failed = sorted({v.group for v in verdicts if not v.passed})
    out = Path(args.out)
    png = out / f"coord_check_{axis}.png"
    title = (f"{args.model} / {args.param} {dict(args.param_opt) or ''} / {args.optimizer} lr={args.lr}: "
             f"{'PASS' if passed else 'FAIL (' + ', '.join(failed) + ')'}")
    coord_plot.plot(sizes, result["data"], {g: e for g, (e, _) in result["expected"].items()}, png, title, axis,
                    failed)
    record = {
        "model": args.model, "param": args.param, "param_opt": dict(args.param_opt), "optimizer": args.optimizer,
        "lr": args.lr, "steps": args.steps, "seeds": args.seeds, "tol": args.tol, "axis": axis, "sizes": sizes,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in result["config"].items()},
        "expected": {g: {"expected": e, "theory": r} for g, (e, r) in result["expected"].items()},
        "layers": {v.layer: {**dataclasses.asdict(v), "rms_change": result["data"][v.layer].tolist()}
                   for v in verdicts},
        "passed": passed,
    }
    (out / f"coord_check_{axis}.json").write_text(json.dumps(record, indent=1))
    console.print(f"{'[green]PASS[/]' if passed else '[red]FAIL[/]'} ({axis}): {png}")
    output = [v for v in verdicts if v.group == "output" and not v.passed]
    if axis == "width" and output and all(-0.5 < s < 0 for s in output[0].slopes if s == s) and \
            not dict(args.param_opt).get("zero_init"):
        console.print("hint: only shrinking output changes fail. A random readout V0 adds V0 . dh / n to the "
                      "logits' change, a term that shrinks like n^-1/2 and tilts the slope below 0 at small widths; "
                      "check with --param-opt zero_init=true (muP allows a zero readout) or at larger widths.")
    return passed


def _slope(s: float) -> str:
    return "  —  " if s != s else f"{s:+.2f}"  # NaN: the layer did not move at that step


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        if args.steps < 1 or args.seeds < 1 or args.batch < 1 or args.tol <= 0:
            raise ValueError("--steps, --seeds, --batch and --tol must be positive")
        sweeps = []
        widths = args.widths or ([] if args.depths else DEFAULT_WIDTHS)
        if len(widths) > 1 or not args.depths:
            if len(widths) < 2:
                raise ValueError("a width sweep needs at least two --widths")
            sweeps.append(("width", widths, {} if args.depth is None else {"depth": args.depth}))
        if args.depths:
            if len(args.depths) < 2:
                raise ValueError("a depth sweep needs at least two --depths")
            sweeps.append(("depth", args.depths, {"width": args.width or min(widths or DEFAULT_WIDTHS)}))
        Path(args.out).mkdir(parents=True, exist_ok=True)
        passed = [report(args, sweep(args, *s)) for s in sweeps]
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    raise SystemExit(0 if all(passed) else 1)


if __name__ == "__main__":
    main()
