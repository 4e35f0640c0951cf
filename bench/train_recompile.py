"""Benchmark: `python train.py` twice with the same shapes, the second from the persistent compile cache the first
filled, every program's compile seconds (JAX's own compile events, summed over the run) cold against warm.

    python bench/train_recompile.py --steps 30                    # the default MLP-ResNet (issue 44's CPU item)
    python bench/train_recompile.py --model gpt --data shakespeare --steps 30

The other flags are train.py's. Each run is its own process with its own run dir, both on one fresh cache folder.
The cache is keyed by the lowered program, so a hit skips XLA's compile only: the warm run traces and lowers every
program again, and those seconds are what is left of its compile. (Runs of at most 20 steps compile for speed,
`zoo.train.step.SHORT_RUN`: give more steps to time the optimised compile.)
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

PHASES = {"trace": "/jax/core/compile/jaxpr_trace_duration",
          "lower": "/jax/core/compile/jaxpr_to_mlir_module_duration",
          "XLA compile or cache load": "/jax/core/compile/backend_compile_duration"}
COUNTS = {"programs compiled by XLA": "/jax/compilation_cache/cache_misses",
          "programs loaded from the cache": "/jax/compilation_cache/cache_hits"}


def child(out: str, flags: list[str]) -> None:
    """train.py's main on `flags`, JAX's compile events summed into `out` (JSON)."""
    from jax import monitoring

    from zoo.cli.train import main

    seconds, counts = collections.Counter(), collections.Counter()
    monitoring.register_event_duration_secs_listener(lambda event, s, **_: seconds.update({event: s}))
    monitoring.register_event_listener(lambda event, **_: counts.update([event]))
    main(flags)
    Path(out).write_text(json.dumps({"seconds": seconds, "counts": counts}))


def run(folder: Path, name: str, flags: list[str]) -> dict:
    out = folder / f"{name}.json"
    argv = [*flags, "--compile-cache", str(folder / "cache"), "--run-dir", str(folder / name)]
    proc = subprocess.run([sys.executable, __file__, "--child", str(out), *argv], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"error: train.py {' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> None:
    from zoo.cli.train import parser as train_parser

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Other flags go to train.py.")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args, flags = p.parse_known_args(argv)
    train_parser().parse_args(flags)  # a flag train.py refuses is refused here, before any run
    if args.child:
        return child(args.child, flags)
    with tempfile.TemporaryDirectory(prefix="zoo-recompile-") as folder:
        cold, warm = (run(Path(folder), name, flags) for name in ("cold", "warm"))
    print(f"train.py {' '.join(flags)}\n| | cold | warm | cold / warm |\n|---|---|---|---|")
    for label, event in COUNTS.items():
        print(f"| {label} | {cold['counts'].get(event, 0)} | {warm['counts'].get(event, 0)} | |")
    total = [0.0, 0.0]
    for label, event in PHASES.items():
        s = [run_["seconds"].get(event, 0.0) for run_ in (cold, warm)]
        total = [t + x for t, x in zip(total, s, strict=True)]
        print(f"| {label} s | {s[0]:.2f} | {s[1]:.2f} | {s[0] / max(s[1], 1e-9):.1f}x |")
    print(f"| all s | {total[0]:.2f} | {total[1]:.2f} | {total[0] / max(total[1], 1e-9):.1f}x |")


if __name__ == "__main__":
    main()
