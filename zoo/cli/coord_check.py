"""`python -m zoo.coord_check`: does a plugin scale activations the way its theory says? Runs the coordinate-check
experiment (zoo.diagnostics.coord_sweep) over widths and/or depths, prints a table per sweep (in width also the
change each part's parameters cause alone, rows "LAYER (PART alone)"), writes coord_check_<axis>.png and .json
(and coord_check_width_<part>.png for a part with a failing row) to --out, and exits 1 when any layer fails, in the
total or in a part, or the plugin is unstable, 0 otherwise (2 for a bad command line or any other error, never 1).

    python -m zoo.coord_check --model mlp_resnet --param mup
    python -m zoo.coord_check --model gpt --param sp --widths 64,128,256 --model-opt seq_len=16
    python -m zoo.coord_check --model mlp_resnet --param depth_mup --depths 4,8,16,32 --width 128
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from zoo.cli.boundary import boundary, interruptible
from zoo.cli.flags import (
    KeyValues,
    Once,
    Parser,
    ShownDefaults,
    add_compile_cache,
    finite,
    ints,
    kv,
    model_options,
    path_arg,
    positive,
    seed_count,
)
from zoo.diagnostics.coord_lr import FIRST_LR, LINEAR_LIMIT
from zoo.diagnostics.coord_sweep import CoordSpec
from zoo.files import check_out_folder
from zoo.outputs import check_own_folder
from zoo.train import compile_cache

DEFAULT_WIDTHS = [128, 256, 512, 1024]


def parser() -> argparse.ArgumentParser:
    import zoo.models
    import zoo.param
    from zoo.optim import OPTIMIZERS

    p = Parser(prog="python -m zoo.coord_check", description=__doc__.split("\n\n")[0],
               formatter_class=ShownDefaults)
    a = p.add_argument
    a("--model", default="mlp_resnet", help=f"one of {', '.join(zoo.models.names())}, or module:Class")
    a("--param", default="mup", help=f"parametrization plugin: {', '.join(zoo.param.names())}, or module:Class")
    a("--param-opt", action=KeyValues, type=kv, default=[], metavar="K=V", help="plugin option (e.g. alpha=1)")
    a("--model-opt", action=KeyValues, type=kv, default=[], metavar="K=V", help="model option (e.g. activation=abs)")
    a("--widths", type=ints, default=None, help="widths of the width sweep (default: 128,256,512,1024 unless "
      "--depths alone is given)")
    a("--depth", type=positive, default=None, help="depth of the width sweep (default: the model's)")
    a("--depths", type=ints, default=None, help="depths of a depth sweep (at --width)")
    a("--width", type=positive, default=None, help="width of the depth sweep (default: the smallest of --widths)")
    a("--steps", type=positive, default=3, help="training steps t = 1..T")
    a("--optimizer", default="adam", choices=OPTIMIZERS, help="the base optimizer")
    a("--muon-io", action="store_true", help="with --optimizer muon: Muon also on the input and output layers")
    a("--lr", type=finite, default=None, help="learning rate at the base size (constant) (default: the largest of "
      f"{FIRST_LR:g} / sqrt(10)^k whose changes at the smallest size stay within --linear-limit)")
    a("--linear-limit", type=finite, default=LINEAR_LIMIT, help="largest change RMS(h_t - h_0) / RMS(h_0) of an "
      "activation at the smallest size that the chosen learning rate allows")
    a("--seeds", type=seed_count, default=3, help="initializations (geometric mean)")
    a("--batch", type=positive, default=16, help="examples in the one training batch")
    a("--tol", type=finite, default=0.15, help="allowed |slope - expected|")
    a("--out", type=path_arg, action=Once, help="output directory (default: runs/coord_check/MODEL_PARAM_OPTIMIZER)")
    add_compile_cache(p)
    return p


def spec_of(args: argparse.Namespace) -> CoordSpec:
    import zoo.models
    import zoo.param

    if args.tol <= 0 or args.linear_limit <= 0:
        raise ValueError("--tol and --linear-limit must be positive")
    if args.lr is not None and args.lr <= 0:
        raise ValueError(f"--lr must be positive, got {args.lr}")
    if args.muon_io and args.optimizer != "muon":
        raise ValueError(f"--muon-io routes the input and output layers to Muon, but --optimizer is {args.optimizer}")
    zoo.param.get(args.param, **dict(args.param_opt))
    options = model_options(args.model, args.model_opt, sets(args))
    return CoordSpec(args.model, args.param, dict(args.param_opt), options, args.optimizer, args.muon_io, args.lr,
                     args.steps, args.seeds, args.batch, args.tol, args.linear_limit)


def sets(args: argparse.Namespace) -> dict[str, str]:
    """The model options the sweeps set (zoo.cli.flags.refuse_sizes): the width, and the depth where --depth or
    --depths gives it (else --model-opt depth=D is the width sweep's depth)."""
    given = [flag for flag, value in (("--depth", args.depth), ("--depths", args.depths)) if value is not None]
    return {"width": "--widths, --width", **({"depth": ", ".join(given)} if given else {})}


def sweeps(args: argparse.Namespace) -> list[tuple[str, list[int], dict[str, Any]]]:
    """(axis, sizes, fixed model options) of each sweep the flags ask for."""
    out = []
    widths = args.widths or ([] if args.depths else DEFAULT_WIDTHS)
    if len(widths) > 1 or not args.depths:
        if len(widths) < 2:
            raise ValueError("a width sweep needs at least two --widths")
        out.append(("width", widths, {} if args.depth is None else {"depth": args.depth}))
    if args.depths:
        if len(args.depths) < 2:
            raise ValueError("a depth sweep needs at least two --depths")
        out.append(("depth", args.depths, {"width": args.width or min(widths or DEFAULT_WIDTHS)}))
    return out


def show(spec: CoordSpec, result: dict[str, Any], png: Path) -> None:
    from rich.table import Table

    from zoo.cli.tables import console_for
    from zoo.diagnostics.coord_sweep import HINTS, passed

    axis, sizes, exp = result["axis"], result["sizes"], result["expected"]
    lr = f"lr={result['lr']:.3g}" + ("" if spec.lr is not None else " (chosen)")
    table = Table(title=f"coordinate check: {spec.model} / {spec.param} / {spec.optimizer} {lr}, "
                        f"{axis}s {','.join(map(str, sizes))}")
    for col in ("layer", "group", f"RMS at {axis} {sizes[0]}", f"at {sizes[-1]}",
                "slope t=" + ",".join(str(t + 1) for t in range(spec.steps)), "expected", "verdict"):
        table.add_column(col, justify="left" if col in ("layer", "group") else "right")
    rows = [(v, result["data"], "") for v in result["verdicts"]] + \
        [(v, result["branch"], " (branch)") for v in result["branch_verdicts"]] + \
        [(v, result["parts"][p], f" ({p} alone)") for p, vs in result.get("part_verdicts", {}).items() for v in vs]
    for v, data, part in rows:
        rms = data[v.layer][:, -1]
        if exp.unstable:  # no row passes a plugin unstable by theory: each says whether it moves as predicted
            mark = "as predicted" if v.matches else f"[red]{v.against_prediction()}[/]"
        else:
            mark = "[green]PASS[/]" if v.passed else "[red]FAIL[/]"
        table.add_row(v.layer + part, v.group, f"{rms[0]:.3g}", f"{rms[-1]:.3g}",
                      " ".join("  —  " if s != s else f"{s:+.2f}" for s in v.slopes),
                      "no change" if v.expected != v.expected else  # NaN: nothing trained moves it (frozen)
                      ("<= " if v.group == "attention" else "") +
                      ("" if v.first is None else f"{v.first:+.2f}, then to ") + f"{v.expected:+.2f}", mark)
    console = console_for(table)
    console.print(table)
    say = functools.partial(console.print, soft_wrap=True)  # a verdict is one line, to read and to grep, at any width
    say(f"largest change of an activation at {axis} {min(sizes)}: {result['linear_change']:.3g} of its RMS")
    if exp.unstable:
        measured = result["growth_summary"]
        say(f"[red]FAIL[/] ({axis}): unstable by theory: {'; '.join(exp.unstable)}"
            + (f"; measured: {measured}" if measured else "") + f"; {png}")
    else:
        say(f"{'[green]PASS[/]' if passed(result) else '[red]FAIL[/]'} ({axis}): {png}")
    for hint in (hint_of(spec, result) for hint_of in HINTS):
        if hint:
            say(hint)


@boundary(failed=2)  # its 1 is a FAIL
def main(argv: list[str] | None = None) -> None:
    from zoo.diagnostics.coord_sweep import check_sweep, coord_sweep, passed, write

    args = parser().parse_args(argv)
    compile_cache.use(args.compile_cache)
    spec = spec_of(args)
    name = "_".join(n.replace(":", "_").replace("/", "_") for n in (spec.model, spec.param, spec.optimizer))
    out = Path(args.out or f"runs/coord_check/{name}")
    check_out_folder(out, "--out")
    check_own_folder(out, "--out", "coord check")
    planned = sweeps(args)
    for axis, sizes, _ in planned:  # every sweep's flags checked before the first runs
        check_sweep(spec, axis, sizes)
    verdicts = []
    for axis, sizes, fixed in planned:
        result = interruptible(coord_sweep, spec, axis, sizes, fixed)
        show(spec, result, write(spec, result, out))
        verdicts.append(passed(result))
    raise SystemExit(0 if all(verdicts) else 1)
