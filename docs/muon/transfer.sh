#!/usr/bin/env bash
# Width transfer of the LR under Muon and Adam, muP and SP, on the GPT (tiny-shakespeare, char level): one vmapped
# LR sweep per width (zoo.sweep), then the figure and scores beside this script (transfer_plot.py).
# Sized for a shared 2-core CPU (about 45 min wall at nice 19): depth 1, widths 64..512 (base 64), 7 LRs, 150 steps
# of batch 8 x 64 tokens, warmup 15 then cosine to 0.1, no weight decay, no clipping, no dropout.
#   bash docs/muon/transfer.sh [OUT]      (default runs/muon_transfer; rerunning skips finished widths)
set -euo pipefail
OUT=${1:-runs/muon_transfer}
HERE=$(dirname "$0")
for opt in adam muon; do
  for param in mup sp; do
    nice -n 19 python -m zoo.sweep --out "$OUT/${opt}_${param}" --model gpt --param "$param" --optimizer "$opt" \
      --widths 64,128,256,512 --depths 1 --base-width 64 --lrs 2^-11:2^-5:1 --steps 150 --batch-size 8 \
      --seq-len 64 --model-opt dropout=0 --data shakespeare --warmup 15 --schedule cosine --min-lr-ratio 0.1 \
      --weight-decay 0 --clip-norm 0
  done
done
python "$HERE/transfer_plot.py" "$OUT" "$HERE"
