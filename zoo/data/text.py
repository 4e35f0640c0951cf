"""Character- or byte-level token streams from a text file, split 90/10 into train and val as nanoGPT does."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo.data.config import DataConfig
from zoo.data.dataset import Dataset
from zoo.data.sources import SpecError
from zoo.data.streamed import maybe_streamed, not_images
from zoo.data.tokenizer import ByteTokenizer, CharTokenizer, Tokenizer
from zoo.data.view import DataView, check_classes
from zoo.files import read_regular, refuse_special

TRAIN_FRACTION = 0.9


def load(path: str, seq_len: int, byte_level: bool = False) -> Dataset:
    """Char level: vocab = sorted set of characters. Byte level: vocab = the 256 byte values."""
    src = Path(path).expanduser()
    if src.is_dir():
        raise IsADirectoryError(f"text:{src} is a directory; text:FILE reads one file (for a folder of files, "
                                "python -m zoo.data.prepare text DIR --out TOKENS, then --data tokens:TOKENS)")
    refuse_special(src, f"text:{src}")
    if not src.is_file():
        raise FileNotFoundError(f"text file not found: {src}")
    raw = read_regular(src, f"text:{src}")
    if byte_level:
        return from_tokens(np.frombuffer(raw, np.uint8).astype(np.int32), ByteTokenizer(), seq_len, str(src))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"text file {src} is not UTF-8 ({err}); --byte-level reads it as bytes") from err
    tokenizer = CharTokenizer.fit([text])
    return from_tokens(tokenizer.encode(text), tokenizer, seq_len, str(src))


def from_tokens(tokens: np.ndarray, tokenizer: Tokenizer, seq_len: int, name: str) -> Dataset:
    """A text Dataset from one token stream: the first 90% is train, the rest val."""
    cut = int(len(tokens) * TRAIN_FRACTION)
    return from_splits({"train": tokens[:cut], "val": tokens[cut:]}, tokenizer, seq_len, name)


def from_splits(splits: dict[str, np.ndarray], tokenizer: Tokenizer, seq_len: int, name: str,
                eval_split: str = "val") -> Dataset:
    """A text Dataset from int32 token streams per split."""
    check_classes(tokenizer.vocab_size, "text", name)
    check_lengths({s: len(t) for s, t in splits.items()}, seq_len, name)
    return Dataset(kind="text", splits={s: {"tokens": t} for s, t in splits.items()},
                   num_classes=tokenizer.vocab_size, in_shape=(seq_len,), eval_split=eval_split, seq_len=seq_len,
                   tokenizer=tokenizer)


def check_lengths(lengths: dict[str, int], seq_len: int, name: str) -> None:
    """Every split must hold at least one window of seq_len + 1 tokens."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    for split, n in lengths.items():
        if n <= seq_len:
            fix = f"--seq-len {n - 1} or less, or more text" if n >= 2 else "more text"
            raise ValueError(f"{name}: the {split} split has {n} token{'s' * (n != 1)}, fewer than seq_len + 1 = "
                             f"{seq_len + 1} (a language model's window); give {fix}")


def source(arg: str, cfg: DataConfig, limit: int) -> DataView:
    """`text:FILE`: characters (or bytes with --byte-level), split 90/10."""
    if not arg:
        raise SpecError("text:FILE needs a file")
    not_images(cfg)
    return maybe_streamed(load(arg, cfg.seq_len, cfg.byte_level), cfg.stream, limit)
