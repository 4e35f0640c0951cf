"""Token directories from a corpus (the `tokens:DIR` format of zoo.data.tokens), written a chunk at a time
(the command line: zoo/cli/prepare.py):

    python -m zoo.data.prepare text FILE_OR_DIR --out DIR --tokenizer char|byte|bpe:SIZE
    python -m zoo.data.prepare tfds NAME --out DIR --tokenizer ...

Text: the files (a folder's, in sorted order) are one stream whose first 90% of tokens is train.bin and the rest
val.bin, as `text:FILE` splits. tfds: the documents of train and of the eval split, joined by newlines. `char`
takes the corpus's characters (a first pass), `byte` its UTF-8 bytes, `bpe:SIZE` trains a sentencepiece BPE of
SIZE tokens on the corpus and stores it in DIR (tokenizer.model), so sampling decodes with it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from zoo.data import tokens
from zoo.data.text import TRAIN_FRACTION
from zoo.data.tokenizer import BPE_MODEL, BPETokenizer, ByteTokenizer, CharTokenizer, Tokenizer, parse
from zoo.data.view import check_classes
from zoo.data.walk import files_under
from zoo.errors import naming_full_disk, sigterm_stops
from zoo.files import open_regular, refuse_special, resolved, undo_folders_made_on_failure
from zoo.train.lock import LOCK, claim

CHUNK = 1 << 22  # characters read (and encoded) at a time
WRITTEN = ("train.bin", "val.bin", "all.bin.partial", tokens.META, BPE_MODEL)  # what a prepare writes
Advance = Callable[[int], None]


def text_files(source: Path) -> list[Path]:
    """The file itself, or every non-hidden file under the folder (through linked folders: zoo.data.walk) in sorted
    order."""
    if source.is_file():
        return [source]
    refuse_special(source, str(source))  # a FIFO or a device is there: not "no file"
    if not source.is_dir():
        raise FileNotFoundError(f"no file or folder {source}")
    files = sorted(p for p in files_under(source) if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(source).parts))
    if not files:
        raise ValueError(f"no files under {source}")
    return files


def check_corpus(source: Path, target: Path, files: list[Path]) -> None:
    """The corpus holds no token directory, and --out goes outside a source folder: its train.bin, val.bin and
    meta.json were read as text by the next prepare of the folder, silently (a corpus of 1,700 bytes read as 5,293
    byte tokens, or as 16,037 characters in a vocabulary of 57 instead of 18)."""
    if source.is_dir() and resolved(target).is_relative_to(resolved(source)):
        raise ValueError(f"--out {target} is inside the source folder {source}, whose files are all read as the "
                         "corpus (its token files too, by the next prepare); choose a folder outside it")
    found = next((p.parent for p in files if p.name == tokens.META and (p.parent / "train.bin").is_file()), None)
    if found is not None:
        raise ValueError(f"{source} holds a token directory, {found}, whose files are no text; move it out of the "
                         "corpus")


def read_chunks(files: list[Path], errors: str, advance: Advance = lambda n: None) -> Iterator[str]:
    """The files' text in pieces of CHUNK to 2 CHUNK characters ending at a line end, or at 2 CHUNK within a longer
    line (the rest of the line was read whole: all of a 10 GB file without line ends at once);
    `errors="surrogateescape"` carries bytes that are not UTF-8 through (the byte tokenizer gives them back)."""
    for path in files:
        try:
            with path.open(encoding="utf-8", errors=errors, newline="") as f:
                while chunk := f.read(CHUNK):
                    chunk += f.readline(CHUNK)
                    advance(len(chunk.encode("utf-8", "surrogateescape")))
                    yield chunk
        except UnicodeDecodeError as err:
            raise ValueError(f"{path} is not UTF-8 ({err}); use --tokenizer byte") from None


def lines(chunks: Iterable[str]) -> Iterator[str]:
    for chunk in chunks:
        yield from chunk.splitlines()


def joined(docs: Iterable[str], advance: Advance = lambda n: None) -> Iterator[str]:
    """Pieces whose concatenation is "\\n".join(docs), each about CHUNK characters."""
    piece: list[str] = []
    size = 0
    for i, doc in enumerate(docs):
        piece.append(doc if i == 0 else "\n" + doc)
        size += len(doc) + 1
        advance(1)
        if size >= CHUNK:
            yield "".join(piece)
            piece, size = [], 0
    if piece:
        yield "".join(piece)


def fit(spec: str, chunks: Callable[[], Iterator[str]]) -> Tokenizer:
    """The tokenizer `spec` names, fitted to the corpus (`chunks()` gives a fresh pass over it)."""
    kind, size = parse(spec)
    if kind == "byte":
        return ByteTokenizer()
    if kind == "char":
        return CharTokenizer.fit(chunks())
    return BPETokenizer.fit(lines(chunks()), size)


def encode_to(path: Path, chunks: Iterable[str], tokenizer: Tokenizer) -> int:
    """Appends the tokens of `chunks` to `path` in the directory's dtype; returns how many were written."""
    dtype = np.dtype(tokens.DTYPES[tokens.dtype_for(tokenizer.vocab_size)])
    count = 0
    with naming_full_disk(path), open_regular(path, "ab") as f:
        for chunk in chunks:
            ids = tokenizer.encode(chunk).astype(dtype)
            f.write(ids.tobytes())
            count += len(ids)
    return count


def split_tail(whole: Path, train: Path, val: Path, count: int, itemsize: int) -> dict[str, int]:
    """Moves the last (1 - TRAIN_FRACTION) of the tokens in `whole` to `val`; `whole` becomes `train`."""
    cut = int(count * TRAIN_FRACTION)
    with naming_full_disk(val), open_regular(whole, "r+b") as src, open_regular(val, "wb") as dst:
        src.seek(cut * itemsize)
        while block := src.read(CHUNK):
            dst.write(block)
        src.truncate(cut * itemsize)
    os.replace(whole, train)
    return {"train": cut, "val": count - cut}


@contextlib.contextmanager
def progress(description: str, total: int, unit_bytes: bool) -> Iterator[Advance]:
    """A progress bar on stderr; yields the function that advances it."""
    count = DownloadColumn() if unit_bytes else TextColumn("{task.completed}/{task.total} documents")
    columns = (TextColumn("{task.description}"), BarColumn(), count, TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def prepare_text(source: Path, files: list[Path], out: Path, spec: str) -> dict[str, int]:
    errors = "surrogateescape" if parse(spec)[0] == "byte" else "strict"
    tokenizer = fit(spec, lambda: read_chunks(files, errors))
    check_classes(tokenizer.vocab_size, "text", f"{source} under --tokenizer {spec}")  # one character, repeated
    whole = out / "all.bin.partial"
    with progress(f"tokenizing {source.name}", sum(p.stat().st_size for p in files), unit_bytes=True) as advance:
        count = encode_to(whole, read_chunks(files, errors, advance), tokenizer)
    itemsize = np.dtype(tokens.DTYPES[tokens.dtype_for(tokenizer.vocab_size)]).itemsize
    counts = split_tail(whole, out / "train.bin", out / "val.bin", count, itemsize)
    _check_counts(counts, source.name)
    _save(tokenizer, out)
    tokens.write_meta(out, tokenizer, counts, str(source.resolve()))
    return counts


def tfds_text(name: str, data_dir: str | None) -> tuple[dict[str, Any], str, str]:
    """The sources of a tfds text set's train and eval splits, the eval split's name and the text feature."""
    from zoo.data import tfds_source

    sources, eval_split = tfds_source.open_splits(name, None, data_dir)
    feature = tfds_source.text_feature(sources["train"].dataset_info.features)
    if feature is None:
        raise ValueError(f"tfds dataset {name!r} has no text feature ({', '.join(tfds_source.TEXT_FEATURES)})")
    return sources, eval_split, feature


def prepare_tfds(name: str, sources: dict[str, Any], eval_split: str, feature: str, out: Path, spec: str
                 ) -> dict[str, int]:
    from zoo.data import tfds_source

    tokenizer = fit(spec, lambda: (piece for src in sources.values()
                                   for piece in joined(tfds_source.texts(src, feature))))
    counts = {}
    for split, target in (("train", "train"), (eval_split, "val")):
        with progress(f"tokenizing {name}:{split}", len(sources[split]), unit_bytes=False) as advance:
            counts[target] = encode_to(out / f"{target}.bin", joined(tfds_source.texts(sources[split], feature),
                                                                      advance), tokenizer)
    _check_counts(counts, f"tfds:{name}")
    _save(tokenizer, out)
    tokens.write_meta(out, tokenizer, counts, f"tfds:{name}")
    return counts


def _check_counts(counts: dict[str, int], source: str) -> None:
    """Both splits hold a window of one token and its next at least (a corpus of a few characters leaves a split
    shorter: the folder was written, and every run on it refused)."""
    short = [split for split, n in counts.items() if n < 2]
    if short:
        raise ValueError(f"{source} is too small: its {' and '.join(short)} split{'s' if len(short) > 1 else ''} "
                         "would hold fewer than the 2 tokens a window needs "
                         f"({counts['train']:,} train, {counts['val']:,} val)")


def _save(tokenizer: Tokenizer, out: Path) -> None:
    if isinstance(tokenizer, BPETokenizer):
        tokenizer.save(out)


def prepare(kind: str, source: str, out: str, spec: str, data_dir: str | None = None) -> dict[str, int]:
    """Writes the token directory `out`; returns its token counts per split. A tokenizer, source or --out that
    cannot work is refused before anything is written. `out` is locked while it is written (zoo.train.lock, as run
    dirs are): a second prepare into it at the same time is refused in one line, not interleaved with the first."""
    parse(spec)  # a bad tokenizer fails before any work
    target = Path(out).expanduser()
    check_out(target)
    if kind == "text":
        files = text_files(Path(source).expanduser())
        check_corpus(Path(source).expanduser(), target, files)
        if not any(p.stat().st_size for p in files):
            raise ValueError(f"{source} is empty: there is no text to tokenize")
        tokenize = functools.partial(prepare_text, Path(source).expanduser(), files, target, spec)
    else:
        tokenize = functools.partial(prepare_tfds, source, *tfds_text(source, data_dir), target, spec)
    created = not target.exists()
    with sigterm_stops(), undo_folders_made_on_failure(target.parent), \
            claim(target, _say, what="prepare", flag="--out"):
        try:
            check_out(target)  # again, now that no other prepare can write it: one may have finished meanwhile
            return write(target, created, tokenize)
        finally:  # a token directory holds its files only (RunLock takes a lock removed by its owner again)
            (target / LOCK).unlink(missing_ok=True)


def write(target: Path, created: bool, tokenize: Callable[[], dict[str, int]]) -> dict[str, int]:
    """`tokenize()`: the token files written in `target`, whose lock is held; their counts. A refused or interrupted
    prepare leaves no `target` it `created` behind, nor its files in one that was there."""
    try:
        _remove_partial(target)  # left by an interrupted run (no meta.json yet)
        return tokenize()
    except BaseException:
        if created:
            shutil.rmtree(target, ignore_errors=True)
        else:
            _remove_partial(target)
        raise


def _partial(name: str) -> bool:
    """A file of a prepare that did not finish: one it writes, or the temporary meta.json is written through
    (zoo.files.atomic: .meta.json.<random>.tmp, left by a kill during that write)."""
    return name in WRITTEN or (name.startswith(f".{tokens.META}.") and name.endswith(".tmp"))


def _remove_partial(target: Path) -> None:
    for path in target.iterdir():
        if _partial(path.name):
            path.unlink(missing_ok=True)


def check_out(target: Path) -> None:
    """--out is a new folder, an empty one, or one an interrupted prepare left (its files and lock only)."""
    if (target / tokens.META).exists():
        raise ValueError(f"{target} already holds a token directory; pass another --out or remove it")
    if target.exists() and not target.is_dir():
        raise ValueError(f"--out {target} is a file, not a directory")
    if target.is_dir() and (other := sorted(p.name for p in target.iterdir() if not _partial(p.name) and
                                            p.name != LOCK)):
        raise ValueError(f"--out {target} holds other files ({', '.join(other[:3])}{', ...' if len(other) > 3 else ''})"
                         "; pass a new or empty folder")


def _say(line: str) -> None:
    print(line, file=sys.stderr)

