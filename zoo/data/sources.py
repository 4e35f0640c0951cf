"""`load(spec)`: one entry point from a data spec string to a Dataset."""

from __future__ import annotations

from pathlib import Path

from zoo.data import imagefolder, synthetic, text
from zoo.data.dataset import Dataset

BUNDLED = Path(__file__).parents[2] / "data"
SHORT_NAMES = {"cifar10": ("imagefolder", "cifar10-jpeg.tar.gz"), "shakespeare": ("text", "tinyshakespeare.txt")}
FORMS = ("synthetic, synthetic:text, synthetic:teacher, imagefolder:<dir or .tar.gz>, text:<file>, "
         f"tfds:<name>[:<eval split>], or a short name ({', '.join(SHORT_NAMES)})")


def load(spec: str, *, seq_len: int = 256, byte_level: bool = False, data_dir: str | None = None,
         cache_dir: str | None = None) -> Dataset:
    """The Dataset named by `spec`.

    `data_dir` is the tfds data dir for tfds specs and the folder holding the bundled files for short names
    (default: the repository's data/). `cache_dir` holds decoded images (default $ZOO_CACHE or ~/.cache/zoo).
    """
    kind, _, arg = spec.partition(":")
    if kind in SHORT_NAMES and not arg:
        kind, filename = SHORT_NAMES[kind]
        arg = str(Path(data_dir or BUNDLED) / filename)
    if kind == "synthetic" and arg in ("", "image"):
        return synthetic.images()
    if kind == "synthetic" and arg == "text":
        return synthetic.tokens(seq_len)
    if kind == "synthetic" and arg == "teacher":
        return synthetic.teacher()
    if kind == "imagefolder" and arg:
        return imagefolder.load(arg, cache_dir)
    if kind == "text" and arg:
        return text.load(arg, seq_len, byte_level)
    if kind == "tfds" and arg:
        from zoo.data import tfds_source  # tensorflow-datasets takes over a second to import: only when asked

        name, _, split = arg.partition(":")
        return tfds_source.load(name, split or None, data_dir)
    raise ValueError(f"unknown data spec {spec!r}; use {FORMS}")
