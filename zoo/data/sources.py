"""The data sources: a spec `KIND[:ARG]` names one, `load(spec)` reads it, in memory or streamed by size.

A source is a function `(arg, cfg, limit) -> DataView` (`arg`: the spec after the first colon; `cfg`: the run's
DataConfig; `limit`: the decoded size above which it streams). A new source is one file and one
`SOURCES.register` line below (or an entry point `zoo.data` of an installed package).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from zoo.data.config import DataConfig
from zoo.data.streamed import IN_MEMORY_LIMIT
from zoo.data.view import DataView
from zoo.registry import Registry

BUNDLED = Path(__file__).parents[2] / "data"
BYTE_LEVEL = ("text", "tfds")  # the sources that tokenize raw text, by characters or by bytes
SHORT_NAMES = {"cifar10": ("imagefolder", "cifar10-jpeg.tar.gz"), "shakespeare": ("text", "tinyshakespeare.txt")}


class SpecError(ValueError):
    """A source's argument that names nothing it can read (a missing or unknown ARG)."""


def _source(name: str, fn: Any) -> Any:
    if not callable(fn):
        raise ValueError(f"data source {name!r} is not a function (arg, cfg, limit) -> DataView")
    return fn


SOURCES = Registry("data source", "zoo.data", _source)
SOURCES.register("synthetic", "zoo.data.synthetic:source")
SOURCES.register("imagefolder", "zoo.data.imagefolder:source")
SOURCES.register("text", "zoo.data.text:source")
SOURCES.register("tokens", "zoo.data.tokens:source")
SOURCES.register("tfds", "zoo.data.tfds_source:source")  # imported on first use: tensorflow-datasets is slow to load


def load(spec: str | DataConfig, *, limit: int = IN_MEMORY_LIMIT, **options: Any) -> DataView:
    """The data set a spec names (or a DataConfig describes; `options` are DataConfig fields): an in-memory
    `Dataset` (put on the device whole) when its decoded size is at most `limit` bytes, else a `Streamed` one read
    batch by batch (`zoo.data.stream`); `stream` True or False forces either way."""
    cfg = spec if isinstance(spec, DataConfig) else DataConfig(name=spec, **options)
    if options and isinstance(spec, DataConfig):
        cfg = dataclasses.replace(cfg, **options)
    kind, _, arg = cfg.name.partition(":")
    if kind in SHORT_NAMES and not arg:
        kind, filename = SHORT_NAMES[kind]
        arg = str(Path(cfg.data_dir or BUNDLED) / filename)
    if kind == "imagefolder":  # images whatever the folder holds: refused before the whole set is decoded (19 s)
        check_text_flags(cfg, kind, "image")
    try:
        data = SOURCES.get(kind)(arg, cfg, limit)
    except SpecError as e:
        raise ValueError(f"unknown data spec {cfg.name!r} ({e}); use {forms()}") from None
    except ValueError:
        if kind in SOURCES.names():
            raise
        raise ValueError(f"unknown data spec {cfg.name!r}; use {forms()}") from None
    check_text_flags(cfg, kind, data.kind)
    return data


def check_text_flags(cfg: DataConfig, kind: str, data_kind: str) -> None:
    """--byte-level and --seq-len given for a set they do not apply to (images; tokens of its own) are refused."""
    if cfg.byte_level and not (kind in BYTE_LEVEL and data_kind == "text"):
        raise ValueError(f"--byte-level tokenizes raw text (text:FILE, shakespeare, a tfds text set), but {cfg.name} "
                         f"{'has its own tokens' if data_kind == 'text' else 'is not text'}; leave it out")
    if data_kind != "text" and cfg.seq_len != DataConfig.seq_len:
        raise ValueError(f"--seq-len is the context length of text data, but {cfg.name} is a set of "
                         f"{data_kind}s; leave it out")


def forms() -> str:
    """The spec forms of the registered sources (each source's docstring opens with them) and the short names."""
    found = [(SOURCES.get(k).__doc__ or k).split("`")[1] for k in SOURCES.names()]
    return ", ".join(found) + f", or a short name ({', '.join(SHORT_NAMES)})"
