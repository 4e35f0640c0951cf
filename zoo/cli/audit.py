"""`python -m zoo.audit [RUN_DIR]`: the rules a run really applies, measured per parameter across widths (and
depths) and judged against theory (zoo.audit). Prints one table per axis, writes the JSON to --json, and exits 1 when
any parameter fails (2 for a bad command line or any other error, never 1).

    python -m zoo.audit runs/gpt_mup_w512_d6_s0          # a run dir: its model, plugin, optimizer, mesh, ...
    python -m zoo.audit --model gpt --param mup --optimizer muon --model-opt seq_len=32
    python -m zoo.audit --model vit --param depth_mup --optimizer sgd --depths 2,8
    XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m zoo.audit --model gpt --param mup \\
        --optimizer muon --mesh fsdp=4,tensor=2 --grad-accum 4
    python -m zoo.audit --param mup --optimizer adamw --policy timescale --batch-sizes 16,256 --horizons 100,400

With a scaling policy (--policy, zoo.policy) and --batch-sizes or --horizons, the run is also measured at each batch
size (or horizon) under the settings the policy maps the proxy's to, at the largest width, and each parameter's
realised LR, decay shrink, EMA timescale, beta2 half-life and epsilon are judged against the policy's law
(zoo.audit.policy); the width and depth tables are then measured at the largest batch size and horizon, under the
policy's settings there: each factor, the plugin's and the policy's, is seen applied once.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from zoo.cli.boundary import boundary, interruptible
from zoo.cli.flags import (
    Once,
    Parser,
    add_allow_import,
    add_compile_cache,
    add_policy_flags,
    add_settings,
    ints,
    path_arg,
    policy_of,
    positive,
    positive_finite,
    refuse_sizes,
    seed,
    settings,
)
from zoo.config import FLAT
from zoo.files import check_writable
from zoo.train import compile_cache

# the settings that describe the run (as train.py takes them); a run dir brings its own
RUN_FLAGS = ("model", "param", "param_opt", "model_opt", *(n for n, (part, _) in FLAT.items() if part == "optim"),
             "grad_accum", "precision", "mesh", "seq_len")


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m zoo.audit", description=__doc__.split("\n\n")[0])
    a = p.add_argument
    a("run_dir", nargs="?", type=path_arg, help="a zoo run directory: audit the run as it ran (the run's settings "
      "flags are then refused, but --mesh, for devices other than the run's)")
    g = p.add_argument_group("the audit")
    g.add_argument("--widths", type=ints, help="widths of the width sweep (default: 64,128,256; a run dir: its base "
                   "width and width)")
    g.add_argument("--depth", type=positive, help="depth of the width sweep (default: 2; a run dir: its depth)")
    g.add_argument("--depths", type=ints, help="depths of a depth sweep, at the smallest width (default: none; a run "
                   "dir whose plugin scales with depth: its base depth and depth)")
    g.add_argument("--batch-size", type=positive, help="examples in the probe's batch (default: 16; a run dir: its "
                   "batch size)")
    g.add_argument("--tol", type=positive_finite, default=0.1, help="allowed |measured slope - theory's| (default: "
                   "0.1)")
    g.add_argument("--seed", type=seed, default=0, help="init seed (default: 0)")
    g.add_argument("--json", type=path_arg, action=Once, default="runs/audit/audit.json",
                   help="where the JSON goes (default: runs/audit/audit.json)")
    g.add_argument("--batch-sizes", type=ints, help="batch sizes to audit the scaling policy at (--policy)")
    g.add_argument("--horizons", type=ints, help="horizons in steps to audit the scaling policy at (--policy)")
    add_policy_flags(p, "is audited at --batch-sizes and --horizons (the proxy: the smallest of each)", tokens=False)
    add_settings(p, RUN_FLAGS)
    add_compile_cache(p)
    add_allow_import(p)
    return p


def check_flags(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A command line whose flags do not go together exits 2 (argparse's status), never 1, which says an audit
    failed: a run dir with a run's settings flag, sweeps of fewer than two sizes, --depth with no width sweep."""
    from zoo.audit.sweep import check_sweep

    given = [n for n in RUN_FLAGS if getattr(args, n) is not None and n != "mesh"]  # the devices here may differ
    if args.run_dir and given:
        p.error(f"a run dir brings its own settings; --{given[0].replace('_', '-')} is not taken with it")
    try:
        refuse_sizes(args.model_opt, {"width": "--widths", "depth": "--depth, --depths"})
    except ValueError as e:
        p.error(str(e))
    for flag, sizes in (("--widths", args.widths), ("--depths", args.depths)):
        try:
            check_sweep(flag, sizes)
        except ValueError as e:
            p.error(str(e))
    for flag, sizes in (("--batch-sizes", args.batch_sizes), ("--horizons", args.horizons)):
        try:
            check_sweep(flag, sizes)
        except ValueError as e:
            p.error(str(e))
    policed = args.batch_sizes or args.horizons
    if policed and args.policy is None:
        p.error("--batch-sizes and --horizons audit a scaling policy: give --policy (none: today's settings)")
    if args.policy is not None and not policed:
        p.error(f"--policy {args.policy} is audited at two or more --batch-sizes or --horizons: give them")
    if args.depth is not None and args.depths and not args.widths:
        p.error(f"--depth {args.depth} is the width sweep's depth, but --depths alone runs none: leave it out (the "
                "depth sweep measures at --depths), or give --widths too")


def at_largest(run: Any, policy: Any, args: argparse.Namespace) -> Any:
    """The run at the largest audited batch size and horizon, under the settings the policy maps the proxy's to."""
    import dataclasses

    from zoo.policy import Change

    batches, horizons = args.batch_sizes or [run.batch_size], args.horizons or [run.horizon or 1]
    change = Change(args.proxy_batch_size or min(batches), max(batches), args.proxy_steps or min(horizons),
                    max(horizons))
    return dataclasses.replace(run, optim=policy.apply(run.optim, change)[0], batch_size=change.batch,
                               horizon=change.steps)


@boundary(failed=2)  # its 1 is a FAIL
def main(argv: list[str] | None = None) -> None:
    p = parser()
    args = p.parse_args(argv)
    check_flags(p, args)
    compile_cache.use(args.compile_cache)
    from zoo.audit import audit
    from zoo.audit.report import tables, write_json
    from zoo.audit.rundir import from_config, from_run_dir
    from zoo.cli.tables import console_for
    from zoo.config import resolve

    check_writable(Path(args.json), "--json")
    if args.run_dir:
        subject = from_run_dir(args.run_dir, args.batch_size, args.mesh)
    else:
        subject = from_config(resolve(settings(args, RUN_FLAGS)), args.batch_size or 16)
    depths = args.depths or ([] if args.widths else subject.depths)
    widths = args.widths or ([] if args.depths else subject.widths)
    policy, run = policy_of(args, subject.run.optim.name), subject.run
    if policy is not None:
        run = at_largest(run, policy, args)
    result = interruptible(audit, run, widths, depths, depth=args.depth or subject.depth, tol=args.tol, seed=args.seed)
    if policy is not None:
        from zoo.audit.policy import audit_policy

        w = max(widths) if widths else run.default_size()[0]
        result.axes += audit_policy(subject.run, policy, args.batch_sizes or [], args.horizons or [],
                                    (args.proxy_batch_size, args.proxy_steps), w, args.depth or subject.depth,
                                    min(widths) if widths else w, args.tol, args.seed)
        result.run["policy"] = policy.spec()
    result.run["run_dir"], result.saved = args.run_dir or "", subject.saved
    if args.run_dir:
        result.run["step"], result.run["unreadable"] = subject.step, subject.unreadable
    shown = tables(result)
    console = console_for(*shown)
    for line in subject.unreadable:
        console.print(f"note: {line}", highlight=False, soft_wrap=True)
    for table in shown:
        console.print(table)
    for line in result.failures():
        console.print(f"[red]FAIL[/red] {line}", highlight=False, soft_wrap=True)
    older = (f" (of checkpoint {subject.step}, not the run's newest: {len(subject.unreadable)} newer cannot be read, "
             "see above)") if subject.unreadable else ""
    print(f"{'PASS' if result.passed else 'FAIL'}{older}; json: {write_json(result, args.json)}")
    raise SystemExit(0 if result.passed else 1)
