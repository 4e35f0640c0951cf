"""`python -m zoo.audit`: the rules a run really applies, measured per parameter across widths (and depths) and
judged against theory (zoo.audit). Prints one table per axis, writes the JSON to --json, and exits 1 when any
parameter fails, 0 otherwise; bad input is one line on stderr and exit status 2.

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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m zoo.audit", description=__doc__.split("\n\n")[0],
                                allow_abbrev=False)
    a = p.add_argument
    a("--model", default="mlp_resnet", help="model name (default: mlp_resnet)")
    a("--param", default="mup", help="parametrization plugin (default: mup)")
    a("--param-opt", action="append", type=_kv, default=[], metavar="K=V", help="plugin option, repeatable")
    a("--model-opt", action="append", type=_kv, default=[], metavar="K=V", help="model option, repeatable")
    a("--lr", type=float, default=1e-2, help="peak learning rate (default: 1e-2)")
    a("--muon-io", action="store_true", help="Muon also on the input and output layers")
    add_optimizer_flags(p)
    a("--widths", default=None, help=f"widths of the width sweep (default: {DEFAULT_WIDTHS} unless only --depths)")
    a("--depth", type=int, default=2, help="depth of the width sweep (default: 2)")
    a("--depths", default=None, help="depths of a depth sweep, at the smallest width (default: none)")
    a("--mesh", default=None, help="device mesh data=D,fsdp=F,tensor=T (default: data = all devices)")
    a("--grad-accum", type=int, default=1, help="microbatches per step (default: 1)")
    a("--precision", default="f32", help="f32 or bf16 (default: f32)")
    a("--batch-size", type=int, default=16, help="examples in the probe's batch (default: 16)")
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
    args = parser().parse_args(argv)
    try:
        import zoo.param
        from zoo.audit import ZooRun, audit
        from zoo.diagnostics.options import model_overrides
        from zoo.optim import OptimConfig

        optim = OptimConfig(name=args.optimizer or "adam", lr=args.lr, muon_io=args.muon_io, **{
            k: getattr(args, k) for k in ("schedule", "warmup", "min_lr_ratio", "b1", "b2", "eps", "weight_decay",
                                          "clip_norm", "clip_rms") if getattr(args, k) is not None})
        run = ZooRun(args.model, zoo.param.get(args.param, **dict(args.param_opt)), optim,
                     model_overrides(args.model, args.model_opt), args.mesh, args.grad_accum, args.precision,
                     args.batch_size)
        depths = ints(args.depths, "--depths")
        widths = ints(args.widths or ("" if depths else DEFAULT_WIDTHS), "--widths")
        audit = audit(run, widths, depths, depth=args.depth, tol=args.tol, seed=args.seed)
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


if __name__ == "__main__":
    main()
