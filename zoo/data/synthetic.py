"""Learnable synthetic tasks from a fixed random teacher, for benchmarks and fast tests (no files needed)."""

from __future__ import annotations

import dataclasses

import numpy as np

from zoo.data import resize, text
from zoo.data.config import DataConfig
from zoo.data.dataset import Dataset
from zoo.data.sources import SpecError
from zoo.data.streamed import check_host, image_bytes, maybe_streamed, not_images
from zoo.data.tokenizer import CharTokenizer
from zoo.data.view import DataView


def images(num_train: int = 4096, num_test: int = 1024, num_classes: int = 10, size: int = 32) -> Dataset:
    """Smooth random 32x32x3 uint8 images; label = argmax of a fixed random linear teacher on the pixels."""
    rng = np.random.default_rng(0)
    n = num_train + num_test
    coarse = rng.standard_normal((n, size // 4, size // 4, 3), np.float32)
    smooth = coarse.repeat(4, axis=1).repeat(4, axis=2) + 0.2 * rng.standard_normal((n, size, size, 3), np.float32)
    x = np.clip(128 + 48 * smooth, 0, 255).astype(np.uint8)
    teacher = rng.standard_normal((size * size * 3, num_classes), np.float32)
    y = ((x.reshape(n, -1) / np.float32(127.5) - 1) @ teacher).argmax(-1).astype(np.int32)
    splits = {"train": {"x": x[:num_train], "y": y[:num_train]}, "test": {"x": x[num_train:], "y": y[num_train:]}}
    return Dataset(kind="image", splits=splits, num_classes=num_classes, in_shape=(size, size, 3),
                   eval_split="test")


def teacher(dim: int = 16, hidden: int = 64, num_classes: int = 10, num_train: int = 16384, num_test: int = 2048
            ) -> Dataset:
    """Gaussian inputs N(0, I_dim); label = argmax of a fixed random tanh network (dim -> hidden -> classes).

    A learnable low-dimensional task: with few input dimensions the input layer's fan-in does not set the best LR,
    so width effects (SP's shifting optimum) show at small widths."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((num_train + num_test, dim)).astype(np.float32)
    w1 = rng.standard_normal((dim, hidden)) / np.sqrt(dim)
    w2 = rng.standard_normal((hidden, num_classes)) / np.sqrt(hidden)
    y = (np.tanh(2 * x @ w1) @ w2).argmax(-1).astype(np.int32)
    splits = {"train": {"x": x[:num_train], "y": y[:num_train]}, "test": {"x": x[num_train:], "y": y[num_train:]}}
    return Dataset(kind="image", splits=splits, num_classes=num_classes, in_shape=(dim,), eval_split="test")


def tokens(seq_len: int, length: int = 220_000, vocab_size: int = 64, branching: int = 4) -> Dataset:
    """A Markov chain where each token has `branching` equally likely successors (loss floor log(branching))."""
    rng = np.random.default_rng(0)
    successors = rng.integers(0, vocab_size, (vocab_size, branching)).tolist()
    choices = rng.integers(0, branching, length).tolist()
    stream, tok = [], 0
    for c in choices:
        tok = successors[tok][c]
        stream.append(tok)
    vocab = CharTokenizer(chr(48 + i) for i in range(vocab_size))  # ids 0..63 print as '0'..'o'
    return text.from_tokens(np.array(stream, np.int32), vocab, seq_len, name="synthetic:text")


def source(arg: str, cfg: DataConfig, limit: int) -> DataView:
    """`synthetic` (or `synthetic:image`): images; `synthetic:text`: tokens; `synthetic:teacher`: a tanh teacher."""
    if arg in ("", "image"):
        ds = images()
        if cfg.image_size is not None:
            n = sum(len(a["x"]) for a in ds.splits.values())
            check_host(image_bytes(cfg.image_size, n), f"the synthetic set at --image-size {cfg.image_size}",
                       "use a smaller --image-size")
            splits = {s: {**a, "x": resize.images(a["x"], cfg.image_size)} for s, a in ds.splits.items()}
            ds = dataclasses.replace(ds, splits=splits, in_shape=(cfg.image_size, cfg.image_size, ds.in_shape[-1]))
        return maybe_streamed(ds, cfg.stream, limit)
    if arg not in ("text", "teacher"):
        raise SpecError(f"no synthetic set {arg!r}: synthetic, synthetic:text or synthetic:teacher")
    not_images(cfg)
    return maybe_streamed(tokens(cfg.seq_len) if arg == "text" else teacher(), cfg.stream, limit)
