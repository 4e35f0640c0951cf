"""`python -m zoo.coord_check`: does a plugin scale activations the way its theory says?

Trains each width (and depth) for a few steps on one random batch, measures the RMS of every intermediate's
change h_t - h_0 (zoo.diagnostics.coord), fits the log-log slope per layer and step, and compares it with the
slope the plugin predicts (TP IVb section 3, TP VI section 7). In depth it also measures the change the
residual-branch parameters cause alone, the part that scales like L^(1 - alpha - gamma) (the input and readout
layers' Theta(1) change dominates the total at practical depths). A plugin that theory calls unstable along the
axis (a growing change, or an init that blows up) fails whatever the slopes. Prints a table, writes
coord_check_<axis>.png and .json to --out, and exits 1 when any layer fails or the plugin is unstable, 0 otherwise.

Unless --lr is given, the learning rate is chosen from a first measurement at the smallest size: the largest of
1e-3, 1e-3/sqrt(10), 1e-4, ... at which no activation (embedding, pre-activations, residual stream) moves by more
than --linear-limit of its RMS at init over the --steps steps, so the changes stay in the linear regime where
theory's slopes show already at small sizes.

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
    from zoo.diagnostics.coord_lr import FIRST_LR, LINEAR_LIMIT

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
    a("--lr", type=float, default=None, help="learning rate at the base size (constant) (default: the largest of "
      f"{FIRST_LR:g} / sqrt(10)^k whose changes at the smallest size stay within --linear-limit)")
    a("--linear-limit", type=float, default=LINEAR_LIMIT, help="largest change RMS(h_t - h_0) / RMS(h_0) of an "
      "activation at the smallest size that the chosen learning rate allows")
    a("--seeds", type=int, default=3, help="initializations (geometric mean)")
    a("--batch", type=int, default=16, help="examples in the one training batch")
    a("--tol", type=float, default=0.15, help="allowed |slope - expected|")
    a("--out", default="runs/coord_check", help="output directory")
    return p


def sweep(args: argparse.Namespace, axis: str, sizes: list[int], fixed: dict[str, Any]) -> dict[str, Any]:
    """One sweep over width or depth: data, slopes, expectations and verdicts (dropout off unless asked)."""
    import dataclasses

    import jax

    import zoo.models
    import zoo.param
    from zoo.diagnostics import coord, verdict
    from zoo.diagnostics.coord_lr import FIRST_LR, choose_lr, linear_change
    from zoo.diagnostics.inputs import random_batch
    from zoo.diagnostics.options import model_overrides
    from zoo.optim import OptimConfig

    overrides = {**model_overrides(args.model, args.model_opt), **fixed}
    if "dropout" in {f.name for f in dataclasses.fields(zoo.models.config(args.model))}:
        overrides.setdefault("dropout", 0.0)  # the change h_t - h_0 of a deterministic step
    plugin = zoo.param.get(args.param, **dict(args.param_opt))
    optim_cfg = OptimConfig(name=args.optimizer, lr=FIRST_LR if args.lr is None else args.lr)
    # base width: the smallest (every plugin is SP there); base depth 1: every depth is then well inside the
    # 1/sqrt(L) regime, where (1 + v/L)^L is already near its limit e^v (a base of min(depths) makes the shallowest
    # run unscaled and tilts the slopes by finite-depth terms). A base given with --model-opt is kept.
    base_key = "base_width" if axis == "width" else "base_depth"
    base = {base_key: overrides.get(base_key) or (min(sizes) if axis == "width" else 1)}
    cfg = zoo.models.config(args.model, **{**overrides, **base, axis: min(sizes)})
    batch = random_batch(cfg, args.batch, jax.random.key(1234))
    seeds = list(range(args.seeds))

    def run_at(size: int) -> coord.CoordRun:
        return coord.CoordRun(args.model, plugin, args.steps, optim_cfg, batch, branch=axis == "depth",
                              **{**overrides, **base, axis: size})

    first = run_at(min(sizes))
    if args.lr is None:
        lr, measured, change = choose_lr(lambda lr: first(seeds, lr), args.linear_limit)
    else:
        lr, measured = args.lr, first(seeds)
        change = linear_change(measured)
    runs = [measured if size == min(sizes) else run_at(size)(seeds, lr) for size in sizes]
    if axis == "depth":
        runs = [dataclasses.replace(r, total=verdict.at_depth_fractions(r.total, d),
                                    branch=verdict.at_depth_fractions(r.branch, d))
                for r, d in zip(runs, sizes, strict=True)]
    data = coord.geometric_mean([r.total for r in runs])
    # the branch parameters' part where it is one power law, L^(1 - alpha - gamma): the residual stream and the
    # logits (a pre-activation adds its own weights' L^-gamma, a transient at small depths; the logits do not move
    # under a zero readout)
    branch = {k: v for k, v in coord.geometric_mean([r.branch for r in runs]).items()
              if verdict.group_of(k) in ("stream", "output") and (v > 0).any()}
    groups = {verdict.group_of(k) for k in data}
    exp = verdict.expected(args.model, cfg, plugin, args.optimizer, axis, sorted(groups))
    stable = not exp.unstable
    verdicts = verdict.judge(coord.slopes(sizes, data), data, exp.total, args.tol, stable)
    branch_verdicts = verdict.judge(coord.slopes(sizes, branch), branch, exp.branch, args.tol, stable)
    growth = verdict.measured_growth(sizes, [r.total for r in runs], exp.total) + verdict.measured_growth(
        sizes, [{k: r.branch[k] for k in branch} for r in runs], exp.branch, branch=True)
    return {"axis": axis, "sizes": sizes, "data": data, "branch": branch, "expected": exp, "verdicts": verdicts,
            "branch_verdicts": branch_verdicts, "growth": growth, "growth_summary": verdict.growth_summary(growth),
            "lr": lr, "linear_change": change, "config": {**overrides, **base}}


def report(args: argparse.Namespace, result: dict[str, Any]) -> bool:
    """Print the table, write the PNG(s) and the JSON; True when every layer passes and theory calls the plugin
    stable."""
    import dataclasses

    from rich.console import Console
    from rich.table import Table

    from zoo.diagnostics import coord_plot

    axis, sizes, exp = result["axis"], result["sizes"], result["expected"]
    lr = f"lr={result['lr']:.3g}" + ("" if args.lr is not None else " (chosen)")
    table = Table(title=f"coordinate check: {args.model} / {args.param} / {args.optimizer} {lr}, "
                        f"{axis}s {','.join(map(str, sizes))}")
    for col in ("layer", "group", f"RMS at {axis} {sizes[0]}", f"at {sizes[-1]}",
                "slope t=" + ",".join(str(t + 1) for t in range(args.steps)), "expected", "verdict"):
        table.add_column(col, justify="left" if col in ("layer", "group") else "right")
    rows = [(v, result["data"], "") for v in result["verdicts"]] + \
        [(v, result["branch"], " (branch)") for v in result["branch_verdicts"]]
    for v, data, part in rows:
        rms = data[v.layer][:, -1]
        verdict = "[green]PASS[/]" if v.passed else "[red]FAIL[/]" + ("" if not v.matches else " (unstable)")
        table.add_row(v.layer + part, v.group, f"{rms[0]:.3g}", f"{rms[-1]:.3g}", " ".join(_slope(s) for s in v.slopes),
                      ("<= " if v.group == "attention" else "") + f"{v.expected:+.2f}", verdict)
    passed = not exp.unstable and all(v.passed for v, _, _ in rows)
    console = Console(width=160)
    console.print(table)
    console.print(f"largest change of an activation at {axis} {min(sizes)}: {result['linear_change']:.3g} of its RMS")
    failed = sorted({v.group for v, _, _ in rows if not v.matches})
    out = Path(args.out)
    png = out / f"coord_check_{axis}.png"
    verdict_text = "PASS" if passed else "FAIL (" + ", ".join(failed or ["unstable by theory"]) + ")"
    title = f"{args.model} / {args.param} {dict(args.param_opt) or ''} / {args.optimizer} {lr}: {verdict_text}"
    coord_plot.plot(sizes, result["data"], exp.total, png, title, axis, failed)
    if result["branch"]:
        coord_plot.plot(sizes, result["branch"], exp.branch, out / f"coord_check_{axis}_branch.png",
                        title + " (branch parameters alone)", axis, failed)
    record = {
        "model": args.model, "param": args.param, "param_opt": dict(args.param_opt), "optimizer": args.optimizer,
        "lr": result["lr"], "lr_chosen": args.lr is None, "linear_change": result["linear_change"],
        "steps": args.steps, "seeds": args.seeds, "tol": args.tol, "axis": axis, "sizes": sizes,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in result["config"].items()},
        "expected": exp.total, "expected_branch": exp.branch, "unstable": exp.unstable,
        "layers": {v.layer: {**dataclasses.asdict(v), "rms_change": result["data"][v.layer].tolist()}
                   for v in result["verdicts"]},
        "branch_layers": {v.layer: {**dataclasses.asdict(v), "rms_change": result["branch"][v.layer].tolist()}
                          for v in result["branch_verdicts"]},
        "growth": [dataclasses.asdict(g) for g in result["growth"]], "passed": passed,
    }
    (out / f"coord_check_{axis}.json").write_text(json.dumps(record, indent=1))
    if exp.unstable:
        measured = result["growth_summary"]
        console.print(f"[red]FAIL[/] ({axis}): unstable by theory: {'; '.join(exp.unstable)}"
                      + (f"; measured: {measured}" if measured else "") + f"; {png}")
    else:
        console.print(f"{'[green]PASS[/]' if passed else '[red]FAIL[/]'} ({axis}): {png}")
    output = [v for v in result["verdicts"] if v.group == "output" and not v.matches]
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
        if args.steps < 1 or args.seeds < 1 or args.batch < 1 or args.tol <= 0 or args.linear_limit <= 0:
            raise ValueError("--steps, --seeds, --batch, --tol and --linear-limit must be positive")
        if args.lr is not None and not 0 < args.lr < float("inf"):
            raise ValueError(f"--lr must be a positive number, got {args.lr}")
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
