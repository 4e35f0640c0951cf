"""`load(spec)`: one entry point from a data spec string to a data set, in memory or streamed by size."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from zoo.data import imagefolder, resize, synthetic, text, tokens
from zoo.data.dataset import Dataset
from zoo.data.streamed import IN_MEMORY_LIMIT, maybe_streamed
from zoo.data.view import DataView

BUNDLED = Path(__file__).parents[2] / "data"
SHORT_NAMES = {"cifar10": ("imagefolder", "cifar10-jpeg.tar.gz"), "shakespeare": ("text", "tinyshakespeare.txt")}
FORMS = ("synthetic, synthetic:text, synthetic:teacher, imagefolder:<dir or .tar.gz>, text:<file>, tokens:<dir>, "
         f"tfds:<name>[:<eval split>], or a short name ({', '.join(SHORT_NAMES)})")


def load(spec: str, *, seq_len: int = 256, byte_level: bool = False, data_dir: str | None = None,
         cache_dir: str | None = None, stream: bool | None = None, limit: int = IN_MEMORY_LIMIT,
         image_size: int | None = None) -> DataView:
    """The data set named by `spec`: an in-memory `Dataset` (put on the device whole) when its decoded size is
    at most `limit` bytes, else a `Streamed` one read batch by batch (`zoo.data.stream`); `stream` True or
    False forces either way.

    `data_dir` is the tfds data dir for tfds specs and the folder holding the bundled files for short names
    (default: the repository's data/). `cache_dir` holds decoded images (default $ZOO_CACHE or ~/.cache/zoo).
    `image_size` N: every image resized (shorter side N) and center-cropped to N x N as it is read
    (`zoo.data.resize`); None keeps the set's own size, which must then be one size.
    """
    kind, _, arg = spec.partition(":")
    if kind in SHORT_NAMES and not arg:
        kind, filename = SHORT_NAMES[kind]
        arg = str(Path(data_dir or BUNDLED) / filename)
    if image_size is not None and image_size < 1:
        raise ValueError(f"the image size must be positive, got {image_size}")
    if image_size is not None and (kind in ("text", "tokens") or kind == "synthetic" and arg in ("text", "teacher")):
        raise ValueError(f"--image-size resizes images, but {spec} is not an image set")
    if kind == "synthetic" and arg in ("", "image"):
        return maybe_streamed(_resized(synthetic.images(), image_size), stream, limit)
    if kind == "synthetic" and arg == "text":
        return maybe_streamed(synthetic.tokens(seq_len), stream, limit)
    if kind == "synthetic" and arg == "teacher":
        return maybe_streamed(synthetic.teacher(), stream, limit)
    if kind == "imagefolder" and arg:
        return imagefolder.load(arg, cache_dir, stream, limit, image_size)
    if kind == "text" and arg:
        return maybe_streamed(text.load(arg, seq_len, byte_level), stream, limit)
    if kind == "tokens" and arg:
        return tokens.load(arg, seq_len, stream, limit)
    if kind == "tfds" and arg:
        from zoo.data import tfds_source  # tensorflow-datasets takes over a second to import: only when asked

        name, _, split = arg.partition(":")
        return tfds_source.load(name, split or None, data_dir, seq_len=seq_len, byte_level=byte_level,
                                stream=stream, limit=limit, image_size=image_size)
    raise ValueError(f"unknown data spec {spec!r}; use {FORMS}")


def _resized(ds: Dataset, image_size: int | None) -> Dataset:
    """An in-memory image set with every image resized and center-cropped to `image_size` (None: as it is)."""
    if image_size is None:
        return ds
    splits = {s: {**arrays, "x": resize.images(arrays["x"], image_size)} for s, arrays in ds.splits.items()}
    return dataclasses.replace(ds, splits=splits, in_shape=(image_size, image_size, ds.in_shape[-1]))
