"""Benchmark: an LR sweep as ONE program, and over worker processes, against the same members one after another.

The sweep's program splits the members over the devices (on a CPU one per core, as `python -m zoo.sweep` does) and
vmaps them in groups (zoo.sweeps.engine.default_group); the worker processes (`python -m zoo.sweep --processes`,
zoo.sweeps.processes) train the same blocks of members in the same groups, each process pinned to its own cores
with one device; the sequential members run on one device, as train.py runs them (measured: as fast in this process
as in one with a single device).

    python bench/sweep.py                       # 16 LRs, MLP-ResNet width 256 depth 16, CIFAR-10, 200 steps
    python bench/sweep.py --steps 20 --rounds 3                  # the default member, reduced for a CPU
    python bench/sweep.py --width 64 --depth 4 --steps 100 --batch-size 32 --synthetic --write docs/bench_sweep_cpu.md

Every path runs the same jitted loop over `Program.train_step` (zoo.sweeps.engine) on the same batches, in compiled
loops of --chunk steps (as `python -m zoo.sweep --chunk`), the whole sweep --rounds times in turn (so machine load
falls on all alike). Compile time is reported apart from steady-state time, each path's from cleared JAX caches
after a discarded first compile in the process (`cold_compiles`); the speedup is the median over the rounds of the
steady-state ratio."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import platform
import shlex
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
from zoo.sweeps.processes import MemberPool, check_processes, train_members, usable_core_ids
from zoo.train import backend
from zoo.train.step import build_program

backend.cpu_cores_as_devices()  # as python -m zoo.sweep: the vmapped members split over the cores


def interleaved(vm: MemberTrainer, one: MemberTrainer, pool: MemberPool | None, make: Any, lrs: np.ndarray,
                seeds: np.ndarray, steps: int, rounds: int) -> dict[str, Any]:
    """The paths train every member all `steps` steps from fresh states, `rounds` times, taking turns (the program,
    the worker processes, then the members one by one), so machine load falls on all alike. Returns each path's
    steady-state seconds per round (the train steps: compile and init excluded) and first round's per-step losses
    [steps, members], and the processes' compile seconds."""
    out: dict[str, Any] = {"program": [], "processes": [], "sequential": []}
    for r in range(rounds):
        program = train_members(vm, lrs, seeds, steps, evaluate=False)
        out["program"].append(program.run_s)
        if pool is not None:
            result = pool.run(make, lrs, seeds, steps, evaluate=False)
            out["processes"].append(result.run_s)
            if r == 0:
                out["processes_compile_s"], out["processes_losses"] = result.compile_s, result.losses
        singles = [one.init(lrs[k:k + 1], seeds[k:k + 1]) for k in range(len(lrs))]
        before = one.run_s
        seq_losses = np.stack([one.train(state, steps)[1] for state in singles], 1)
        out["sequential"].append(one.run_s - before)
        if r == 0:
            out["program_losses"], out["sequential_losses"] = program.losses, seq_losses
    return out


def setup(args: argparse.Namespace) -> tuple[str, Any, Any, np.ndarray, np.ndarray]:
    """The data's name, the program, the data and the members' LRs and seeds."""
    name = args.data or ("synthetic" if args.synthetic else "cifar10")
    data = zoo.data.load(name)
    plugin = zoo.param.get(args.param)
    cfg = zoo.models.config("mlp_resnet", width=args.width, depth=args.depth, base_depth=args.base_depth,
                            in_shape=data.in_shape, num_classes=data.num_classes)
    prog = build_program(None, plugin, OptimConfig("adam"), model_of=functools.partial(zoo.models.create, "mlp_resnet",
                                                                                       cfg))
    lrs, seeds = members(list(np.logspace(-14, -4, args.lrs, base=2.0)), 1)
    return name, prog, data, lrs, seeds


def cold_compiles(vm: MemberTrainer, one: MemberTrainer, prog: Any, data: Any, args: argparse.Namespace,
                  lrs: np.ndarray, seeds: np.ndarray) -> None:
    """Compile both paths' programs, each from cleared JAX caches in a process that has compiled once before (a
    throwaway member, discarded): the first compile in a process also pays the process's one-off start (JAX's and
    MLIR's first traces and lowerings, 0.2-0.3 s on a 2-core CPU), which belongs to neither path; whichever path
    compiled first was charged it. The persistent compile cache is off here, so every compile is XLA's own. The
    throwaway member trains at another batch size: every product of the step has the batch in its shape, so the GPU
    compiler's in-process autotuning of the products (which jax.clear_caches keeps) is no head start for either path;
    at the paths' own batch size it handed the sequential path its products tuned (on an H200 it compiled in 0.8 s,
    where the leases before the throwaway measured 3.5 and 4.9 s)."""
    MemberTrainer(prog, data, args.batch_size + 1, chunk=args.chunk, vmapped=False).prepare(lrs[:1], seeds[:1],
                                                                                             args.steps, evaluate=False)
    for trainer, n in ((vm, len(lrs)), (one, 1)):
        jax.clear_caches()
        trainer.prepare(lrs[:n], seeds[:n], args.steps, evaluate=False)


def worker_trainer(args: argparse.Namespace) -> MemberTrainer:
    """A worker process's trainer: the program's, on the worker's one device."""
    _, prog, data, _, _ = setup(args)
    return MemberTrainer(prog, data, args.batch_size, chunk=args.chunk, group=args.group)


def max_rel_diff(losses: np.ndarray, reference: np.ndarray, lrs: np.ndarray, steps: int = 10) -> float:
    """The largest relative difference of per-step losses over the first `steps` steps, over the members at LRs up
    to the best one (the lowest final loss in the reference). Groups of more than one member sum in another order
    than a lone member, and training amplifies such rounding differences step after step, within a few steps past
    the best LR (1e-3 to 2e-2 by step 10 in bench/sweep.py's default grid), so the early steps of the members up to
    the best show whether the paths compute the same math (about 1e-6 in f32; 0 with groups of one)."""
    final = np.where(np.isfinite(reference[-1]), reference[-1], np.inf)
    kept = lrs <= lrs[int(np.argmin(final))]
    return float((np.abs(losses - reference) / np.abs(reference))[:steps, kept].max())


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
    p.add_argument("--rounds", type=int, default=5, help="times the paths train the whole sweep, in turn")
    p.add_argument("--chunk", type=int, default=100, help="train steps per compiled loop (python -m zoo.sweep's "
                   "default)")
    p.add_argument("--group", type=int, help="members vmapped together on a device (default: the engine's choice)")
    p.add_argument("--processes", type=int, help="worker processes of the processes path (python -m zoo.sweep "
                   "--processes; default: one per usable core on a CPU; 1 leaves the path out)")
    p.add_argument("--write", help="also write the numbers as markdown to this file")
    args = p.parse_args(argv)
    if min(args.lrs, args.width, args.depth, args.steps, args.batch_size, args.rounds, args.chunk,
           args.processes or 1) < 1:
        print("error: --lrs, --width, --depth, --steps, --batch-size, --rounds, --chunk and --processes must be "
              "positive", file=sys.stderr)
        raise SystemExit(1)
    if args.processes is None:
        args.processes = len(usable_core_ids()) if jax.default_backend() == "cpu" else 1
    try:
        check_processes(args.processes)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None

    name, prog, data, lrs, seeds = setup(args)
    vm = MemberTrainer(prog, data, args.batch_size, chunk=args.chunk, group=args.group)
    # the members one by one as train.py trains them (the plugin's numbers arguments of the program, as the sweep's)
    one = MemberTrainer(prog, data, args.batch_size, chunk=args.chunk, vmapped=False)
    # both compiled before the worker processes start: their imports would load both cores during the compile
    cold_compiles(vm, one, prog, data, args, lrs, seeds)
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(MemberPool(args.processes)) if args.processes > 1 else None
        timed = interleaved(vm, one, pool, functools.partial(worker_trainer, args), lrs, seeds, args.steps,
                            args.rounds)
    seq_steady = statistics.median(timed["sequential"])
    paths = [("one program", "program", vm.compile_s)]
    if pool is not None:
        paths.append((f"{args.processes} processes", "processes", timed["processes_compile_s"]))
    rows = []
    for label, key, compile_s in paths:
        ratios = [b / a for a, b in zip(timed[key], timed["sequential"], strict=True)]
        steady = statistics.median(timed[key])
        rows.append({"label": label, "steady": steady, "compile_s": compile_s, "ratio": statistics.median(ratios),
                     "low": min(ratios), "high": max(ratios),
                     "total_ratio": (seq_steady + one.compile_s) / (steady + compile_s),
                     "max_rel": max_rel_diff(timed[f"{key}_losses"], timed["sequential_losses"], lrs)})
    parts = "; ".join(f"{r['label']} {r['steady']:.2f} s + compile {r['compile_s']:.1f} s: {r['ratio']:.2f}x "
                      f"steady state (rounds {r['low']:.2f}-{r['high']:.2f}x; {r['total_ratio']:.2f}x with compile; "
                      f"max rel. loss diff {r['max_rel']:.1e} over 10 steps up to the best LR)" for r in rows)
    line = (f"sweep bench: {args.lrs} LRs, mlp_resnet w{args.width} d{args.depth}, {name}, {args.steps} steps, "
            f"batch {args.batch_size}, groups of {vm.group_size}; sequential {seq_steady:.2f} s + compile "
            f"{one.compile_s:.1f} s; {parts}; {jax.devices()[0].platform}")
    print(line)
    if args.write:
        command = shlex.join(["python", "bench/sweep.py", *(sys.argv[1:] if argv is None else argv)])
        write(Path(args.write), args, command, name, rows, one, seq_steady, line, vm.group_size)


def write(path: Path, args: argparse.Namespace, command: str, name: str, rows: list[dict[str, Any]], one: MemberTrainer,
          seq_steady: float, line: str, group: int) -> None:
    n = args.lrs * args.steps
    labels = {"one program": f"one program ({args.lrs} members over {jax.device_count()} devices, groups of {group})",
              f"{args.processes} processes": f"{args.processes} worker processes, one device each, groups of {group} "
              "(`python -m zoo.sweep --processes`)"}
    table = "\n".join(f"| {labels[r['label']]} | {r['compile_s']:.1f} | {r['steady']:.2f} | {n / r['steady']:.1f} | "
                      f"**{r['ratio']:.2f}x** ({r['total_ratio']:.2f}x) | {r['max_rel']:.1e} |" for r in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    platform = jax.devices()[0].platform
    note = ("On a CPU the one program makes each core a device (zoo.train.backend.cpu_cores_as_devices) and splits\n"
            "the members over them; the devices of one process share its XLA:CPU thread pool. The processes path\n"
            "(zoo.sweeps.processes) deals the same blocks of members to worker processes pinned each to its own\n"
            "cores, which share nothing. Both vmap a device's members in groups of as many as half of a core's share\n"
            "of the last-level cache holds the train states of. The >= 6x target is for a GPU, where one member\n"
            "leaves the device mostly idle." if platform == "cpu" else "Target on a GPU: >= 6x.")
    path.write_text(f"""# Sweep benchmark ({platform.upper()})

`{command}`

{args.lrs} learning rates of an MLP-ResNet (width {args.width}, depth {args.depth}, {args.param} with base depth
{args.base_depth}, Adam) on {name}, batch {args.batch_size}, {args.steps} steps per member. Every path runs the
same jitted loop over `Program.train_step` (chunks of {args.chunk} steps) on the same batches, the whole sweep
{args.rounds} times in turn; compile time (XLA, ahead of time) is apart from steady state (the train steps, the
median over the rounds).

Machine: {machine()}.

| path | compile s | steady-state s | member-steps / s | speedup (with compile) | max rel. loss diff |
|---|---|---|---|---|---|
| sequential ({args.lrs} runs of the same step, one device) | {one.compile_s:.1f} | {seq_steady:.2f} | \
{n / seq_steady:.1f} | 1x | 0 |
{table}

Speedup: the median over the rounds of the sequential members' steady-state seconds over the path's; with compile,
each path's compile from cleared JAX caches, after a discarded first compile in the process. The loss difference is
the largest relative one per step against the sequential members over the first 10 steps, of the members at LRs up
to the best: groups of more than one member reassociate the sums, which training amplifies step after step,
chaotically past the best LR (with groups of one the program and the sequential members are bit-identical at every
step).

{note}

Summary line: `{line}`
""")

if __name__ == "__main__":
    main()
