"""nanoGPT's own model and training loop on the bundled tiny shakespeare, for a side-by-side with zoo's GPT recipe.

Imports `model.py` from a nanoGPT checkout (github.com/karpathy/nanoGPT; not bundled) and runs the loop of its
train.py with config/train_shakespeare_char.py's settings: characters split 90/10, random windows, AdamW (weight
decay 0.1 on matrices and embeddings, betas 0.9/0.99) through its `configure_optimizers`, its `get_lr` (linear warmup
lr (t + 1) / (warmup + 1), then cosine from 1e-3 to 1e-4 at --steps), gradient clip 1.0, an eval at step 0 and every
--eval-every steps with its `estimate_loss` (the mean over --eval-iters random batches of each split), and --steps
as its max_iters: iterations 0 through max_iters are trained, max_iters + 1 updates, as its loop does; an eval
follows the last (nanoGPT's loop ends on it unevaluated), as zoo's run of the same max_iters + 1 steps ends. On a
GPU as train.py runs it there: bf16 autocast, TF32, fused AdamW, and (--compile) torch.compile. Prints each eval
with the wall time since the start (model creation, compile and evals included), and a last JSON line: the best val
loss, its step and the wall time to it.

    python bench/nanogpt_char.py --nanogpt ../nanoGPT --compile           # the char config, on a GPU
    python bench/nanogpt_char.py --nanogpt ../nanoGPT --width 128 --depth 4 --heads 4 --block 64 --batch 32 \\
        --steps 1500 --eval-every 250 --seed 1                            # docs/gpt_parity.md's CPU size
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def get_lr(step: int, lr: float = 1e-3, warmup: int = 100, decay_iters: int = 5000, min_lr: float = 1e-4) -> float:
    """nanoGPT's get_lr (train.py): linear warmup lr (t + 1) / (warmup + 1), then cosine to min_lr at decay_iters."""
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > decay_iters:
        return min_lr
    ratio = (step - warmup) / (decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def char_splits(path: str | Path) -> tuple[dict[str, np.ndarray], int]:
    """nanoGPT's data/shakespeare_char/prepare.py: ids are ranks among the sorted characters, the first 90% train."""
    text = Path(path).read_text()
    chars = sorted(set(text))
    ids = np.searchsorted(chars, list(text)).astype(np.int64)
    cut = int(len(ids) * 0.9)
    return {"train": ids[:cut], "val": ids[cut:]}, len(chars)


def windows(data: np.ndarray, starts: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """x = data[i:i+T], y = data[i+1:i+T+1] for each start i (nanoGPT's get_batch)."""
    pos = np.asarray(starts)[:, None] + np.arange(block + 1)
    w = data[pos]
    return np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:])


def shape_args(p: argparse.ArgumentParser, width: int = 384, depth: int = 6, heads: int = 6, block: int = 256,
               batch: int = 64) -> None:
    """--nanogpt and the model's and batch's shape, by default the char config's."""
    p.add_argument("--nanogpt", required=True, help="a nanoGPT checkout (its model.py is imported)")
    for name, default in (("width", width), ("depth", depth), ("heads", heads), ("block", block), ("batch", batch)):
        p.add_argument(f"--{name}", type=int, default=default)


def checkout(path: str) -> Path:
    """The nanoGPT checkout at `path`, resolved; a one-line exit where it has no model.py."""
    if not (Path(path) / "model.py").is_file():
        raise SystemExit(f"error: {path} has no model.py (give a nanoGPT checkout with --nanogpt)")
    return Path(path).resolve()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shape_args(p)
    p.add_argument("--data", default=str(ROOT / "data" / "tinyshakespeare.txt"))
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--bias", action="store_true", help="biases in Linear and LayerNorm (train.py's default: none)")
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-iters", type=int, default=200)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--device", help="default: cuda where there is one, else cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (train.py's default on a GPU)")
    p.add_argument("--threads", type=int, help="torch's CPU threads (default: torch's own choice)")
    p.add_argument("--json", help="also write the evals and the summary here")
    args = p.parse_args(argv)
    sys.path.insert(0, str(checkout(args.nanogpt)))
    import torch  # after the flags: --help needs no torch
    from model import GPT, GPTConfig  # nanoGPT's

    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = args.device.startswith("cuda")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    autocast = torch.autocast("cuda", torch.bfloat16) if cuda else contextlib.nullcontext()
    splits, vocab = char_splits(args.data)

    def batch(split: str) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(len(splits[split]) - args.block, (args.batch,)).numpy()
        x, y = (torch.from_numpy(a) for a in windows(splits[split], starts, args.block))
        if cuda:
            return x.pin_memory().to(args.device, non_blocking=True), y.pin_memory().to(args.device, non_blocking=True)
        return x, y

    with contextlib.redirect_stdout(sys.stderr):  # its parameter counts and optimizer groups
        raw = GPT(GPTConfig(block_size=args.block, vocab_size=vocab, n_layer=args.depth, n_head=args.heads,
                            n_embd=args.width, dropout=args.dropout, bias=args.bias)).to(args.device)
        opt = raw.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cuda" if cuda else "cpu")
    model = torch.compile(raw) if args.compile else raw

    @torch.no_grad()
    def estimate_loss() -> dict[str, float]:
        model.eval()
        out = {}
        for s in splits:
            losses = torch.zeros(args.eval_iters)
            for k in range(args.eval_iters):
                with autocast:
                    losses[k] = model(*batch(s))[1].item()
            out[s] = float(losses.mean())
        model.train()
        return out

    evals, best = [], {"val": math.inf}
    x, y = batch("train")
    last = args.steps + 1  # the updates: iterations 0..max_iters
    for step in range(last + 1):
        if step % args.eval_every == 0 or step == last:
            losses = estimate_loss()
            row = {"step": step, **losses, "wall_s": time.perf_counter() - t0}
            evals.append(row)
            if losses["val"] < best["val"]:
                best = row
            print(f"step {step}: train {losses['train']:.4f}, val {losses['val']:.4f} ({row['wall_s']:.0f} s)",
                  flush=True)
        if step == last:
            break
        for group in opt.param_groups:
            group["lr"] = get_lr(step, 1e-3, args.warmup, args.steps, 1e-4)
        with autocast:
            _, loss = model(x, y)
        x, y = batch("train")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    summary = {"best_val": best["val"], "best_step": best["step"], "time_to_best_s": best["wall_s"],
               "wall_s": time.perf_counter() - t0, "device": torch.cuda.get_device_name() if cuda else "cpu",
               "seed": args.seed}
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "evals": evals, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
