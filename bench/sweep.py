"""Benchmark: an LR sweep as ONE program against the same members run one after another.

The sweep's program splits the members over the devices (on a CPU one per core, as `python -m zoo.sweep` does) and
vmaps them in groups (zoo.sweeps.engine.default_group); the sequential members run on one device, as train.py runs
them (measured: as fast in this process as in one with a single device).

    python bench/sweep.py                       # 16 LRs, MLP-ResNet width 256 depth 16, CIFAR-10, 200 steps
    python bench/sweep.py --steps 20 --rounds 3                  # the default member, reduced for a CPU
    python bench/sweep.py --width 64 --depth 4 --steps 100 --batch-size 32 --synthetic --write docs/bench_sweep_cpu.md

Both paths run the same jitted loop over `Program.train_step` (zoo.sweeps.engine), in the same process, on the
same batches, in compiled loops of --chunk steps (as `python -m zoo.sweep --chunk`), the whole sweep --rounds times
in turn (so machine load falls on both alike). Compile time is reported apart from steady-state time; the speedup
is the median over the rounds of the steady-state ratio.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import queue
import statistics
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

import zoo.data
import zoo.models
import zoo.param
from zoo.optim import OptimConfig
from zoo.sweeps.engine import MemberTrainer
from zoo.sweeps.grid import members
from zoo.train import backend
from zoo.train.step import build_program

backend.cpu_cores_as_devices()  # as python -m zoo.sweep: the vmapped members split over the cores


def interleaved(vm: MemberTrainer, one: MemberTrainer, lrs: np.ndarray, seeds: np.ndarray, steps: int,
                rounds: int) -> tuple[list[float], list[float], np.ndarray, np.ndarray]:
    """Both paths train every member all `steps` steps from fresh states, `rounds` times, taking turns (the program,
    then the members one by one), so machine load falls on both alike. Returns each round's steady-state seconds
    (compile and init excluded) of each path and the first round's per-step losses [steps, members] of each."""
    vm_s, seq_s = [], []
    for r in range(rounds):
        states = vm.init(lrs, seeds)
        before = vm.run_s
        vm_losses = vm.train(states, steps)[1]
        vm_s.append(vm.run_s - before)
        singles = [one.init(lrs[k:k + 1], seeds[k:k + 1]) for k in range(len(lrs))]
        before = one.run_s
        seq_losses = np.stack([one.train(state, steps)[1] for state in singles], 1)
        seq_s.append(one.run_s - before)
        if r == 0:
            first = vm_losses, seq_losses
    return vm_s, seq_s, *first


def setup(args: argparse.Namespace) -> tuple[str, Any, Any, np.ndarray, np.ndarray]:
    """The data's name, the program, the data and the members' LRs and seeds."""
    name = args.data or ("synthetic" if args.synthetic else "cifar10")
    data = zoo.data.load(name)
    plugin = zoo.param.get(args.param)
    cfg = zoo.models.config("mlp_resnet", width=args.width, depth=args.depth, base_depth=args.base_depth,
                            in_shape=data.in_shape, num_classes=data.num_classes)
    prog = build_program(lambda r: zoo.models.create("mlp_resnet", cfg, plugin, r), plugin, OptimConfig("adam"))
    lrs, seeds = members(list(np.logspace(-14, -4, args.lrs, base=2.0)), 1)
    return name, prog, data, lrs, seeds


def pinned_processes(args: argparse.Namespace, cores: list[int], vmapped: bool) -> float:
    """Steady-state seconds of the members split over one process per core, each pinned to its core with one
    device, members dealt out in turn, all starting together after their compiles: one after another
    (vmapped=False: the sequential step's own speed times whatever the cores add when each runs a process of its
    own, no device or thread pool shared) or as the sweep's vmapped groups (vmapped=True: what a sweep split over
    processes instead of devices would reach)."""
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(len(cores)), ctx.Queue()
    procs = [ctx.Process(target=pinned_member_runs, args=(args, core, i, len(cores), start, results, vmapped))
             for i, core in enumerate(cores)]
    for proc in procs:
        proc.start()
    seconds = []
    while len(seconds) < len(procs):
        try:
            seconds.append(results.get(timeout=1.0))
        except queue.Empty:
            if any(proc.exitcode not in (None, 0) for proc in procs):
                for proc in procs:
                    proc.terminate()
                raise SystemExit("error: a pinned process of --ceiling failed (its traceback is above)") from None
    for proc in procs:
        proc.join()
    return max(seconds)


def pinned_member_runs(args: argparse.Namespace, core: int, index: int, count: int, start: Any, results: Any,
                       vmapped: bool) -> None:
    os.sched_setaffinity(0, {core})
    jax.config.update("jax_num_cpu_devices", 1)  # importing this module asked for one device per core
    _, prog, data, lrs, seeds = setup(args)
    mine, warm = np.arange(index, len(lrs), count), min(args.chunk, args.steps)
    if vmapped:
        trainer = MemberTrainer(prog, data, args.batch_size, chunk=args.chunk, group=args.group)
        trainer.train(trainer.init(lrs[mine], seeds[mine]), warm, 0)  # compiled and run before the clock starts
        states = [trainer.init(lrs[mine], seeds[mine])]
    else:
        trainer = MemberTrainer(prog, data, args.batch_size, chunk=args.chunk, vmapped=False)
        trainer.train(trainer.init(lrs[:1], seeds[:1]), warm, 0)  # the same (it donates its state)
        states = [trainer.init(lrs[k:k + 1], seeds[k:k + 1]) for k in mine]
    start.wait()
    before = trainer.run_s
    for state in states:
        trainer.train(state, args.steps, 0)
    results.put(trainer.run_s - before)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    if Path("/proc/cpuinfo").exists():
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    dev = jax.devices()[0]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return (f"{dev.platform} ({getattr(dev, 'device_kind', '')}); CPU {cpu}, {cores} cores usable; "
            f"load average {load}; jax {jax.__version__}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lrs", type=int, default=16, help="number of learning rates (2^-14 .. 2^-4, log-spaced)")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=16)
    p.add_argument("--param", default="depth_mup")
    p.add_argument("--base-depth", type=int, default=1, help="base depth L0 (depth_mup's branch multiplier "
                   "(L/L0)^-1/2 keeps the 16-block stream and its losses well-conditioned)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--synthetic", action="store_true", help="synthetic images instead of the bundled CIFAR-10")
    p.add_argument("--data", help="any zoo data source, e.g. synthetic:teacher (16 inputs: a member too small to fill "
                   "a core)")
    p.add_argument("--rounds", type=int, default=5, help="times the two paths train the whole sweep, in turn")
    p.add_argument("--chunk", type=int, default=100, help="train steps per compiled loop (python -m zoo.sweep's "
                   "default)")
    p.add_argument("--group", type=int, help="members vmapped together on a device (default: the engine's choice)")
    p.add_argument("--ceiling", action="store_true", help="also time the members split over processes pinned one "
                   "to a core (Linux), one after another and as the sweep's groups: what splitting alone reaches")
    p.add_argument("--write", help="also write the numbers as markdown to this file")
    args = p.parse_args(argv)
    if min(args.lrs, args.width, args.depth, args.steps, args.batch_size, args.rounds, args.chunk) < 1:
        print("error: --lrs, --width, --depth, --steps, --batch-size, --rounds and --chunk must be positive",
              file=sys.stderr)
        raise SystemExit(1)
    if args.ceiling and not hasattr(os, "sched_setaffinity"):
        print("error: --ceiling pins processes to cores, which this platform cannot (Linux only)", file=sys.stderr)
        raise SystemExit(1)

    name, prog, data, lrs, seeds = setup(args)
    vm = MemberTrainer(prog, data, args.batch_size, chunk=args.chunk, group=args.group)
    one = MemberTrainer(prog, data, args.batch_size, chunk=args.chunk, vmapped=False)
    vm_rounds, seq_rounds, vm_losses, seq_losses = interleaved(vm, one, lrs, seeds, args.steps, args.rounds)
    vm_steady, seq_steady = statistics.median(vm_rounds), statistics.median(seq_rounds)
    # The two paths sum in different orders; members whose loss blows up are chaotic and amplify that, so the
    # agreement is measured on the members that train (final loss <= initial loss).
    rel = np.abs(vm_losses - seq_losses) / np.abs(seq_losses)
    trains = np.all(np.isfinite(rel), axis=0) & (seq_losses[-1] <= seq_losses[0])
    max_rel = float(rel[:, trains].max()) if trains.any() else float("nan")

    ratios = [b / a for a, b in zip(vm_rounds, seq_rounds, strict=True)]
    ratio = statistics.median(ratios)
    total_ratio = (seq_steady + one.compile_s) / (vm_steady + vm.compile_s)
    line = (f"sweep bench: {args.lrs} LRs, mlp_resnet w{args.width} d{args.depth}, {name}, {args.steps} steps, "
            f"batch {args.batch_size}: one program ({jax.device_count()} devices, groups of {vm.group_size}) "
            f"{vm_steady:.2f} s + compile {vm.compile_s:.1f} s, sequential "
            f"{seq_steady:.2f} s + compile {one.compile_s:.1f} s; speedup {ratio:.2f}x steady state (rounds "
            f"{min(ratios):.2f}-{max(ratios):.2f}x; {total_ratio:.2f}x with compile); max rel. loss diff {max_rel:.1e} "
            f"over the {int(trains.sum())} members that train; {jax.devices()[0].platform}")
    if args.ceiling:
        cores = sorted(os.sched_getaffinity(0))
        line += (f"; split over {len(cores)} processes pinned one to a core (nothing shared between the cores), "
                 f"the sequential members {seq_steady / pinned_processes(args, cores, False):.2f}x, the sweep's "
                 f"groups {seq_steady / pinned_processes(args, cores, True):.2f}x")
    print(line)
    if args.write:
        write(Path(args.write), args, name, vm, one, vm_steady, seq_steady, ratio, total_ratio, max_rel, line)


def write(path: Path, args, name, vm, one, vm_steady, seq_steady, ratio, total_ratio, max_rel, line) -> None:
    n = args.lrs * args.steps
    rows = [(f"one program ({args.lrs} members over {jax.device_count()} devices, groups of {vm.group_size})",
             vm.compile_s, vm_steady),
            (f"sequential ({args.lrs} runs of the same step)", one.compile_s, seq_steady)]
    table = "\n".join(f"| {label} | {c:.1f} | {s:.2f} | {n / s:.1f} |" for label, c, s in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    platform = jax.devices()[0].platform
    note = ("On a CPU each core is a device (zoo.train.backend.cpu_cores_as_devices) and the members are split over\n"
            "them, vmapped in groups of as many members as half of a core's share of the last-level cache holds the\n"
            "train states of (weights, gradients, optimizer moments); bigger ones train one at a time per core. How\n"
            "much the split can give depends on how much of the other cores a lone member's step already uses:\n"
            "`--ceiling` times the members split over processes pinned one to a core. The >= 6x target is for a\n"
            "GPU, where one member leaves the device mostly idle."
            if platform == "cpu" else "Target on a GPU: >= 6x.")
    path.write_text(f"""# Sweep benchmark ({platform.upper()})

`python bench/sweep.py --width {args.width} --depth {args.depth} --batch-size {args.batch_size} --steps {args.steps}
--rounds {args.rounds} --chunk {args.chunk} --data {name} --write {path}`

{args.lrs} learning rates of an MLP-ResNet (width {args.width}, depth {args.depth}, {args.param} with base depth
{args.base_depth}, Adam) on {name}, batch {args.batch_size}, {args.steps} steps per member. Both paths run the
same jitted loop over `Program.train_step` (chunks of {args.chunk} steps) in one process on the same batches, the
whole sweep {args.rounds} times in turn; compile time (XLA, ahead of time) is apart from steady state (the train steps
only, the median over the rounds).

Machine: {machine()}.

| path | compile s | steady-state s | member-steps / s |
|---|---|---|---|
{table}

Speedup of the vmapped sweep: **{ratio:.2f}x** in steady state (median over the rounds), {total_ratio:.2f}x
including compile. Largest relative difference between the two paths' per-step losses, over the members whose loss
did not blow up:
{max_rel:.1e}: vmapped groups reassociate the sums, which members at LRs past the best amplify chaotically (with
groups of one member the two paths are bit-identical).

{note}

Summary line: `{line}`
""")


if __name__ == "__main__":
    main()
