"""Where a sweep's cold compile spends its time inside XLA: one shape's programs (init, train chunk, eval) compiled
under jax.profiler, the compiler's own trace events (passes, code generation, autotuning, PTX assembly) summed by
name, each event's self time (its time less the events nested in it on the same thread), over every thread.

    python bench/compile_profile.py --model gpt --depth 2 --width 128 --seq-len 128 --batch-size 32 --steps 100 \\
        --data shakespeare --members 1,9 --write OUT/compile_profile.md          # issue 44's GPU sweep

Each member count compiles into an empty persistent cache with JAX's caches cleared, as bench/sweep_compile.py's cold
runs do; Python's frames are not traced (the tracer slows what it times), so the wall-clock less the events' time
on the main thread is JAX's tracing and lowering. Self seconds are summed over threads, so they can exceed the
wall-clock where XLA compiles kernels in parallel (and include a thread's waits inside an event).
"""

from __future__ import annotations

import collections
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
from sweep_compile import measure, shape_flags, show  # noqa: I001 (bench/'s own module: bench/ is the script's folder on sys.path)

from zoo.cli.flags import Parser, positive
from zoo.cli.sweep import add_run_flags, run_config
from zoo.sweeps.runner import load_data
from zoo.train import backend, compile_cache
from zoo.train.setup import setup

Totals = dict[str, tuple[int, float]]  # event name -> (count, self ns)


def self_times(lines: list[list[tuple[str, int, int]]]) -> Totals:
    """Event name -> (count, self ns) over `lines`, each a thread's events as (name, start ns, duration ns): an
    event's self time is its duration less its direct children's (the events inside it on the same line)."""
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for events in lines:
        stack: list[list[Any]] = []  # [name, end ns, own ns]

        def close(entry: list[Any]) -> None:
            totals[entry[0]][0] += 1
            totals[entry[0]][1] += entry[2]

        for name, start, duration in sorted(events, key=lambda e: (e[1], -e[2])):
            while stack and stack[-1][1] <= start:
                close(stack.pop())
            if stack:
                stack[-1][2] -= duration
            stack.append([name, start + duration, float(duration)])
        while stack:
            close(stack.pop())
    return {name: (int(n), ns) for name, (n, ns) in totals.items()}


def profiled(compile_: Any, folder: Path) -> tuple[Totals, float]:
    """compile_() under jax.profiler.trace into `folder`: its host events' self times and the wall-clock seconds."""
    from jax._src.lib import _profile_data  # jax.profiler.ProfileData in later versions

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # Python's frames would slow the tracing they time (4x on a CPU)
    with jax.profiler.trace(str(folder), profiler_options=options):
        wall = time.perf_counter()
        compile_()
        wall = time.perf_counter() - wall
    newest = max(folder.rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    profile = getattr(jax.profiler, "ProfileData", _profile_data.ProfileData).from_file(str(newest))
    lines = [[(e.name, e.start_ns, e.duration_ns) for e in line.events]
             for plane in profile.planes if plane.name.startswith("/host:") for line in plane.lines]
    return self_times(lines), wall


def table(totals: Totals, top: int) -> list[str]:
    """The `top` compiler events by self time."""
    xla = sorted(((name, n, ns) for name, (n, ns) in totals.items()), key=lambda r: -r[2])
    rows = ["| event | count | self s |", "|---|---|---|"]
    rows += [f"| {name.replace('|', '/')[:100]} | {n} | {ns / 1e9:.2f} |" for name, n, ns in xla[:top]]
    rest = sum(ns for _, _, ns in xla[top:])
    rows.append(f"| (the other {max(len(xla) - top, 0)} compiler events) | | {rest / 1e9:.2f} |")
    return rows


def main(argv: list[str] | None = None) -> None:
    p = Parser(description=__doc__.splitlines()[0])
    shape_flags(p, [1, 9])
    p.add_argument("--top", type=positive, default=25, help="compiler events listed per member count")
    p.add_argument("--write", help="also write the tables as markdown to this file")
    add_run_flags(p)
    args = p.parse_args(argv)
    backend.cpu_cores_as_devices()  # as python -m zoo.sweep
    run = run_config(args)
    data = load_data(run)
    cfg = run.replace(width=args.width, depth=args.depth, base_width=args.base_width or args.width,
                      base_depth=args.base_depth or args.depth)
    steps = setup(cfg, data).steps
    dev = jax.devices()[0]
    lines = [f"# Where a sweep's cold compile goes ({dev.platform.upper()}: {dev.device_kind}, jax {jax.__version__})",
             ""]
    with tempfile.TemporaryDirectory(prefix="zoo-compile-profile-") as folder:
        for count in sorted(args.members):
            compile_cache.use(tempfile.mkdtemp(prefix="cache-", dir=folder))
            jax.clear_caches()
            totals, wall = profiled(lambda c=count: measure(cfg, data, c, steps, args.chunk, train=False),
                                    Path(folder) / f"trace{count}")
            lines += [f"## {count} members: compile {wall:.2f} s wall-clock", "", *table(totals, args.top), ""]
    show("\n".join(lines), args.write)


if __name__ == "__main__":
    main()
