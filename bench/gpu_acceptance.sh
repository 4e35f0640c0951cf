#!/usr/bin/env bash
# The GPU acceptance runs (issues 4, 6, 10 and 44). From the repo root on a GPU machine:
#   bash bench/gpu_acceptance.sh [OUT_DIR] [PART ...]
#   PART: gpt gpt2 image-steps vit mixer augment step sweep compile compile-profile nanogpt gpt-options1 gpt-options2
#   (default: the first nine). nanogpt and gpt-options* need a nanoGPT checkout at $NANOGPT (default .gpu/nanoGPT;
#   gpt runs nanoGPT too where it is there), and gpt-options* the gpt part's nanogpt_s1337.json in $NANOGPT_RUNS
#   (default .gpu).
# Each part fits a 10-minute command on an H200 (docs/results/gpu.md says which go together in one), writes what it
# measured to OUT_DIR in at most 8 plain-named files, one folder down at most (the run folders stay in $WORK, a
# temporary folder by default), and prints it at the end. Needs jax, flax, optax, orbax-checkpoint, rich, matplotlib,
# pyyaml and pillow (not grain or tensorflow-datasets: the bundled data is used). Record the numbers, with the GPU's
# name, in docs/results/gpu.md (the default runs in docs/results/training.md, the recipes' in docs/recipes/).
set -euo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # bench/*.py import zoo from the checkout: a bare machine has no install
out=${1:-${OUT:-runs/gpu}}
shift || true
parts=${*:-gpt gpt2 image-steps vit mixer augment step sweep compile}
nanogpt=${NANOGPT:-.gpu/nanoGPT}
nanogpt_runs=${NANOGPT_RUNS:-.gpu}
work=${WORK:-$(mktemp -d)}
mkdir -p "$out" "$work"

need_nanogpt() {  # a part that cannot be judged without nanoGPT stops here, before it spends device time
  if [ ! -f "$nanogpt/model.py" ]; then
    echo "no nanoGPT checkout at $nanogpt: copy its files there (an ignored folder) and carry it" >&2; exit 2
  fi
}

gpt_options() {  # Each model option that undoes one of nanoGPT's choices (docs/gpt_parity.md), zoo alone at the char
  # config against the gpt part's nanoGPT run: its measured effect on the best val loss, in OUT/<part>.md.
  need_nanogpt
  if [ ! -f "$nanogpt_runs/nanogpt_s1337.json" ]; then
    echo "no nanoGPT run at $nanogpt_runs/nanogpt_s1337.json: copy the gpt part's file there and carry it" >&2; exit 2
  fi
  for opt in "$@"; do
    python bench/nanogpt_compare.py --nanogpt "$nanogpt" --gpu --seeds 1337 --only zoo --zoo-opt "$opt" \
      --nanogpt-runs "$nanogpt_runs" --out "$work/$part/${opt//=/-}"
    { echo "## --model-opt $opt"; cat "$work/$part/${opt//=/-}/table.md"; echo; } >> "$out/$part.md"
  done
}

for part in $parts; do
  case $part in
    # (a) nanoGPT's char-level "baby" config, the gpt recipe, in bf16, with nanoGPT's estimator (200 random batches
    # per split) beside zoo's whole-split eval; where $nanogpt is a nanoGPT checkout, nanoGPT's own run after it on
    # the same GPU (bench/nanogpt_char.py: autocast, torch.compile), both in OUT/gpt-table.md (docs/gpt_parity.md):
    # best val loss <= 1.470 in less wall time than nanoGPT's (151 s on an H200). About 5 minutes.
    gpt) { if [ -f "$nanogpt/model.py" ]; then
             python bench/nanogpt_compare.py --nanogpt "$nanogpt" --gpu --seeds 1337 --out "$work/gpt"
             cp "$work/gpt/table.md" "$out/gpt-table.md"
             cp "$work/gpt/nanogpt_s1337.json" "$work/gpt/zoo_s1337.log" "$work/gpt/nanogpt_s1337.log" "$out/"
             cp "$work/gpt/zoo_s1337/summary.json" "$out/gpt-summary.json"
           else
             echo "no nanoGPT checkout at $nanogpt: zoo alone"
             python train.py --model gpt --param sp --precision bf16 --eval-iters 200 --run-dir "$work/gpt"
             cp "$work/gpt/summary.json" "$out/gpt-summary.json"
           fi; } 2>&1 | tee "$out/gpt.log" ;;
    # (b) GPT-2 124M (configs/gpt2_124m.yaml) on random tokens: tokens/s and MFU at batch 12 and 32 x 1024,
    # against nanoGPT's 437k and 475k tokens/s on an H100. About 2 minutes.
    gpt2) for b in 12 32; do
            python bench/throughput.py --config configs/gpt2_124m.yaml --batch "$b" --vocab 50257
          done 2>&1 | tee "$out/gpt2.log" ;;
    # (c) ViT (192 wide, 6 deep, 3 heads of 64, MLP ratio 4, patch 4) and Mixer (256 wide, 8 deep) train steps at
    # batch 512 on 32x32 images, against timm's 37.8k and 34.5k img/s on an H100 for those shapes (the recipes train
    # other shapes: the options pin these). About 1 minute.
    image-steps) { python bench/throughput.py --model vit --depth 6 --model-opt head_dim=64 --model-opt mlp_ratio=4 \
                     --model-opt drop_path=0 --batch 512 --precision bf16
                   python bench/throughput.py --model mixer --width 256 --batch 512 --precision bf16; } 2>&1 \
                   | tee "$out/image-steps.log" ;;
    # The default ViT and Mixer runs on the bundled CIFAR-10, their recipes (zoo/models/vit.py, mixer.py: SPT_LSA_ViT's
    # ViT, 300 epochs of batch 512, and MLP-Mixer-CIFAR's Mixer-nano, 300 epochs of batch 128; docs/augment.md);
    # targets >= 90% and >= 89% test accuracy, each under 10 minutes (one call each). The result, with the wall time
    # to the best eval from the command's start, is OUT/<model>.md and .json (bench/recipe_report.py), for
    # docs/recipes/.
    vit|mixer) start=$(date +%s.%N)
               { python train.py --model "$part" --param sp --precision bf16 --run-dir "$work/$part"
                 cp "$work/$part/summary.json" "$out/$part-summary.json"
                 python bench/recipe_report.py "$work/$part" --start "$start" --write "$out"; } 2>&1 \
                 | tee "$out/$part.log" ;;
    # What the recipes' augmentation, label smoothing and drop path cost per step, against the plain step. About 2
    # minutes.
    augment) for m in vit mixer; do python bench/augment_cost.py --model "$m" --precision bf16 --rounds 5 \
               --steps 50; done 2>&1 | tee "$out/augment.log" ;;
    # zoo's GPT step against a plain-JAX GPT of the same math and PyTorch's nanoGPT block (eager and compiled), bf16,
    # at nanoGPT's char config and GPT-2 124M. About 3 minutes.
    step) { python bench/gpt_step.py --torch && python bench/gpt_step.py --size gpt2 --torch --iters 20; } 2>&1 \
            | tee "$out/step.log" ;;
    # (d) 16 LRs as one vmapped program against 16 sequential runs of the same step. Target: >= 6x. About 1 minute.
    sweep) python bench/sweep.py --write "$out/bench_sweep_gpu.md" 2>&1 | tee "$out/sweep.log" ;;
    # (e) GPT-2 124M's step, zoo's loss variants, against nanoGPT's own bench.py (torch.compile). Target: >= 1.15x.
    # About 5 minutes.
    nanogpt) need_nanogpt
             OUT="$out/nanogpt" python bench/gpt2_vs_nanogpt.py --nanogpt "$nanogpt" 2>&1 | tee "$out/nanogpt.log" ;;
    # The seven ablations of docs/gpt_parity.md in two calls of about 5 minutes each.
    gpt-options1) gpt_options attn_dropout=false tie_embeddings=false bias=true norm_eps=1e-6 2>&1 \
                    | tee "$out/$part.log" ;;
    gpt-options2) gpt_options activation=gelu init_std=none scaled_residual_init=false 2>&1 | tee "$out/$part.log" ;;
    # (f) Issue 44, a sweep's compile: the 2-layer GPT's 9-member sweep into an empty compile cache (cold; target
    # <= 10 s) and again with another LR grid (warm, from the cache; target <= 2 s), each the line "compile X s";
    # where one shape's compile goes and what a rerun or another plugin compiles (bench/sweep_compile.py); and
    # bench/sweep.py's speedup with its cold compile included (target >= 2x); one member's step compiled against a
    # plain-JAX GPT of the same math (bench/gpt_step.py --size sweep: XLA's own floor for it). About 6 minutes.
    compile) cache=$(mktemp -d)
      gpt=(--model gpt --depth 2 --seq-len 128 --batch-size 32 --steps 100 --data shakespeare)
      { python -m zoo.sweep "${gpt[@]}" --widths 128 --lrs 2^-14:2^-6:1 --out "$work/compile/cold" \
          --compile-cache "$cache" &&
        python -m zoo.sweep "${gpt[@]}" --widths 128 --lrs 2^-13.5:2^-5.5:1 --out "$work/compile/warm" \
          --compile-cache "$cache" &&
        python bench/sweep_compile.py "${gpt[@]}" --width 128 --members 1,9 --rounds 2 --other-param mup \
          --write "$out/bench_sweep_compile_gpu.md" &&
        python bench/sweep.py --write "$out/bench_sweep_gpu.md" &&
        python bench/gpt_step.py --size sweep --iters 20 --rounds 1; } 2>&1 | tee "$out/compile.log" ;;
    # (g) Where that cold compile goes inside XLA (bench/compile_profile.py: the compiler's trace events by self time,
    # 1 and 9 members), then the 9-member compile under XLA options the fourth lease did not try, one process each
    # (an option this XLA does not know ends its process: the line says so and the next one runs). About 6 minutes.
    compile-profile)
      gpt=(--model gpt --depth 2 --width 128 --seq-len 128 --batch-size 32 --steps 100 --data shakespeare)
      { python bench/compile_profile.py "${gpt[@]}" --members 1,9 --write "$out/compile_profile.md"
        for flags in --xla_gpu_experimental_enable_fusion_autotuner=false --xla_llvm_disable_expensive_passes=true \
                     --xla_backend_optimization_level=0 "--xla_gpu_experimental_enable_fusion_autotuner=false \
--xla_llvm_disable_expensive_passes=true --xla_gpu_enable_triton_gemm=false --xla_gpu_autotune_level=0"; do
          echo "## XLA_FLAGS=$flags" | tee -a "$out/compile_flags.md"
          if ! XLA_FLAGS="$flags" python bench/sweep_compile.py "${gpt[@]}" --members 9 --rounds 1 \
               --write "$work/flags.md"; then echo "(failed)" >> "$out/compile_flags.md"; continue; fi
          sed -n '/^| run /,/^$/p' "$work/flags.md" >> "$out/compile_flags.md"
        done; } 2>&1 | tee "$out/compile-profile.log" ;;
    *) echo "unknown part $part (gpt gpt2 image-steps vit mixer augment step sweep compile compile-profile nanogpt" \
         "gpt-options1 gpt-options2)" >&2; exit 2 ;;
  esac
done
for f in "$out"/*summary.json "$out"/*.md "$out"/*/*.txt; do
  if [ -f "$f" ]; then echo "== $f"; cat "$f"; fi
done
