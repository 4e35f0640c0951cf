"""`python -m zoo.fit DIR [DIR ...] --out FIT`: fit the best LR (and the best weight decay, where the sweeps swept it)
as a power law in the size axes that vary across zoo.sweep dirs (width, depth, batch size, steps), with bootstrap
intervals over seeds and grid points; writes FIT/law.json (read by `--policy fitted --policy-opt law=FIT/law.json`),
FIT/fit.json, FIT/table.md and FIT/fit.png, and checks a held-out size's prediction.

    python -m zoo.fit runs/sweep_w --out runs/fit_w --holdout width=512
    python -m zoo.fit runs/b16 runs/b64 runs/b256 --out runs/fit_b --policy sde     # what sqrt(B) leaves
"""

from __future__ import annotations

import argparse
from pathlib import Path

from zoo.cli.boundary import boundary
from zoo.cli.flags import (
    KeyValues,
    Once,
    Parser,
    add_policy_flags,
    check_proxy_needs_policy,
    kv,
    path_arg,
    policy_of,
    positive,
    proxy_steps,
    seed,
)
from zoo.schema import comma_items, to_int

DEFAULT_BOOT, MAX_BOOT = 1000, 100_000


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m zoo.fit", description=__doc__.split("\n\n")[0])
    a = p.add_argument
    a("dirs", nargs="+", type=path_arg, metavar="DIR", help="zoo.sweep --out dirs of one model and recipe")
    a("--out", type=path_arg, action=Once, required=True, help="where law.json, fit.json, table.md and fit.png go")
    a("--holdout", action=KeyValues, type=kv, metavar="AXIS=VALUE", help="hold out the sizes with this width, depth, "
      "batch_size or steps (repeatable: all must match) and check the law's prediction there")
    a("--axes", help="comma list of the size axes the law is fitted in (default: every one that varies; of two that "
      "move together, as the steps of a batch sweep at a fixed number of examples, name one)")
    a("--metric", default="train_loss", choices=("train_loss", "eval_loss"), help="the loss minimised")
    add_policy_flags(p, "mapped the sweeps' settings (their LRs and weight decays are read in the proxy's units, "
                     "the law is what the policy leaves; the proxy's batch and steps default to a dir's: the smallest "
                     "batch swept, at its fewest steps)")
    a("--boot", type=positive, default=DEFAULT_BOOT, help=f"bootstrap replicates (at most {MAX_BOOT})")
    a("--seed", type=seed, default=0, help="the bootstrap's seed")
    return p


def check_boot(boot: int) -> None:
    if boot < 2:
        raise ValueError(f"--boot {boot}: an interval needs 2 or more bootstrap replicates (the default is "
                         f"{DEFAULT_BOOT})")
    if boot > MAX_BOOT:
        raise ValueError(f"--boot {boot} is more than {MAX_BOOT} replicates (each refits every size's optimum; "
                         f"the default {DEFAULT_BOOT} gives the intervals' ends)")


def holdout(pairs: list[tuple[str, str]] | None) -> dict[str, int] | None:
    from zoo.fit.read import AXES

    if not pairs:
        return None
    out = {}
    for k, v in pairs:
        if k not in AXES:
            raise ValueError(f"--holdout {k}={v}: the axis is one of {', '.join(AXES)}")
        try:
            out[k] = to_int(v)
        except ValueError:
            raise ValueError(f"--holdout {k}={v}: the value is an integer") from None
    return out


@boundary(computes=False)
def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    from zoo.cli.tables import console_for
    from zoo.files import check_can_write_in, resolved
    from zoo.fit import read, report, result
    from zoo.outputs import check_outside, check_own_folder

    check_boot(args.boot)
    held = holdout(args.holdout)
    dirs = [Path(d) for d in args.dirs]
    for d in dirs:
        check_outside(d, args.out, "--out", "zoo.fit", "sweep dir")
    check_own_folder(args.out, "--out", "fit")
    twice = [d for i, d in enumerate(dirs) if resolved(d) in {resolved(e) for e in dirs[:i]}]
    if twice:
        raise ValueError(f"the sweep dir {twice[0]} is given twice: each member would count twice in the fit")
    run = read.run_config(dirs[0])
    policy = policy_of(args, run.optim.name)
    check_proxy_needs_policy(args, policy)
    if policy is not None and policy.name == "fitted":  # its law.json could never be used: the base of a law
        raise ValueError("--policy fitted: a law read under a fitted law cannot be a fitted policy's base; read the "
                         "sweeps under the law's own base policy (its law.json's policy: none, sde or timescale)")
    axes = None if args.axes is None else comma_items(args.axes, "--axes")
    if axes and len(set(axes)) < len(axes):
        raise ValueError(f"--axes {args.axes} names {next(a for a in axes if axes.count(a) > 1)} twice")
    if unknown := [a for a in axes or [] if a not in read.AXES]:
        raise ValueError(f"--axes {args.axes}: {', '.join(unknown)} is no size axis (the axes: {', '.join(read.AXES)})")
    sweeps = read.load(dirs, args.metric, policy, (args.proxy_batch_size, proxy_steps(args, run)))
    fitted = result.fit(sweeps, held, args.boot, args.seed, None if policy is None else policy.spec(), axes)
    check_can_write_in(Path(args.out), f"--out {args.out}")
    table = report.table(fitted)
    console_for(table).print(table)
    for line in sweeps.warnings():
        print(f"warning: {line}")
    for path in report.write(fitted, Path(args.out)):
        print(path)
