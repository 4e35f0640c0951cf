"""`python -m zoo.sweep`: an LR sweep over widths and/or depths (zoo.sweeps.runner.run_sweep: every LR x seed of a
shape as one program, on a CPU over every core), then the transfer report (table, DIR/sweep.png, DIR/summary.json).
Rerunning skips finished shapes; --report-only re-renders from DIR."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from zoo.cli.boundary import boundary
from zoo.cli.flags import (
    Once,
    Parser,
    add_allow_import,
    add_compile_cache,
    add_policy_flags,
    add_settings,
    check_proxy_needs_policy,
    numbers_text,
    path_arg,
    policy_of,
    positive,
    proxy_steps,
    settings,
)
from zoo.config import FLAT, RunConfig, resolve
from zoo.sweeps import report
from zoo.sweeps.grid import parse_ints, parse_lrs
from zoo.train import compile_cache

# The settings every member shares, from the schema (as train.py has them); sizes and the LR are the sweep's own,
# and the run dir, checkpoints, sources and the mesh have no meaning for a sweep.
NOT_SWEPT = ("width", "depth", "base_width", "base_depth", "lr", "run_dir", "init_from", "fork_from",
             "eval_every", "ckpt_every", "log_every", "keep", "max_loss_ratio", "diversity", "mesh", "remat",
             "grad_accum", "epochs", "stream", "workers")
RUN_FLAGS = tuple(name for name in FLAT if name not in NOT_SWEPT)


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m zoo.sweep", argument_default=None,
        description="LR sweep with a transfer report: loss vs log2 LR per width or depth, best LR per size, "
        "and the transfer score (grid steps the best LR moves across sizes).")
    a = p.add_argument
    a("--out", type=path_arg, action=Once, required=True,
      help="sweep dir: sweep.json, results.jsonl, sweep.png, summary.json")
    a("--widths", "--width", type=numbers_text, help="comma list of widths (default: the model's width)")
    a("--depths", "--depth", type=numbers_text, help="comma list of depths (default: the model's depth)")
    a("--report-only", action="store_true", help="re-render the report from --out without training")
    add_lr_flags(p)
    add_policy_flags(p, "maps a proxy's settings to this sweep's batch size and steps (its --lrs are the proxy's: "
                     "each is trained times the policy's LR factor; python -m zoo.fit --policy reads them back)")
    add_run_flags(p)
    add_allow_import(p)
    return p


def add_lr_flags(p: argparse.ArgumentParser) -> None:
    """The flags of an LR sweep (zoo.sweep and zoo.transfer): the grid, seeds, metric, chunk, worker processes,
    compile cache."""
    a = p.add_argument
    a("--lrs", type=numbers_text,
      help="required: comma list (1e-3,2^-8) or log2 range start:stop:step (2^-12:2^-4:1, stop included)")
    a("--seeds", type=positive, default=1, help="seeds per LR (seed, seed+1, ...), averaged in the report (default 1)")
    a("--metric", default="train_loss", choices=report.METRICS, help="loss that picks the best LR (default train_loss)")
    a("--chunk", type=positive, default=100, help="train steps per compiled scan (default 100)")
    a("--processes", type=positive, default=1, help="split each shape's members over this many worker processes, "
      "each pinned to its own CPU cores (at most one per core; default 1: one program over every core's device)")
    add_compile_cache(p)


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """The settings every member shares (RUN_FLAGS); sizes are each tool's own, and the base sizes default to the
    smallest."""
    p.add_argument("--base-width", type=positive, help="base width n0 (default: the smallest width)")
    p.add_argument("--base-depth", type=positive, help="base depth L0 (default: the smallest depth)")
    add_settings(p, RUN_FLAGS)


def show(out: Path, metric: str) -> report.Summary:
    """Print the table; DIR/sweep.png and DIR/summary.json are written by zoo.sweeps.report.write, under DIR's lock
    (--report-only wrote a report of two widths into a sweep training its third, and a late write could have left
    it stale)."""
    from zoo.cli.tables import console_for
    from zoo.sweeps.results import SETTINGS
    from zoo.train.lock import RunLock

    sweep = (out / SETTINGS).is_file()  # a DIR that holds none: its own line, and no lock file left there
    with RunLock(out, what="sweep", flag="--out") if sweep else contextlib.nullcontext():
        summary, head, png = report.write(out, metric)
    table = report.table(summary, head)
    console_for(table).print(table)
    for line in summary.warnings():
        print(f"warning: {line}")
    print(f"plot: {png}")
    return summary


@boundary(per_core=True)
def main(argv: list[str] | None = None) -> None:
    p = parser()
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.report_only:
        check_report_only(p, args)
        show(out, args.metric)
        return
    check_lr_flags(p, args)
    spec = build_spec(args)
    compile_cache.use(args.compile_cache)
    from zoo.sweeps.runner import run_sweep

    run_sweep(spec)
    show(out, args.metric)


REPORT_FLAGS = ("out", "report_only", "metric", "help")  # what --report-only reads; the rest is training's


def check_report_only(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--report-only re-renders DIR's results: a training flag given with it (--lrs, --widths, --steps) was
    ignored silently."""
    given = [a.option_strings[0] for a in p._actions
             if a.dest not in REPORT_FLAGS and getattr(args, a.dest, None) != p.get_default(a.dest)]
    if given:
        raise ValueError(f"--report-only re-renders the results in --out; {', '.join(given)} would not change them: "
                         "leave them out (or drop --report-only to train)")


def check_lr_flags(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--lrs given and not empty (the grid itself is read by parse_lrs): a command line without one is malformed,
    status 2 as argparse's own refusals (docs/reliability.md)."""
    if args.lrs is None:
        p.error("the following arguments are required: --lrs")
    if not args.lrs.strip():
        p.error("argument --lrs: empty (a comma list such as 1e-3,2^-8, or a log2 range such as 2^-12:2^-4:1)")


def run_config(args: argparse.Namespace) -> RunConfig:
    """The RunConfig of the parsed run flags (model recipe < flags); an unknown plugin, plugin option or model
    option fails here, before any data is loaded. The base width and depth are the flags' alone: a recipe's (its
    model's own size) would stand in for the sweep's smallest size, or the transfer's proxy, that they default to."""
    run = resolve({**settings(args, RUN_FLAGS), "base_width": args.base_width, "base_depth": args.base_depth})
    return run.replace(base_width=args.base_width, base_depth=args.base_depth)


def under_policy(args: argparse.Namespace, run: RunConfig, lrs: list[float]) -> tuple[RunConfig, list[float]]:
    """With --policy: the run at its batch size and steps under the settings the policy maps the proxy's to (the
    proxy at --proxy-batch-size and --proxy-steps), and the LRs, the proxy's, times the policy's factor."""
    import zoo.policy

    policy = policy_of(args, run.optim.name)
    check_proxy_needs_policy(args, policy)
    if policy is None:
        return run, lrs
    if run.loop.steps is None:
        raise ValueError("--policy maps the proxy's settings to this sweep's horizon: give it in --steps")
    policy.check_run(run)
    note_elsewhere(policy, run, args.metric)
    if policy.name == "fitted":
        unapplied = sorted({a for law in policy.read().laws.values() for a in law.exponents} & {"width", "depth"})
        if unapplied:
            print(f"note: the law's {' and '.join(unapplied)} terms are not applied here: a sweep maps the proxy's "
                  "batch size and steps to its own, and its widths and depths share one LR grid (zoo.transfer "
                  "applies them to a target)", file=sys.stderr)
    change = zoo.policy.Change(args.proxy_batch_size or run.loop.batch_size, run.loop.batch_size,
                               proxy_steps(args, run) or run.loop.steps, run.loop.steps)
    mapped, factor = zoo.policy.mapped_run(run, policy, change)
    return mapped, [lr * factor for lr in lrs]


def note_elsewhere(policy: Any, run: RunConfig, metric: str) -> None:
    """Under a fitted law: a note on stderr when the run's data or metric is not the one the law was fitted on."""
    note = policy.read().elsewhere(run.data.name, metric) if policy.name == "fitted" else None
    if note:
        print(note, file=sys.stderr)


def build_spec(args: argparse.Namespace):
    """The SweepSpec of the parsed flags (model defaults < flags)."""
    from zoo.sweeps.runner import SweepSpec

    run, lrs = under_policy(args, run_config(args), parse_lrs(args.lrs))
    widths = parse_ints(args.widths, "--widths") if args.widths is not None else []  # "" is refused, not the default
    depths = parse_ints(args.depths, "--depths") if args.depths is not None else []
    return SweepSpec(run=run, lrs=lrs, out=Path(args.out), widths=widths, depths=depths,
                     seeds=args.seeds, chunk=args.chunk, processes=args.processes)

