"""`python -m zoo.transfer`: tune small, train big. The LR sweep at a proxy size, the target trained at the proxy's
best LR, and the same recipe under SP (or --compare) for comparison; --check-target also sweeps a few LRs at
the target. Prints a table and writes OUT/transfer.png and OUT/transfer.json; rerunning skips finished runs. The
proxy may train at its own batch size and horizon (--proxy-batch-size, --proxy-steps), a scaling policy (--policy)
mapping its tuned settings to the target's; OUT/<param>/target.json records which policy produced each number.

    python -m zoo.transfer --out runs/t --model gpt --param mup --proxy-width 128 --width 1024 --lrs 2^-12:2^-6:1
    python -m zoo.transfer --out runs/d --model gpt --param completep --proxy-depth 2 --depth 16 --lrs 2^-12:2^-6:1
    python -m zoo.transfer --out runs/b --param mup --proxy-width 64 --width 256 --proxy-batch-size 16 \\
        --batch-size 256 --policy sde --lrs 2^-12:2^-4:1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from shlex import quote

from zoo.cli.boundary import boundary
from zoo.cli.flags import (
    Once,
    Parser,
    add_allow_import,
    add_policy_flags,
    numbers_text,
    path_arg,
    policy_of,
    positive,
    proxy_steps,
)
from zoo.cli.sweep import add_lr_flags, add_run_flags, check_lr_flags, note_elsewhere, run_config
from zoo.registry import import_flags
from zoo.sweeps.grid import parse_lrs
from zoo.train import compile_cache

AROUND = object()  # --check-target without LRs: the transferred LR +- 2 proxy grid steps


def lr_list(text: str) -> str:
    """--check-target's LRs: numbers as a user types them, and some (an empty value is no list)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("give LRs (a comma list or a range), or leave the flag bare for the "
                                         "transferred LR +- 2 proxy grid steps")
    return numbers_text(text)


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m zoo.transfer", argument_default=None,
        description="muTransfer: sweep the LR at a proxy size, train the target at the best one, compare with SP "
        "tuned the same way.")
    a = p.add_argument
    a("--out", type=path_arg, action=Once, required=True,
      help="report dir: <param>/proxy and <param>/target sweeps, transfer.png, transfer.json")
    a("--width", type=positive, help="target width (default: the model's)")
    a("--depth", type=positive, help="target depth (default: the model's)")
    a("--proxy-width", type=positive, help="proxy width (default: the target's)")
    a("--proxy-depth", type=positive, help="proxy depth (default: the target's)")
    a("--compare", help="parametrization tuned the same way for comparison ('none': no comparison; default: sp, "
      "none when --param is sp)")
    a("--target-seeds", type=positive, default=1, help="seeds of the target run (its loss: mean +- std)")
    a("--check-target", nargs="?", const=AROUND, type=lr_list, metavar="LRS",
      help="also sweep LRs at the target: the transferred LR +- 2 proxy grid steps, or the LRs given")
    add_lr_flags(p)
    add_policy_flags(p, "maps the proxy's tuned settings to the target's batch size and horizon")
    add_run_flags(p)
    add_allow_import(p)
    return p


def build_spec(args: argparse.Namespace):
    """The TransferSpec of the parsed flags."""
    import zoo.models
    import zoo.param
    from zoo.sweeps.transfer import TransferSpec

    run = run_config(args)
    compare = comparison(args.compare, run.param.name)
    if compare is not None:  # an empty name (an unset shell variable) is unknown, not 'none'
        zoo.param.get(compare)
    default = zoo.models.config(run.model.name, **run.model.options)
    target = (args.width or default.width, args.depth or default.depth)
    proxy = (args.proxy_width or target[0], args.proxy_depth or target[1])
    check = None if args.check_target is None else [] if args.check_target is AROUND else parse_lrs(args.check_target)
    policy = policy_of(args, run.optim.name)
    return TransferSpec(run=run, lrs=parse_lrs(args.lrs), proxy=proxy, target=target, out=Path(args.out),
                        compare=compare, seeds=args.seeds, target_seeds=args.target_seeds, check=check,
                        metric=args.metric, chunk=args.chunk, processes=args.processes, policy=policy,
                        proxy_batch=args.proxy_batch_size, proxy_steps=proxy_steps(args, run))


def comparison(given: str | None, param: str) -> str | None:
    """The comparison arm of --compare: none for 'none'; when not given, SP (the parametrization whose transfer
    muP fixes), or none under --param sp, which has no other to compare with (--compare sp is refused there)."""
    if given is None:
        return None if param == "sp" else "sp"
    return None if given == "none" else given


@boundary(per_core=True)
def main(argv: list[str] | None = None) -> None:
    p = parser()
    args = p.parse_args(argv)
    check_lr_flags(p, args)
    spec = build_spec(args)
    if spec.policy is not None:
        note_elsewhere(spec.policy, spec.run, spec.metric)
    compile_cache.use(args.compile_cache)
    from zoo.cli.tables import console_for
    from zoo.sweeps import transfer_report
    from zoo.sweeps.transfer import run_transfer

    arms = run_transfer(spec)
    table = transfer_report.table(arms, spec)
    console_for(table).print(table)
    png, numbers, *targets = transfer_report.write(arms, spec)
    print(f"plot: {png}\nnumbers: {numbers}")
    for path in targets:
        flags = import_flags(spec.run.model.name, path.parent.name)  # the arm's folder is its plugin's name
        print(f"{path.parent.name}'s target with checkpoints: python train.py --config {quote(str(path))}{flags}")
    if arms[0].lr_log2 is None:  # the plugin under test handed nothing on: a script chaining train.py must stop here
        print(f"error: every proxy LR of {arms[0].param} diverged, so there is no LR to transfer and no "
              f"{spec.out / arms[0].param / 'target.json'}: give lower --lrs", file=sys.stderr)
        raise SystemExit(1)
