"""GPT-2 124M's train step: zoo against nanoGPT's own `bench.py` (torch.compile), in one command (issue 44, item 5).

    python bench/gpt2_vs_nanogpt.py --nanogpt .gpu/nanoGPT     # one GPU: nanoGPT, zoo's variants, a profile
    python bench/gpt2_vs_nanogpt.py --size small                # CPU smoke test (no nanoGPT): seconds

nanoGPT's side is its checkout's `python bench.py --real_data=False --compile=True`, run as it is (a subprocess in
the checkout, never copied into zoo): GPT-2 124M (12 x 768, vocabulary 50304, bias=False, tied embeddings, dropout
0), batch 12 x 1024 of random tokens, bf16 autocast, fused AdamW, `torch.compile`; its "time per iteration" is 20
steps after 10 of burn-in, each step ending in loss.item(). It runs before JAX takes the GPU and, time allowing,
again after zoo's side (the median of the runs is the reference).

zoo's side is the same model and shape under `sp` (vocab_size 50304, bias=false, tie_embeddings=true, dropout 0,
bf16), AdamW with bench.py's betas and decay, no clipping, through the train step train.py runs (state donated),
compiled once per variant of the loss's formulation (each traced with it in per_example's place):

    previous    optax's cross-entropy on the logits cast to float32, argmax for the accuracy (zoo before its loss.py)
    fused-f32   zoo.train.loss.cross_entropy on the logits cast to float32: the previous numbers
    fused       zoo.train.loss.cross_entropy on the model's bf16 logits (zoo now)

A variant may carry XLA compile options after '+', e.g. `fused+xla_gpu_enable_cudnn_layer_norm=true`. Each is timed
in turn, `--rounds` times `--iters` steps (the median); compile time and the time to the first loss apart, the first
losses compared. Then a profile of one variant (bench/kernel_profile.py) and a table, last: ms/step, tokens/s and
zoo's tokens/s over nanoGPT's. Numbers and logs also land in $OUT when it is set. Predictions and results:
docs/benchmarks.md ("GPT-2 step on one H200: variants").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.45")  # leave nanoGPT's second run half of the GPU

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from gpt_step import timed  # noqa: E402
from kernel_profile import kernel_times, summary  # noqa: E402

import zoo.models  # noqa: E402
import zoo.param  # noqa: E402
from zoo.optim import OptimConfig  # noqa: E402
from zoo.train import step as train_step  # noqa: E402
from zoo.train.loss import cross_entropy  # noqa: E402
from zoo.train.step import build_program, on_leaves, run_once_options  # noqa: E402

# width, layers, context, batch, vocabulary, dtype: bench.py's GPT-2, and a CPU smoke size
SIZES = {"gpt2": (768, 12, 1024, 12, 50304, "bfloat16"), "small": (32, 1, 32, 2, 128, "bfloat16")}
LR, BETAS, WD = 1e-4, (0.9, 0.95), 1e-2  # bench.py's AdamW
NANOGPT = [sys.executable, "bench.py", "--real_data=False", "--compile=True"]


def previous(logits: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """per_example's loss before zoo.train.loss."""
    logits = logits.astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels), logits.argmax(-1) == labels


LOSSES: dict[str, Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]] = {
    "previous": previous, "fused-f32": lambda x, y: cross_entropy(x.astype(jnp.float32), y), "fused": cross_entropy}


def variant(spec: str) -> tuple[str, dict[str, Any]]:
    """'fused+flag=value+...' -> ('fused', {flag: value}); values true/false and integers typed."""
    name, *options = spec.split("+")
    if name not in LOSSES or not all("=" in o for o in options):
        raise argparse.ArgumentTypeError(f"{spec!r}: a loss ({', '.join(LOSSES)}) and XLA options flag=value after +")
    typed = {"true": True, "false": False}
    return name, {k: typed.get(v, int(v) if v.lstrip("-").isdigit() else v)
                  for k, v in (o.split("=", 1) for o in options)}


def nanogpt(folder: Path, timeout: float) -> dict[str, Any] | None:
    """One run of nanoGPT's bench.py: ms per iteration, its first loss and the run's wall time (imports and
    torch.compile included); None, with its output's tail printed, where it failed."""
    t0 = time.perf_counter()
    try:
        out = subprocess.run(NANOGPT, cwd=folder, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"nanoGPT bench.py: no result within {timeout:.0f} s")
        return None
    wall = time.perf_counter() - t0
    ms = re.search(r"time per iteration: ([\d.]+)ms", out.stdout)
    first = re.search(r"^0/10 loss: ([\d.]+)", out.stdout, re.M)
    if out.returncode or not ms:
        print(f"nanoGPT bench.py failed (exit {out.returncode}):\n{(out.stdout + out.stderr)[-2000:]}")
        return None
    return {"ms": float(ms.group(1)), "wall_s": wall, "first_loss": float(first.group(1)) if first else None,
            "commit": commit_of(folder)}


def commit_of(folder: Path) -> str | None:
    """The checkout's short commit, where it is a git checkout of its own: a copy of nanoGPT's files inside another
    repository (zoo's ignored .gpu/nanoGPT) would otherwise be labelled with that repository's commit."""
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel", "--short", "HEAD"],
                             capture_output=True, text=True)
    except OSError:
        return None
    lines = out.stdout.splitlines()  # a path may hold spaces
    if out.returncode or len(lines) != 2 or Path(lines[0]).resolve() != folder.resolve():
        return None
    return lines[1]


def zoo_variants(size: str, specs: list[str]) -> dict[str, dict[str, Any]]:
    """Each variant compiled (its loss in per_example's place while tracing) from the same init and batch: its run()
    (one step, returning the loss), compile and first-step seconds, and first loss."""
    n, layers, t, bsz, v, dtype = SIZES[size]
    cfg = zoo.models.config("gpt", width=n, depth=layers, seq_len=t, vocab_size=v, head_dim=min(64, n // 2),
                            dropout=0.0, bias=False, tie_embeddings=True, dtype=dtype)
    plugin = zoo.param.get("sp")
    optim = OptimConfig(name="adamw", lr=LR, b1=BETAS[0], b2=BETAS[1], weight_decay=WD)
    prog = build_program(lambda r: zoo.models.create("gpt", cfg, plugin, r), plugin, optim, jnp.dtype(dtype))
    key = jax.random.PRNGKey(0)
    init = jax.jit(prog.init).lower(key).compile(run_once_options())  # runs once per variant: its speed does not matter
    rng = np.random.default_rng(0)
    x, y = (jax.device_put(rng.integers(0, v, (bsz, t), dtype=np.int32)) for _ in range(2))  # as bench.py's
    out = {}
    for spec in specs:
        loss, options = variant(spec)
        leaves, treedef = jax.tree.flatten(init(key))
        step = on_leaves(lambda s, xb, yb: prog.train_step(s, {"x": xb, "y": yb}), treedef)
        traced = []

        def formulation(logits, labels, f=LOSSES[loss], traced=traced):
            traced.append(logits.shape)
            return f(logits, labels)

        t0 = time.perf_counter()
        try:
            with mock.patch.object(train_step, "cross_entropy", formulation):
                compiled = jax.jit(step, donate_argnums=0).lower(leaves, x, y).compile(options or None)
        except Exception as e:  # an XLA option this jaxlib does not know: the other variants still run
            print(f"zoo {spec}: not compiled: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        if not traced:
            sys.exit("zoo.train.step.per_example no longer calls cross_entropy: the variants would all be zoo's loss")
        compile_s = time.perf_counter() - t0
        holder = {"leaves": leaves}

        def run(holder=holder, compiled=compiled) -> jax.Array:
            holder["leaves"], metrics = compiled(holder["leaves"], x, y)
            return metrics["loss"]

        t0 = time.perf_counter()
        first = float(run())
        out[spec] = {"run": run, "compile_s": compile_s, "first_step_s": time.perf_counter() - t0,
                     "first_loss": first}
        print(f"zoo {spec}: compiled in {compile_s:.1f} s, first loss {first:.5f}", flush=True)
    return out


def profiled(spec: str, side: dict[str, Any], calls: int = 5) -> list[str]:
    """The kernel profile of `calls` steps of a zoo variant (bench/kernel_profile.py), or why there is none."""
    try:
        with tempfile.TemporaryDirectory() as folder:
            times = kernel_times(side["run"], calls, folder)
    except Exception as e:  # the profiler's libraries (CUPTI) missing: the timings stand without it
        return [f"no profile of zoo {spec}: {str(e).splitlines()[0][:200]}"]
    return [f"profile of zoo {spec}:", *summary(times, calls, statistics.median(side["times"]))]


def table(rows: list[dict[str, Any]], reference: float | None) -> list[str]:
    """The rows' compile seconds, ms/step (zoo's: the median, the rounds' max - min over it, and ms/step with each
    step's loss fetched, as bench.py's loop does), tokens/s and its ratio to `reference` (tokens/s), first loss."""
    lines = [f"{'side':50s} {'compile s':>9s} {'ms/step':>8s} {'spread':>6s} {'synced':>7s} {'tok/s':>10s} "
             f"{'vs nanoGPT':>10s} {'first loss':>10s}"]
    for r in rows:
        ratio = f"{r['tokens'] / r['ms'] * 1e3 / reference:.3f}x" if reference else "-"
        first = "-" if r.get("first_loss") is None else f"{r['first_loss']:.4f}"
        spread = f"{(max(r['spread_ms']) - min(r['spread_ms'])) / r['ms']:.1%}" if "spread_ms" in r else "-"
        synced = f"{r['synced_ms']:.2f}" if "synced_ms" in r else "-"
        lines.append(f"{r['side']:50s} {r['compile_s']:9.1f} {r['ms']:8.2f} {spread:>6s} {synced:>7s} "
                     f"{r['tokens'] / r['ms'] * 1e3:10,.0f} {ratio:>10s} {first:>10s}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nanogpt", type=Path, help="a nanoGPT checkout (its bench.py is run as it is)")
    ap.add_argument("--size", choices=SIZES, default="gpt2")
    ap.add_argument("--variants", default="previous,fused-f32,fused", help="zoo's variants, comma-separated")
    ap.add_argument("--rounds", type=int, default=5, help="timed runs of each variant, in turn")
    ap.add_argument("--iters", type=int, default=20, help="steps per timed run")
    ap.add_argument("--profile", default="fused", help="the variant to profile ('none': no profile)")
    ap.add_argument("--nanogpt-runs", type=int, default=2, help="runs of bench.py (the second after zoo's side)")
    ap.add_argument("--budget", type=float, default=180.0,
                    help="seconds after which no further nanoGPT run starts (one takes about 30-40 s)")
    args = ap.parse_args(argv)
    specs = [s for s in args.variants.split(",") if s]
    for spec in specs:
        try:
            variant(spec)
        except argparse.ArgumentTypeError as e:
            ap.error(str(e))
    if args.nanogpt is not None and not (args.nanogpt / "bench.py").is_file():
        sys.exit(f"--nanogpt {args.nanogpt}: no bench.py there (a nanoGPT checkout is needed)")
    start = time.perf_counter()
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    runs = [nanogpt(args.nanogpt, 150)] if args.nanogpt else []  # before JAX allocates the GPU's memory
    zoo_sides = zoo_variants(args.size, specs)
    for _ in range(args.rounds):
        for side in zoo_sides.values():
            side.setdefault("times", []).append(timed(side["run"], args.iters))
    for side in zoo_sides.values():  # as bench.py times: each step's loss fetched before the next step starts
        side["synced"] = timed(lambda run=side["run"]: np.asarray(run()), args.iters)
    n, layers, t, bsz, v, dtype = SIZES[args.size]
    print(f"device {jax.devices()[0].device_kind}, jax {jax.__version__}; GPT {layers} x {n}, T {t}, batch {bsz}, "
          f"vocab {v}, {dtype}; zoo: medians of {args.rounds} rounds of {args.iters} steps")
    firsts = {spec: side["first_loss"] for spec, side in zoo_sides.items()}
    if firsts:
        name, base = next(iter(firsts.items()))
        print("first losses: " + ", ".join(f"{k} {f:.5f} ({abs(f - base) / abs(base):.1e} from {name})"
                                           for k, f in firsts.items()))
    profile = []
    if args.profile in zoo_sides:
        profile = profiled(args.profile, zoo_sides[args.profile])
        print("\n".join(profile))
    while args.nanogpt and len(runs) < args.nanogpt_runs and time.perf_counter() - start < args.budget:
        runs.append(nanogpt(args.nanogpt, 60))
    done = [r for r in runs if r]
    rows = [{"side": f"nanoGPT{' ' + r['commit'] if r['commit'] else ''} bench.py, torch.compile (run {i + 1})",
             "compile_s": r["wall_s"],
             "ms": r["ms"], "tokens": 12 * 1024, "first_loss": r["first_loss"]} for i, r in enumerate(done)]
    rows += [{"side": f"zoo {spec}", "compile_s": side["compile_s"], "ms": statistics.median(side["times"]) * 1e3,
              "tokens": bsz * t, "first_loss": side["first_loss"], "spread_ms": [s * 1e3 for s in side["times"]],
              "synced_ms": side["synced"] * 1e3, "first_step_s": side["first_step_s"]}
             for spec, side in zoo_sides.items()]
    reference = statistics.median(12 * 1024 / r["ms"] * 1e3 for r in done) if done else None
    lines = table(rows, reference)
    lines.append("(nanoGPT's compile s: its whole run, imports and 30 steps included; zoo's first variant's includes "
                 "the GEMM autotuning the others reuse; vs nanoGPT: tokens/s over the median nanoGPT run's, target "
                 ">= 1.15x)")
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        record = {"rows": rows, "reference_tok_s": reference, "device": jax.devices()[0].device_kind}
        (out_dir / "gpt2_vs_nanogpt.json").write_text(json.dumps(record, indent=1))
        (out_dir / "gpt2_vs_nanogpt.txt").write_text("\n".join(profile + lines) + "\n")
    print(f"total {time.perf_counter() - start:.0f} s")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
