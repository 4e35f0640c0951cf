"""Character- or byte-level token streams from a text file, split 90/10 into train and val as nanoGPT does."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo.data.dataset import Dataset

TRAIN_FRACTION = 0.9


def load(path: str, seq_len: int, byte_level: bool = False) -> Dataset:
    """Char level: vocab = sorted set of characters. Byte level: vocab = the 256 byte values."""
    src = Path(path).expanduser()
    if not src.is_file():
        raise FileNotFoundError(f"text file not found: {src}")
    raw = src.read_bytes()
    if byte_level:
        tokens, vocab, num_classes = np.frombuffer(raw, np.uint8).astype(np.int32), None, 256
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"text file {src} is not UTF-8 ({err}); use byte-level tokens") from err
        codes = np.frombuffer(text.encode("utf-32-le"), "<u4")
        chars, inverse = np.unique(codes, return_inverse=True)
        tokens, vocab, num_classes = inverse.astype(np.int32), [chr(c) for c in chars], len(chars)
    return from_tokens(tokens, num_classes, seq_len, vocab, name=str(src))


def from_tokens(tokens: np.ndarray, num_classes: int, seq_len: int, vocab: list[str] | None,
                name: str) -> Dataset:
    """A text Dataset from one token stream: the first 90% is train, the rest val."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    cut = int(len(tokens) * TRAIN_FRACTION)
    splits = {"train": {"tokens": tokens[:cut]}, "val": {"tokens": tokens[cut:]}}
    for split, arrays in splits.items():
        if len(arrays["tokens"]) <= seq_len:
            raise ValueError(f"{name}: the {split} split has {len(arrays['tokens'])} tokens, "
                             f"fewer than seq_len + 1 = {seq_len + 1}")
    return Dataset(kind="text", splits=splits, num_classes=num_classes, in_shape=(seq_len,), eval_split="val",
                   seq_len=seq_len, vocab=vocab)
