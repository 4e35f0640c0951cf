"""`python -m zoo.audit`: the rules a run really applies, measured per parameter across widths (and depths) and
judged against theory (zoo.audit). Prints one table per axis, writes the JSON to --json, and exits 1 when any
parameter fails, 0 otherwise; bad input is one line on stderr and exit status 2.

    python -m zoo.audit runs/gpt_mup_w512_d6_s0         # a run dir: its model, plugin, optimizer, mesh, ...
    python -m zoo.audit --model gpt --param mup --optimizer muon
    python -m zoo.audit --model mlp_resnet --param depth_mup --optimizer sgd --depths 2,8
    XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m zoo.audit --model gpt --param mup \\
        --mesh fsdp=4,tensor=2 --grad-accum 4
"""

from __future__ import annotations

import argparse
import sys

from zoo.cli import _kv, add_optimizer_flags

DEFAULT_WIDTHS = "64,128,256"
RUN_FLAGS = ("model", "param", "param_opt", "model_opt", "lr", "muon_io", "optimizer", "schedule", "warmup",
             "min_lr_ratio", "b1", "b2", "eps", "weight_decay", "clip_norm", "clip_rms", "mesh", "grad_accum",
             "precision")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m zoo.audit", description=__doc__.split("\n\n")[0],
                                allow_abbrev=False)
    a = p.add_argument
    a("run_dir", nargs="?", help="a zoo run directory: audit its settings (the flags below that describe a run are "
      "then refused; sizes default to its base width and width)")
    a("--model", default="mlp_resnet", help="model name (default: mlp_resnet)")
    a("--param", default="mup", help="parametrization plugin (default: mup)")
    a("--param-opt", action="append", type=_kv, default=[], metavar="K=V", help="plugin option, repeatable")
    a("--model-opt", action="append", type=_kv, default=[], metavar="K=V", help="model option, repeatable")
    a("--lr", type=float, default=1e-2, help="peak learning rate (default: 1e-2)")
    a("--muon-io", action="store_true", help="Muon also on the input and output layers")
    add_optimizer_flags(p)
    a("--widths", default=None, help=f"widths of the width sweep (default: {DEFAULT_WIDTHS} unless only --depths)")
    a("--depth", type=int, default=None, help="depth of the width sweep (default: 2)")
    a("--depths", default=None, help="depths of a depth sweep, at the smallest width (default: none)")
    a("--mesh", default=None, help="device mesh data=D,fsdp=F,tensor=T (default: data = all devices)")
    a("--grad-accum", type=int, default=1, help="microbatches per step (default: 1)")
    a("--precision", default="f32", help="f32 or bf16 (default: f32)")
    a("--batch-size", type=int, default=None, help="examples in the probe's batch (default: 16)")
    a("--tol", type=float, default=0.1, help="allowed |measured slope - theory's| (default: 0.1)")
    a("--seed", type=int, default=0, help="init seed (default: 0)")
    a("--json", default="runs/audit/audit.json", help="where the JSON goes (default: runs/audit/audit.json)")
    return p


def ints(text: str | None, flag: str) -> list[int]:
    if not text:
        return []
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag} takes comma-separated integers, got {text!r}") from None


def main(argv: list[str] | None = None) -> None:
    p = parser()
    args = p.parse_args(argv)
    try:
        from zoo.audit import audit

        if args.run_dir:
            run, widths, depths, depth = from_run_dir(args, p)
        else:
            run, widths, depths, depth = from_flags(args)
        audit = audit(run, widths, depths, depth=depth, tol=args.tol, seed=args.seed)
        if args.run_dir:
            audit.run["run_dir"] = args.run_dir
    except (ValueError, FileNotFoundError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    from rich.console import Console

    from zoo.audit.report import tables, write_json

    console = Console()
    console.width = max(console.width, 150)  # the table whole, in a pipe too
    for table in tables(audit):
        console.print(table)
    for line in audit.failures():
        console.print(f"[red]FAIL[/red] {line}", highlight=False)
    print(f"{'PASS' if audit.passed else 'FAIL'}; json: {write_json(audit, args.json)}")
    raise SystemExit(0 if audit.passed else 1)


def from_flags(args: argparse.Namespace) -> tuple:
    import zoo.param
    from zoo.audit import ZooRun
    from zoo.diagnostics.options import model_overrides
    from zoo.optim import OptimConfig

    optim = OptimConfig(name=args.optimizer or "adam", lr=args.lr, muon_io=args.muon_io, **{
        k: getattr(args, k) for k in ("schedule", "warmup", "min_lr_ratio", "b1", "b2", "eps", "weight_decay",
                                      "clip_norm", "clip_rms") if getattr(args, k) is not None})
    run = ZooRun(args.model, zoo.param.get(args.param, **dict(args.param_opt)), optim,
                 model_overrides(args.model, args.model_opt), args.mesh, args.grad_accum, args.precision,
                 args.batch_size or 16)
    depths = ints(args.depths, "--depths")
    return run, ints(args.widths or ("" if depths else DEFAULT_WIDTHS), "--widths"), depths, args.depth or 2


def from_run_dir(args: argparse.Namespace, p: argparse.ArgumentParser) -> tuple:
    from zoo.audit.rundir import from_run_dir as read

    given = [f for f in RUN_FLAGS if getattr(args, f) != p.get_default(f)]
    if given:
        raise ValueError(f"a run dir brings its own settings; --{given[0].replace('_', '-')} is not taken with it")
    d = read(args.run_dir)
    if args.batch_size:
        d.run.batch_size = args.batch_size
    depths = ints(args.depths, "--depths") if args.depths else d.depths
    return d.run, ints(args.widths, "--widths") if args.widths else d.widths, depths, args.depth or d.depth


if __name__ == "__main__":
    main()
