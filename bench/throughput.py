"""Train-step throughput of any zoo model at a given batch, and its model FLOPs utilisation.

    python bench/throughput.py --config configs/gpt2_124m.yaml --batch 12 --vocab 50257     # GPT-2 124M, T 1024
    python bench/throughput.py --config configs/gpt2_124m.yaml --batch 32 --vocab 50257
    python bench/throughput.py --model vit --batch 512 --precision bf16                      # 32x32 images
    python bench/throughput.py --model mixer --batch 512 --precision bf16
    python bench/throughput.py --model vit --depth 6 --model-opt head_dim=64 --model-opt mlp_ratio=4 --batch 512

The model, plugin and optimizer are the run's (the preset or the model's defaults; --width/--depth override),
on random tokens or images of the data's shape, through the same jitted train step as train.py (state donated,
no grad accumulation). FLOPs per step are XLA's count of the lowered step, before the backend's passes
(`Lowered.cost_analysis`: on a GPU the compiled step's count leaves out the cuBLAS and cuDNN calls, about 10x too few
for GPT-2 on an H200; a fused cuDNN attention is not counted either way; where the GPU's lowered step counts
nothing, as behind CUDA's PJRT plugin, the same step is lowered in a CPU-only process), so MFU =
FLOPs/s / the chip's dense bf16 peak. The step's compile (lowering and XLA) is timed cold, into a fresh persistent
compile cache, and warm, from that cache with JAX's in-memory caches cleared (a rerun of train.py). Reference
numbers (measured by their authors on one H100): nanoGPT GPT-2 124M 437k tokens/s at batch 12 x 1024 and 475k at
32 x 1024; timm ViT (192 wide, 6 deep, patch 4) 37.8k img/s and Mixer (256 wide, 8 deep) 34.5k img/s at batch 512 on
32x32 images.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import zoo.models
import zoo.param
from zoo.config import resolve
from zoo.config_file import read_file
from zoo.train import compile_cache
from zoo.train.step import build_program, flops_of

PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "GH200": 989e12}  # dense bf16 FLOP/s


def peak(device_kind: str) -> float | None:
    return next((v for k, v in PEAK_BF16.items() if k in device_kind), None)


def flops_on_cpu() -> float | None:
    """XLA's count of this command's train step lowered in a CPU-only process (its attention XLA's, as the count
    of the lowered step on CPU and GPU alike; nothing is compiled): for a GPU behind the PJRT C API (CUDA's plugin),
    whose lowered programs count nothing."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    run = subprocess.run([sys.executable, *sys.argv, "--count-flops"], env=env, capture_output=True, text=True)
    try:
        return float(run.stdout.split()[-1]) if run.returncode == 0 else None
    except (IndexError, ValueError):  # nothing printed, or "None": the CPU counts nothing either
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="a preset (configs/*.yaml)")
    ap.add_argument("--model", help="a model's defaults, when no --config")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--width", type=int)
    ap.add_argument("--depth", type=int)
    ap.add_argument("--model-opt", action="append", default=[], metavar="K=V",
                    help="a model option over the preset's or recipe's, repeatable")
    ap.add_argument("--vocab", type=int, default=65, help="vocabulary of the random tokens (language models)")
    ap.add_argument("--image", type=int, nargs=3, default=(32, 32, 3), metavar=("H", "W", "C"))
    ap.add_argument("--classes", type=int, default=10, help="classes of the random labels (image models)")
    ap.add_argument("--precision", choices=("f32", "bf16"))
    ap.add_argument("--steps", type=int, default=30, help="timed steps (after 3 warm-up steps)")
    ap.add_argument("--count-flops", action="store_true", help="print XLA's FLOPs of the lowered step and stop")
    args = ap.parse_args()
    flags = {"model": args.model, "width": args.width, "depth": args.depth, "precision": args.precision,
             "model_opt": dict(kv.split("=", 1) for kv in args.model_opt) or None}
    cfg = resolve(flags, read_file(args.config) if args.config else None)
    m, precision = cfg.model, cfg.loop.precision
    task = zoo.models.model_class(m.name).task
    facts = ({"vocab_size": args.vocab, "seq_len": cfg.data.seq_len} if task == "lm" else
             {"in_shape": tuple(args.image), "num_classes": args.classes})
    default = zoo.models.config(m.name)
    model_cfg = zoo.models.config(m.name, **{**facts, "width": m.width or default.width,
                                             "depth": m.depth or default.depth,
                                             "base_width": m.base_width or default.width,
                                             "base_depth": m.base_depth or default.depth,
                                             "dtype": "bfloat16" if precision == "bf16" else "float32", **m.options})
    plugin = zoo.param.get(cfg.param.name, **cfg.param.options)
    dtype = jnp.bfloat16 if precision == "bf16" else jnp.float32
    prog = build_program(lambda r: zoo.models.create(m.name, model_cfg, plugin, r), plugin, cfg.optim, dtype,
                         horizon=cfg.loop.steps or 1)
    rng = np.random.default_rng(0)
    if task == "lm":
        x = rng.integers(0, args.vocab, (args.batch, cfg.data.seq_len)).astype(np.int32)
        batch, per_step, unit = {"x": x, "y": np.roll(x, -1, 1)}, args.batch * cfg.data.seq_len, "tokens"
    else:
        x = rng.integers(0, 256, (args.batch, *args.image)).astype(np.uint8)
        y = rng.integers(0, args.classes, args.batch).astype(np.int32)
        batch, per_step, unit = {"x": x, "y": y}, args.batch, "images"
    if args.count_flops:
        print(flops_of(jax.jit(prog.train_step).lower(jax.eval_shape(prog.init, jax.random.PRNGKey(0)), batch)))
        return
    batch = jax.device_put(batch)
    state = jax.jit(prog.init)(jax.random.PRNGKey(0))
    cache = tempfile.mkdtemp(prefix="zoo-bench-cache-")
    compile_cache.use(cache)
    seconds, cpu = [], []  # wall-clock and this process's CPU seconds (the steadier on a shared machine)
    for _ in ("cold", "warm"):
        jax.clear_caches()
        t0, c0 = time.perf_counter(), time.process_time()
        lowered = jax.jit(prog.train_step, donate_argnums=0).lower(state, batch)
        compiled = lowered.compile()
        seconds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    shutil.rmtree(cache, ignore_errors=True)
    flops, counted = flops_of(lowered), "XLA"
    if flops is None:
        flops, counted = flops_on_cpu(), "XLA, lowered on the CPU"
    for _ in range(3):
        state, metrics = compiled(state, batch)
    jax.block_until_ready(metrics)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        state, metrics = compiled(state, batch)
    jax.block_until_ready(metrics)
    dt = (time.perf_counter() - t0) / args.steps
    kind = jax.devices()[0].device_kind
    print(f"device {kind}; {m.name} width {model_cfg.width} depth {model_cfg.depth}, "
          f"{zoo.models.param_count(state['params']):,} parameters, batch {args.batch}, {precision}")
    print(f"{dt * 1e3:.2f} ms/step, {per_step / dt:,.0f} {unit}/s; compile {seconds[0]:.2f} s cold, "
          f"{seconds[1]:.2f} s warm (persistent cache): {seconds[0] / seconds[1]:.1f}x; CPU {cpu[0]:.2f} s and "
          f"{cpu[1]:.2f} s: {cpu[0] / cpu[1]:.1f}x")
    if flops:
        chip = peak(kind)
        mfu = f", MFU {flops / dt / chip:.1%} of {chip / 1e12:.0f} TFLOP/s" if chip else ""
        print(f"{flops / 1e9:,.1f} GFLOP/step ({counted}), {flops / dt / 1e12:,.1f} TFLOP/s{mfu}")


if __name__ == "__main__":
    main()
