"""Data sets read one batch at a time on the host (token files, image folders, tfds), and the size rule that
decides between them and the in-memory path."""

from __future__ import annotations

import dataclasses
import os

from zoo.data.config import DataConfig
from zoo.data.dataset import Dataset
from zoo.data.tokenizer import Tokenizer
from zoo.data.view import DataView, Reader

# Decoded bytes of all splits above which a set streams instead of living on the device whole.
IN_MEMORY_LIMIT = 1 << 30


def streams(stream: bool | None, decoded_bytes: int, limit: int = IN_MEMORY_LIMIT) -> bool:
    """The size rule: `stream` when given (a flag forcing either way), else whether the set exceeds `limit`."""
    return decoded_bytes > limit if stream is None else stream


@dataclasses.dataclass
class Streamed(DataView):
    """A DataView over per-split Readers that fetch (decode) only the examples asked for."""

    kind: str
    readers: dict[str, Reader]
    num_classes: int
    in_shape: tuple[int, ...]
    eval_split: str
    seq_len: int | None = None
    tokenizer: Tokenizer | None = None
    streamed = True

    def reader(self, split: str) -> Reader:
        if split not in self.readers:
            raise ValueError(f"no split {split!r}; this data set has {', '.join(sorted(self.readers))}")
        return self.readers[split]

    @classmethod
    def from_dataset(cls, ds: Dataset) -> Streamed:
        """An in-memory set served through the streamed path (its host arrays read batch by batch)."""
        return cls(kind=ds.kind, readers={s: ds.reader(s) for s in ds.splits}, num_classes=ds.num_classes,
                   in_shape=ds.in_shape, eval_split=ds.eval_split, seq_len=ds.seq_len, tokenizer=ds.tokenizer)


def host_available() -> int | None:
    """Bytes this host can still give (MemAvailable: a machine shared with other jobs), or None where /proc does
    not say."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask: a container or taskset may give it fewer than
    the machine has)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_host(nbytes: int, what: str, advice: str) -> None:
    """Refuse to decode `what` (`nbytes` of pixels) in host memory when the host does not have them: the kernel
    would kill the process (and perhaps a neighbour's) without a line."""
    available = host_available()
    if available is not None and nbytes > available:
        raise ValueError(f"{what} takes {nbytes / 1e9:,.1f} GB decoded, more than the {available / 1e9:,.1f} GB of "
                         f"memory this host has available; {advice}")


def image_bytes(size: int, count: int = 1, channels: int = 3) -> int:
    """Bytes of `count` decoded uint8 images of size x size x channels (RGB at most: images decode as L or RGB)."""
    return count * size * size * channels


def maybe_streamed(ds: Dataset, stream: bool | None, limit: int = IN_MEMORY_LIMIT) -> DataView:
    """A set that is decoded in host memory anyway (a text file, an archive, a synthetic set): streamed only when
    forced or when it is too big for the device."""
    return Streamed.from_dataset(ds) if streams(stream, ds.nbytes(), limit) else ds


def not_images(cfg: DataConfig) -> None:
    """Refuse --image-size for a set that is not made of images."""
    if cfg.image_size is not None:
        raise ValueError(f"--image-size resizes images, but {cfg.name} is not an image set")
