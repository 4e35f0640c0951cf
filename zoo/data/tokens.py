"""Token directories (`--data tokens:DIR`, nanoGPT's format): train.bin and val.bin hold flat little-endian
token ids, uint16 (uint32 when the vocabulary exceeds 65536), and meta.json names the vocabulary size, the
dtype and the tokenizer. `python -m zoo.data.prepare` writes them.

A set that fits goes on the device whole; a bigger one is read window by window through a memory map, so memory
does not grow with the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from zoo.data import text
from zoo.data.config import DataConfig
from zoo.data.sources import SpecError
from zoo.data.streamed import IN_MEMORY_LIMIT, Streamed, not_images, streams
from zoo.data.tokenizer import Tokenizer, from_meta
from zoo.data.view import DataView, TokenWindows
from zoo.files import read_regular, refuse_special, write_atomic

META = "meta.json"
SPLITS = ("train", "val")
DTYPES = {"uint16": "<u2", "uint32": "<u4"}


def dtype_for(vocab_size: int) -> str:
    """uint16 when every id fits in it, else uint32."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


class TokenFile:
    """A .bin file as an array that takes a fancy index. Each read maps the file, copies the tokens asked for
    and unmaps it (nanoGPT re-creates its np.memmap per batch for the same reason): only the pages of the
    windows read are ever resident, and a long run over a big file does not accumulate them."""

    def __init__(self, path: Path, dtype: str, vocab_size: int):
        self.path, self.dtype, self.vocab_size = path, np.dtype(DTYPES[dtype]), vocab_size
        nbytes = path.stat().st_size
        if nbytes % self.dtype.itemsize:
            raise ValueError(f"{path} has {nbytes} bytes, not a whole number of {dtype} tokens")
        self.length = nbytes // self.dtype.itemsize

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, pos: np.ndarray | slice) -> np.ndarray:
        mapped = np.memmap(self.path, self.dtype, mode="r", shape=(self.length,))
        out = mapped[pos].copy() if isinstance(pos, slice) else mapped[pos]  # a fancy index copies already
        del mapped  # unmaps the file
        if out.size and int(out.max()) >= self.vocab_size:
            bad = int(np.argmax(out.ravel() >= self.vocab_size))
            where = (range(self.length)[pos] if isinstance(pos, slice) else np.asarray(pos).ravel())[bad]
            raise ValueError(f"{self.path}: token {int(out.ravel()[bad])} at position {where} is outside the "
                             f"vocabulary of {self.vocab_size} in {META}")
        return out


def read_meta(directory: Path) -> dict[str, Any]:
    path = directory / META
    need_file(path, "; write a token directory with python -m zoo.data.prepare")
    try:
        meta = json.loads(read_regular(path))
        vocab_size, dtype, tok = meta["vocab_size"], meta["dtype"], meta["tokenizer"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a token directory's meta (vocab_size, dtype, tokenizer): {err}") from None
    if type(vocab_size) is not int or vocab_size < 1:
        raise ValueError(f"{path}: vocab_size must be a positive integer, got {vocab_size!r}")
    if not isinstance(tok, dict):
        raise ValueError(f"{path}: tokenizer must be a mapping with its kind (char, byte or bpe), got {tok!r}")
    if dtype not in DTYPES:
        raise ValueError(f"{path}: dtype {dtype!r} is not uint16 or uint32")
    if vocab_size > 1 << (8 * np.dtype(DTYPES[dtype]).itemsize):
        raise ValueError(f"{path}: a vocabulary of {vocab_size} does not fit in {dtype}")
    return {**meta, "vocab_size": vocab_size, "dtype": dtype, "tokenizer": tok}


def need_file(path: Path, advice: str = "") -> None:
    """One line when a token directory's file is missing or is a folder (it said 'not found' for a folder)."""
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a file of the token directory{advice}")
    refuse_special(path, str(path))
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found{advice}")


def write_meta(directory: Path, tokenizer: Tokenizer, counts: dict[str, int], source: str) -> None:
    meta = {"vocab_size": tokenizer.vocab_size, "dtype": dtype_for(tokenizer.vocab_size),
            "tokenizer": tokenizer.meta(), **{f"{s}_tokens": n for s, n in counts.items()}, "source": source}
    write_atomic(directory / META, json.dumps(meta, indent=2, ensure_ascii=False))  # the last file: it marks done


def load(path: str, seq_len: int, stream: bool | None = None, limit: int = IN_MEMORY_LIMIT) -> DataView:
    """The token directory at `path`: in memory (int32 on the device) when it fits, else streamed."""
    directory = Path(path).expanduser()
    if directory.is_file():
        raise ValueError(f"--data tokens:{path} is a file; tokens: takes the directory `python -m zoo.data.prepare` "
                         f"writes (a text file is --data text:{path})")
    if not directory.is_dir():
        raise FileNotFoundError(f"token directory not found: {directory}")
    meta = read_meta(directory)
    tokenizer = from_meta(meta["tokenizer"], directory)
    if tokenizer.vocab_size != meta["vocab_size"]:
        raise ValueError(f"{directory / META}: vocab_size {meta['vocab_size']} but the tokenizer has "
                         f"{tokenizer.vocab_size} tokens")
    files = {}
    for split in SPLITS:
        need_file(directory / f"{split}.bin")
        files[split] = TokenFile(directory / f"{split}.bin", meta["dtype"], meta["vocab_size"])
        expected = meta.get(f"{split}_tokens")
        if expected is not None and expected != len(files[split]):
            raise ValueError(f"{files[split].path} has {len(files[split])} tokens but {META} says {expected} "
                             "(a partial write? prepare it again)")
    text.check_lengths({s: len(f) for s, f in files.items()}, seq_len, str(directory))  # an empty one: no mmap
    if not streams(stream, 4 * sum(len(f) for f in files.values()), limit):
        arrays = {s: f[:].astype(np.int32) for s, f in files.items()}  # checked against the vocabulary
        return text.from_splits(arrays, tokenizer, seq_len, str(directory))
    return Streamed(kind="text", readers={s: TokenWindows(f, seq_len) for s, f in files.items()},
                    num_classes=meta["vocab_size"], in_shape=(seq_len,), eval_split="val", seq_len=seq_len,
                    tokenizer=tokenizer)


def source(arg: str, cfg: DataConfig, limit: int) -> DataView:
    """`tokens:DIR`: nanoGPT's train.bin/val.bin with a meta.json (`python -m zoo.data.prepare`)."""
    if not arg:
        raise SpecError("tokens:DIR needs a directory")
    not_images(cfg)
    return load(arg, cfg.seq_len, cfg.stream, limit)
