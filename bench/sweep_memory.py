"""Benchmark: peak memory (max RSS) of a vmapped LR sweep against its member count, and of one train.py run.

    python bench/sweep_memory.py                                  # 2-block GPT, width 256, 1 2 4 8 members
    python bench/sweep_memory.py --widths 64,128,256 --write docs/bench_sweep_memory_cpu.md

Each point is its own process (`python -m zoo.sweep`, or `train.py` for the reference run at the largest
width), so its max RSS includes JAX, XLA's compiles and the data, as a user would see it. A sweep of K members
should cost about one run plus K members' state and activations.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def max_rss_gb(argv: list[str]) -> float:
    """Run argv from the repository root; its peak resident memory in GB (os.wait4's ru_maxrss, in KiB)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = err.strip().splitlines()[-1] if err.strip() else f"exit status {proc.returncode}"
        raise RuntimeError(f"{' '.join(argv[1:4])}... failed: {tail}")
    return usage.ru_maxrss * 1024 / 1e9


def lr_list(k: int) -> str:
    """k distinct LRs, 2^-12, 2^-11.5, ... (the values do not change the memory)."""
    return ",".join(f"2^{-12 + 0.5 * i:g}" for i in range(k))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", default="1,2,4,8", help="member counts to measure")
    p.add_argument("--widths", default="256", help="widths of each sweep (one process runs them in turn)")
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--data", default="shakespeare")
    p.add_argument("--model-opt", action="append", default=[], metavar="K=V",
                   help="a GPT option, repeatable (head_dim=16 for widths that are no multiple of 64)")
    p.add_argument("--write", help="also write the table as markdown to this file")
    args = p.parse_args(argv)
    try:
        counts = [int(k) for k in args.members.split(",")]
        widths = [int(w) for w in args.widths.split(",")]
        if min(counts + widths) < 1:
            raise ValueError
    except ValueError:
        print("error: --members and --widths must be comma lists of positive integers", file=sys.stderr)
        raise SystemExit(1) from None
    shape = ["--model", "gpt", "--param", "mup", "--depth", str(args.depth), "--base-width", str(min(widths)),
             "--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len), "--steps", str(args.steps),
             "--data", args.data, *(f"--model-opt={kv}" for kv in args.model_opt)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        single = max_rss_gb([sys.executable, "train.py", *shape, "--width", str(max(widths)),
                             "--run-dir", f"{tmp}/run", "--eval-every", str(args.steps)])
        print(f"one train.py run, width {max(widths)}: {single:.2f} GB")
        for k in counts:
            gb = max_rss_gb([sys.executable, "-m", "zoo.sweep", *shape, "--widths", args.widths, "--lrs", lr_list(k),
                             "--out", f"{tmp}/sweep{k}", "--compile-cache", "off"])
            rows.append((k, gb))
            print(f"sweep, widths {args.widths}, {k} members: {gb:.2f} GB ({gb / single:.2f}x the train.py run)")
    if args.write:
        command = shlex.join(["python", "bench/sweep_memory.py", *(sys.argv[1:] if argv is None else argv)])
        write(Path(args.write), args, command, single, rows)


def write(path: Path, args: argparse.Namespace, cmd: str, single: float, rows: list[tuple[int, float]]) -> None:
    from sweep import machine  # bench/sweep.py, beside this script

    widths = args.widths
    table = "\n".join(f"| {k} | {gb:.2f} | {gb / single:.2f}x |" for k, gb in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""# Sweep memory (CPU)

`{cmd}`

Peak resident memory (max RSS of the process) of `python -m zoo.sweep` on a {args.depth}-block GPT (muP),
widths {widths}, batch {args.batch_size} x {args.seq_len} tokens, {args.steps} steps, {args.data}, against its
member count; the reference is one `train.py` run of the width-{max(int(w) for w in widths.split(','))} model with
the same settings: **{single:.2f} GB**.

| members | max RSS (GB) | vs one train.py run |
|---|---|---|
{table}

Machine: {machine()}.
""")


if __name__ == "__main__":
    main()
