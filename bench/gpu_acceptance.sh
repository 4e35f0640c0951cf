#!/usr/bin/env bash
# The GPU acceptance runs of issues 4 and 6, as one script. Run on a GPU machine from the repo root:
#   bash bench/gpu_acceptance.sh [OUT_DIR]
# Each default run prints its throughput; summaries (best eval, params) land in OUT_DIR/<name>/summary.json.
set -euo pipefail
out=${1:-${OUT:-runs/gpu}}
mkdir -p "$out"
# GPT, nanoGPT's char-level config (6 layers, 6 heads, width 384, context 256, batch 64, dropout 0.2,
# AdamW lr 1e-3, warmup 100, cosine to 1e-4, beta2 0.99, 5000 steps): these are the gpt defaults.
python train.py --model gpt --param sp --precision bf16 --run-dir "$out/gpt" 2>&1 | tee "$out/gpt.log"
# ViT (width 192, depth 6, patch 4) and Mixer on the bundled CIFAR-10, default runs.
python train.py --model vit --param sp --precision bf16 --run-dir "$out/vit" 2>&1 | tee "$out/vit.log"
python train.py --model mixer --param sp --precision bf16 --run-dir "$out/mixer" 2>&1 | tee "$out/mixer.log"
# The vmapped LR sweep against 16 sequential runs (issue 6).
python bench/sweep.py 2>&1 | tee "$out/sweep.log"
for r in gpt vit mixer; do echo "$r: $(cat "$out/$r/summary.json")"; done
