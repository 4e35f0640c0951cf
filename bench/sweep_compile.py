"""Benchmark: where one shape of a sweep spends its compile, against its member count, and what a rerun compiles.

    python bench/sweep_compile.py --model gpt --depth 2 --width 64 --seq-len 128 --batch-size 32 --steps 100 \\
        --members 1,15 --other-param mup                                      # the CPU acceptance of issue 44
    python bench/sweep_compile.py --model gpt --depth 2 --width 128 --seq-len 128 --batch-size 32 --steps 100 \\
        --members 1,9 --other-param mup --write docs/bench_sweep_compile_gpu.md   # the GPU's

The shape's programs are the ones `python -m zoo.sweep` runs (zoo.sweeps.runner.shape_trainer: init, the train chunk
and eval, compiled side by side by MemberTrainer.prepare). Cold: each member count in turn, --rounds times, each time
with a fresh, empty persistent compile cache (and JAX's in-memory caches cleared): every program's trace, lower and XLA
seconds, its lowered text's size, the compile's wall-clock and process CPU seconds (on a shared machine the CPU
seconds are the steadier measure), and the members' steady-state ms per train step. Warm: against the cache the
last round filled, the largest member count again with another LR grid and seeds, and with --other-param in place of
--param: the programs XLA compiled (none, when every member, run and plugin of the shape shares one program) and the
seconds the warm compile took (tracing, lowering and loading from the cache). The sweep's flags (--model, --param,
--data, --seq-len, --optimizer, ...) are zoo.sweep's; on data zoo bundles or makes (shakespeare, synthetic).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from zoo.cli.flags import Parser, ints, positive
from zoo.cli.sweep import add_run_flags, run_config
from zoo.sweeps.engine import MemberTrainer
from zoo.sweeps.grid import members
from zoo.sweeps.runner import load_data, shape_trainer
from zoo.train import backend, compile_cache
from zoo.train.setup import setup


def measure(cfg: Any, data: Any, count: int, steps: int, chunk: int, shift: float = 0.0,
            train: bool = True) -> dict[str, Any]:
    """One shape's members (`count` LRs from 2^-14 to 2^-6, shifted by `shift` in log2; seeds from cfg's seed,
    shifted too), its programs compiled (prepare) and, with `train`, trained `steps` steps: the compile log and
    timings."""
    trainer: MemberTrainer = shape_trainer(cfg, chunk, data, setup(cfg, data).program)
    trainer.programs.text_sizes = True
    lrs, seeds = members(list(np.logspace(-14 + shift, -6 + shift, count, base=2.0)), 1)
    seeds = seeds + cfg.loop.seed + int(shift * 10)
    wall, cpu = time.perf_counter(), time.process_time()
    trainer.prepare(lrs, seeds, steps)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    start = trainer.run_s
    if train:
        trainer.train(trainer.init(lrs, seeds), steps)
    return {"members": count, "group": trainer.group_size, "log": list(trainer.programs.log), "wall_s": wall,
            "cpu_s": cpu, "ms_per_step": 1e3 * (trainer.run_s - start) / steps if train else float("nan")}


def cold(cfg: Any, data: Any, counts: list[int], steps: int, chunk: int, rounds: int,
         train: bool) -> dict[int, list[dict]]:
    """Every member count's cold compile, `rounds` times in turn, each with an empty cache; the last round's cache
    is kept (in use) for the warm runs."""
    out: dict[int, list[dict]] = {k: [] for k in counts}
    for _ in range(rounds):
        for count in counts:
            compile_cache.use(tempfile.mkdtemp(prefix="zoo-bench-cache-"))
            jax.clear_caches()
            out[count].append(measure(cfg, data, count, steps, chunk, train=train))
    return out


def table(runs: list[dict[str, Any]]) -> str:
    """One member count's programs (the median run by wall-clock): trace, lower, XLA seconds, text size."""
    run = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
    rows = [f"| {c.name} | {c.trace_s:.2f} | {c.lower_s:.2f} | {'cache' if c.cached else f'{c.compile_s:.2f}'} | "
            f"{c.text_bytes / 1e3:.0f} |" for c in run["log"]]
    return "\n".join(rows)


def summary(label: str, runs: list[dict[str, Any]]) -> str:
    wall = statistics.median(r["wall_s"] for r in runs)
    cpu = statistics.median(r["cpu_s"] for r in runs)
    step = statistics.median(r["ms_per_step"] for r in runs)
    compiled = sum(not c.cached for c in runs[-1]["log"])
    return (f"| {label} | {runs[-1]['group']} | {compiled} of {len(runs[-1]['log'])} | {wall:.2f} | {cpu:.2f} | "
            f"{step:.2f} |")


def machine() -> str:
    dev = jax.devices()[0]
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return f"{jax.device_count()} x {dev.platform} ({dev.device_kind}); load average {load}; jax {jax.__version__}"


def shape_flags(p: Parser, members: list[int]) -> None:
    """The flags of one sweep shape: its size, its member counts (default `members`) and its chunk of steps."""
    p.add_argument("--width", type=positive)
    p.add_argument("--depth", type=positive)
    p.add_argument("--members", type=ints, default=members, help="member counts (LRs), comma list")
    p.add_argument("--chunk", type=positive, default=100, help="train steps per compiled loop (zoo.sweep --chunk)")


def main(argv: list[str] | None = None) -> None:
    p = Parser(description=__doc__.splitlines()[0])
    shape_flags(p, [1, 15])
    p.add_argument("--rounds", type=positive, default=3, help="cold compiles of each member count, in turn")
    p.add_argument("--other-param", help="a plugin to rerun the largest member count under (warm)")
    p.add_argument("--no-train", dest="train", action="store_false", help="compile only (no steady-state timing)")
    p.add_argument("--write", help="also write the numbers as markdown to this file")
    add_run_flags(p)
    args = p.parse_args(argv)
    backend.cpu_cores_as_devices()  # as python -m zoo.sweep: the vmapped members split over the cores
    run = run_config(args)
    data = load_data(run)
    cfg = run.replace(width=args.width, depth=args.depth, base_width=args.base_width or args.width,
                      base_depth=args.base_depth or args.depth)
    steps = setup(cfg, data).steps
    counts = sorted(args.members)
    runs = cold(cfg, data, counts, steps, args.chunk, args.rounds, args.train)
    top = counts[-1]
    jax.clear_caches()  # the warm runs find their programs in the persistent cache alone
    warm = [("another LR grid and seeds", measure(cfg, data, top, steps, args.chunk, 0.5, args.train))]
    if args.other_param:
        other = cfg.replace(param=args.other_param)
        warm.append((f"--param {args.other_param}", measure(other, data, top, steps, args.chunk, 0.5, args.train)))
    first, last = (statistics.median(r["wall_s"] for r in runs[c]) for c in (counts[0], top))
    cpu_first, cpu_last = (statistics.median(r["cpu_s"] for r in runs[c]) for c in (counts[0], top))
    m = cfg.model
    title = (f"{m.name} width {m.width} depth {m.depth}, {cfg.param.name}, {cfg.data.name}, batch "
             f"{cfg.loop.batch_size}, {steps} steps")
    lines = [f"# Sweep compile benchmark ({jax.devices()[0].platform.upper()})", "",
             f"`python bench/sweep_compile.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
             f"One shape of `python -m zoo.sweep`: {title}. Machine: {machine()}.", "",
             "| run | group | programs compiled | compile wall s | compile CPU s | train ms/step |",
             "|---|---|---|---|---|---|"]
    lines += [summary(f"{c} members, cold (median of {args.rounds})", runs[c]) for c in counts]
    lines += [summary(f"{top} members, warm: {label}", [r]) for label, r in warm]
    lines += ["", f"Cold compile of {top} members over {counts[0]}: **{last / first:.2f}x** wall-clock, "
              f"{cpu_last / cpu_first:.2f}x CPU. Warm over cold ({top} members): "
              f"{warm[0][1]['wall_s'] / last:.2f}x wall-clock.", ""]
    for c in counts:
        lines += [f"Where the cold compile of {c} members goes (seconds; the median round):", "",
                  "| program | trace | lower | XLA | lowered kB |", "|---|---|---|---|---|", table(runs[c]), ""]
    show("\n".join(lines), args.write)


def show(text: str, write: str | None) -> None:
    """Print a bench's markdown, and write it to `write` when given."""
    print(text)
    if write:
        Path(write).parent.mkdir(parents=True, exist_ok=True)
        Path(write).write_text(text)


if __name__ == "__main__":
    main()
