"""Loader throughput: the streamed path (zoo.data.stream through grain, with 0, 1 and 2 worker processes) against
the in-memory path's host gather (Dataset.read), for token windows and for decoded images.

    python bench/data.py                        # 64 x 256-token batches from a 100M-token file; 128-image batches
    python bench/data.py --steps 50 --workers 0,1

Prints batches/s, tokens/s or images/s, and the ratio streamed / in-memory. Worker start-up (spawning processes
that import JAX and grain) is timed apart from the steady rate.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from itertools import islice
from pathlib import Path

import numpy as np
from PIL import Image

import zoo.data
from zoo.data import synthetic, tokens
from zoo.data.tokenizer import ByteTokenizer


def token_dir(root: Path, count: int) -> Path:
    """A byte-level token directory of `count` random train tokens (and count / 10 val tokens)."""
    rng = np.random.default_rng(0)
    for split, n in (("train", count), ("val", count // 10)):
        with (root / f"{split}.bin").open("wb") as f:
            for start in range(0, n, 1 << 24):
                f.write(rng.integers(0, 256, min(1 << 24, n - start), np.uint16).tobytes())
    tokens.write_meta(root, ByteTokenizer(), {"train": count, "val": count // 10}, "bench")
    return root


def image_folder(root: Path, count: int) -> Path:
    """`count` 32x32 JPEGs (quality 75, as the bundled CIFAR-10) in train/ and count / 4 in test/, 10 classes."""
    data = synthetic.images(num_train=count, num_test=count // 4)
    for split in ("train", "test"):
        x, y = data.splits[split]["x"], data.splits[split]["y"]
        for i in range(len(y)):
            folder = root / split / str(y[i])
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(x[i]).save(folder / f"{i:06d}.jpg", quality=75)
    return root


def rate(batches, steps: int) -> tuple[float, float]:
    """(seconds to the first batch, batches per second after it)."""
    start = time.perf_counter()
    next(batches)
    first = time.perf_counter()
    for _ in islice(batches, steps):
        pass
    return first - start, steps / (time.perf_counter() - first)


def compare(name: str, unit: str, per_batch: int, in_memory: zoo.data.Dataset, streamed: zoo.data.DataView,
            batch: int, steps: int, workers: list[int]) -> None:
    host = (in_memory.read("train", in_memory.indices("train", s, batch, 0)) for s in range(1 << 62))
    _, base = rate(host, steps)
    print(f"\n{name}: batches of {batch}")
    print(f"  {'path':<26}{'start s':>9}{'batches/s':>11}{unit + '/s':>14}{'vs in-memory':>14}")
    print(f"  {'in-memory (host gather)':<26}{'':>9}{base:>11.1f}{base * per_batch:>14,.0f}{1.0:>14.3g}")
    for w in workers:
        it = zoo.data.stream(streamed, "train", batch_size=batch, seed=0, workers=w)
        start, r = rate(it, steps)
        it.close()
        print(f"  {f'streamed, {w} workers':<26}{start:>9.1f}{r:>11.1f}{r * per_batch:>14,.0f}{r / base:>14.3g}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="batches timed per path")
    p.add_argument("--workers", default="0,1,2", help="worker counts of the streamed path")
    p.add_argument("--tokens", type=int, default=100_000_000, help="train tokens in the token file")
    p.add_argument("--images", type=int, default=4096, help="train images in the folder")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--token-batch", type=int, default=64)
    p.add_argument("--image-batch", type=int, default=128)
    args = p.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = token_dir(Path(tmp), args.tokens)
        spec = f"tokens:{root}"
        compare(f"tokens ({args.tokens:,} in a memory-mapped file)", "tokens", args.token_batch * args.seq_len,
                zoo.data.load(spec, seq_len=args.seq_len, stream=False),
                zoo.data.load(spec, seq_len=args.seq_len, stream=True), args.token_batch, args.steps, workers)
    with tempfile.TemporaryDirectory() as tmp:
        root = image_folder(Path(tmp), args.images)
        spec = f"imagefolder:{root}"
        compare(f"images ({args.images:,} 32x32 JPEGs, decoded per batch when streamed)", "images",
                args.image_batch, zoo.data.load(spec, cache_dir=tmp, stream=False),
                zoo.data.load(spec, stream=True), args.image_batch, args.steps, workers)


if __name__ == "__main__":
    main()
