#!/usr/bin/env bash
# The GPU acceptance runs of the model and sweep issues. From the repo root on a GPU machine:
#   bash bench/gpu_acceptance.sh [OUT_DIR] [PART ...]      PART: gpt vit mixer step sweep (default: all five)
# Each part fits a 10-minute command on an H100, so a leased machine can run them one call each. Needs jax, flax,
# optax, orbax-checkpoint, rich, matplotlib, pyyaml and pillow (not tensorflow-datasets: the bundled data is used).
# Summaries (best eval, params) land in OUT_DIR/<part>/summary.json, logs in OUT_DIR/<part>.log; record the
# numbers in docs/results.md.
set -euo pipefail
out=${1:-${OUT:-runs/gpu}}
shift || true
parts=${*:-gpt vit mixer step sweep}
mkdir -p "$out"
for part in $parts; do
  case $part in
    # nanoGPT's char-level config (6 layers, 6 heads, width 384, context 256, batch 64, dropout 0.2, AdamW lr 1e-3,
    # warmup 100, cosine to 1e-4, beta2 0.99, 5000 steps): the gpt defaults. Target: best val loss <= 1.50.
    gpt) python train.py --model gpt --param sp --precision bf16 --run-dir "$out/gpt" 2>&1 | tee "$out/gpt.log" ;;
    # ViT (width 192, depth 6, patch 4) and Mixer on the bundled CIFAR-10, default runs. ViT target: >= 75%.
    vit) python train.py --model vit --param sp --precision bf16 --run-dir "$out/vit" 2>&1 | tee "$out/vit.log" ;;
    mixer) python train.py --model mixer --param sp --precision bf16 --run-dir "$out/mixer" 2>&1 \
             | tee "$out/mixer.log" ;;
    # zoo's GPT step against a plain-JAX GPT of the same math, nanoGPT config, bf16.
    step) python bench/gpt_step.py 2>&1 | tee "$out/step.log" ;;
    # 16 LRs as one vmapped program against 16 sequential runs of the same step. Target: >= 6x.
    sweep) python bench/sweep.py --write "$out/bench_sweep_gpu.md" 2>&1 | tee "$out/sweep.log" ;;
    *) echo "unknown part $part (gpt vit mixer step sweep)" >&2; exit 2 ;;
  esac
done
for r in gpt vit mixer; do
  if [ -f "$out/$r/summary.json" ]; then echo "$r: $(cat "$out/$r/summary.json")"; fi
done
