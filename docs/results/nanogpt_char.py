"""nanoGPT's own model and training loop on the bundled tiny shakespeare, for a side-by-side with zoo's GPT recipe.

Imports `model.py` from a nanoGPT checkout (github.com/karpathy/nanoGPT; not bundled) and runs the loop of its
train.py with config/train_shakespeare_char.py's optimizer settings, condensed for one CPU process: characters split
90/10, random windows, AdamW (weight decay 0.1 on matrices and embeddings, betas 0.9/0.99) through its
`configure_optimizers`, linear warmup then cosine from 1e-3 to 1e-4, gradient clip 1.0, and its `estimate_loss`
(the mean over --eval-iters random batches of each split). The zoo run of the same shape:

    python docs/results/nanogpt_char.py --nanogpt ../nanoGPT --width 128 --depth 4 --heads 4 --block 64 --batch 32 \\
        --dropout 0.1 --steps 1500
    python train.py --model gpt --param sp --width 128 --depth 4 --model-opt head_dim=32 --seq-len 64 \\
        --batch-size 32 --steps 1500 --eval-every 250 --model-opt dropout=0.1
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the checkout: docs/results/ -> docs/ -> root


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nanogpt", required=True, help="a nanoGPT checkout (its model.py is imported)")
    p.add_argument("--data", default=str(ROOT / "data" / "tinyshakespeare.txt"))
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--bias", action="store_true", help="biases in Linear and LayerNorm (nanoGPT's default: none)")
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-iters", type=int, default=200)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, help="torch's CPU threads (default: torch's own choice)")
    args = p.parse_args(argv)
    if not (Path(args.nanogpt) / "model.py").is_file():
        raise SystemExit(f"error: {args.nanogpt} has no model.py (give a nanoGPT checkout with --nanogpt)")
    sys.path.insert(0, str(Path(args.nanogpt).resolve()))
    import torch  # after the flags: --help needs no torch
    from model import GPT, GPTConfig  # nanoGPT's

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    text = Path(args.data).read_text()
    chars = sorted(set(text))
    ids = np.searchsorted(chars, list(text)).astype(np.int64)  # each character's index in the sorted vocabulary
    cut = int(len(ids) * 0.9)
    splits = {"train": ids[:cut], "val": ids[cut:]}

    def batch(split: str) -> tuple[torch.Tensor, torch.Tensor]:
        data = splits[split]
        starts = torch.randint(len(data) - args.block, (args.batch,))
        x = torch.stack([torch.from_numpy(data[i:i + args.block]) for i in starts])
        y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + args.block]) for i in starts])
        return x, y

    model = GPT(GPTConfig(block_size=args.block, vocab_size=len(chars), n_layer=args.depth, n_head=args.heads,
                          n_embd=args.width, dropout=args.dropout, bias=args.bias))
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")

    def lr_at(step: int) -> float:
        """nanoGPT's get_lr: linear warmup, then cosine from 1e-3 to 1e-4 over the run."""
        if step < args.warmup:
            return 1e-3 * (step + 1) / (args.warmup + 1)
        ratio = (step - args.warmup) / max(1, args.steps - args.warmup)
        return 1e-4 + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (1e-3 - 1e-4)

    @torch.no_grad()
    def estimate_loss() -> dict[str, float]:
        model.eval()
        out = {s: float(np.mean([model(*batch(s))[1].item() for _ in range(args.eval_iters)])) for s in splits}
        model.train()
        return out

    best, t0 = math.inf, time.perf_counter()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            losses = estimate_loss()
            best = min(best, losses["val"])
            print(f"step {step}: train {losses['train']:.4f}, val {losses['val']:.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        if step == args.steps:
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        _, loss = model(*batch("train"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    print(f"best val loss {best:.4f}")


if __name__ == "__main__":
    main()
