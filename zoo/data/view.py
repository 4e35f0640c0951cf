"""The random-access view every data set offers: sizes, the batch of each step, and a host read of a batch.

Both the in-memory `Dataset` and the `Streamed` sets are DataViews, so the loop sees one interface; the batch
indices are a function of (seed, step) only, shared by both paths, so a resumed run sees the same data and the
two paths give the same batches.
"""

from __future__ import annotations

import abc
import functools
from typing import Any, Protocol

import numpy as np

from zoo.data.tokenizer import Tokenizer

Batch = dict[str, np.ndarray]


class Reader(Protocol):
    """One split, random access: `size` examples (text: window starts), `read(idx)` -> {"x", "y"} on the host."""

    size: int

    def read(self, idx: np.ndarray) -> Batch: ...


@functools.lru_cache(maxsize=2)
def _permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    perm = np.random.default_rng([seed, epoch]).permutation(n).astype(np.int32)
    perm.flags.writeable = False
    return perm


def batch_indices(kind: str, n: int, step: int, batch_size: int, seed: int) -> np.ndarray:
    """The batch of `step` among `n` examples, int32 (B,), a function of (seed, step) only.

    Images walk a fresh permutation each epoch (seeded by seed and epoch, remainder dropped); text draws
    uniformly random window starts."""
    if kind == "text":
        return np.random.default_rng([seed, step]).integers(0, n, batch_size).astype(np.int32)
    per_epoch = n // batch_size
    epoch, pos = divmod(step, per_epoch)
    return _permutation(n, seed, epoch)[pos * batch_size:(pos + 1) * batch_size]


def token_windows(tokens: Any, starts: np.ndarray, seq_len: int) -> Batch:
    """x = tokens[i:i+T], y = tokens[i+1:i+T+1] for each start i, int32 (B, T); `tokens` is any array that
    takes a fancy index (a numpy array, or a token file read through its memory map)."""
    pos = np.asarray(starts, np.int64)[:, None] + np.arange(seq_len + 1)
    w = np.asarray(tokens[pos]).astype(np.int32)
    return {"x": w[:, :-1], "y": w[:, 1:]}


class TokenWindows:
    """A text split as a Reader: windows of `seq_len` (+1 for the targets) over a token sequence."""

    def __init__(self, tokens: Any, seq_len: int):
        self.tokens, self.seq_len = tokens, seq_len
        self.size = len(tokens) - seq_len

    def read(self, idx: np.ndarray) -> Batch:
        return token_windows(self.tokens, idx, self.seq_len)


class ImageArrays:
    """An image split held in host memory as a Reader: a gather of x (uint8 N,H,W,C) and y (int32 N)."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self.x, self.y = x, y
        self.size = len(y)

    def read(self, idx: np.ndarray) -> Batch:
        return {"x": self.x[idx], "y": self.y[idx]}


def check_classes(count: int, kind: str, what: str) -> None:
    """A set to classify (images into classes, text into next tokens) needs two classes at least: with one, the
    loss goes to 0 and the accuracy to 1 without anything learned."""
    if count < 2:
        unit = ("token" if count == 1 else "tokens") + " in its vocabulary" if kind == "text" else \
            "class" if count == 1 else "classes"
        raise ValueError(f"{what} has {count} {unit}; training needs at least 2 "
                         "(with one, the loss is 0 and the accuracy 1 whatever the model does)")


class DataView(abc.ABC):
    """What every data set offers. Subclasses set the metadata fields and implement `reader(split)`.

    kind: "image" or "text"; num_classes: classes, or the vocabulary size for text; in_shape: one example's
    input shape; eval_split: the split evaluation reads; seq_len: the text window (None for images);
    tokenizer: text's encode/decode (None for images)."""

    kind: str
    num_classes: int
    in_shape: tuple[int, ...]
    eval_split: str
    seq_len: int | None
    tokenizer: Tokenizer | None
    streamed: bool = False  # True: the loop reads batches on the host (zoo.data.stream), not from device arrays

    def __post_init__(self) -> None:
        check_classes(self.num_classes, self.kind, "the data set")

    @abc.abstractmethod
    def reader(self, split: str) -> Reader:
        """The split as a random-access Reader (unknown splits: one clear error)."""

    def size(self, split: str) -> int:
        """Examples (images) or window starts (text: tokens - seq_len)."""
        return self.reader(split).size

    def digest(self, split: str) -> str | None:
        """A fingerprint of the split's examples (a resume checks its data is the run's); None where reading them
        whole is not cheap (a streamed set)."""
        del split
        return None

    def check_batch(self, split: str, batch_size: int) -> None:
        """A batch of `batch_size` draws distinct examples of `split`: between 1 and its size."""
        n = self.size(split)
        if not 1 <= batch_size <= n:
            raise ValueError(f"batch size {batch_size} must be between 1 and the {n} examples of split {split!r}")

    def indices(self, split: str, step: int, batch_size: int, seed: int) -> np.ndarray:
        """The batch of `step`, int32 (B,): a function of (seed, step) only (`batch_indices`)."""
        self.check_batch(split, batch_size)
        return batch_indices(self.kind, self.size(split), step, batch_size, seed)

    def eval_indices(self, batch_size: int, max_eval_windows: int = 1024) -> list[np.ndarray]:
        """Batches over the eval split, each example once (the last batch may be smaller).

        Text uses non-overlapping windows (no eval token predicted twice; the split's last tokens after the last
        whole window, fewer than seq_len, not at all), thinned evenly to at most `max_eval_windows`.
        """
        n = self.size(self.eval_split)
        if self.kind == "text":
            starts = np.arange(0, n, self.seq_len)
            if len(starts) > max_eval_windows:
                starts = starts[np.linspace(0, len(starts) - 1, max_eval_windows).astype(np.int64)]
        else:
            starts = np.arange(n)
        starts = starts.astype(np.int32)
        return [starts[i:i + batch_size] for i in range(0, len(starts), batch_size)]

    def read(self, split: str, idx: np.ndarray) -> Batch:
        """The host batch {"x", "y"} at `idx`: images uint8 (B,H,W,C) and int32 labels; text int32 windows."""
        return self.reader(split).read(np.asarray(idx))

    def encode(self, text: str) -> np.ndarray:
        """Text -> int32 token ids with this set's tokenizer."""
        if self.tokenizer is None:
            raise ValueError("encode needs a text data set")
        return self.tokenizer.encode(text)

    def decode(self, ids: np.ndarray | list[int]) -> str:
        """Token ids -> text with this set's tokenizer."""
        if self.tokenizer is None:
            raise ValueError("decode needs a text data set")
        return self.tokenizer.decode(ids)
