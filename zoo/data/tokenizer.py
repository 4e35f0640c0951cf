"""Tokenizers shared by every text source (text files, token files, tfds text): encode str -> ids, decode ids -> str.

Three kinds: `char` (the sorted characters of the corpus), `byte` (UTF-8 bytes, 256 ids) and `bpe` (a
sentencepiece model trained on the corpus). Each describes itself in a JSON-able dict (`meta()`), stored in a
token directory's meta.json, from which `from_meta` rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from zoo.files import read_regular, refuse_special, write_atomic
from zoo.schema import INT32_MAX, digits

BPE_MODEL = "tokenizer.model"
BPE_MIN = 256 + 3 + 1  # byte-fallback pieces, <unk> <s> </s>, and "\n": a BPE's pieces before any character
PIECE = 1024  # characters a BPE trains on at a time: at most 4,096 bytes, under sentencepiece's 4,192-byte limit
SPACE_SIGN = "\u2581"  # sentencepiece's sign for a space in its pieces


class Tokenizer(Protocol):
    vocab_size: int

    def encode(self, text: str) -> np.ndarray:
        """Text -> int32 token ids."""

    def decode(self, ids: np.ndarray | list[int]) -> str:
        """Token ids -> text."""

    def meta(self) -> dict[str, Any]:
        """A JSON-able description from which `from_meta` rebuilds this tokenizer."""


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), "<u4")


class CharTokenizer:
    """id = the rank of the character among the corpus's sorted characters."""

    def __init__(self, chars: Iterable[str]):
        self.chars = sorted(set(chars))
        self.vocab_size = len(self.chars)
        self._codes = _codes("".join(self.chars))

    @classmethod
    def fit(cls, texts: Iterable[str]) -> CharTokenizer:
        """The characters of all `texts` (read one at a time; only the character set is kept)."""
        seen: set[str] = set()
        for t in texts:
            seen.update(t)
        return cls(seen)

    def encode(self, text: str) -> np.ndarray:
        codes = _codes(text)
        ids = np.searchsorted(self._codes, codes)
        bad = (ids >= self.vocab_size) | (self._codes[np.minimum(ids, self.vocab_size - 1)] != codes)
        if bad.any():
            missing = "".join(sorted({chr(c) for c in codes[bad]}))
            raise ValueError(f"characters not in the vocabulary: {missing!r}")
        return ids.astype(np.int32)

    def decode(self, ids: np.ndarray | list[int]) -> str:
        return "".join(self.chars[i] for i in np.asarray(ids, np.int64).ravel())

    def meta(self) -> dict[str, Any]:
        return {"kind": "char", "chars": "".join(self.chars)}


class ByteTokenizer:
    """id = the UTF-8 byte (bytes that are not UTF-8, read with errors="surrogateescape", come back as they were);
    decoding replaces invalid byte sequences."""

    vocab_size = 256

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8", "surrogateescape"), np.uint8).astype(np.int32)

    def decode(self, ids: np.ndarray | list[int]) -> str:
        return np.asarray(ids, np.int64).ravel().astype(np.uint8).tobytes().decode("utf-8", errors="replace")

    def meta(self) -> dict[str, Any]:
        return {"kind": "byte"}


class BPETokenizer:
    """A sentencepiece BPE model. Trained to round-trip any text: no normalization, no dummy prefix, whitespace
    kept, newline a piece of its own, and unseen characters fall back to their UTF-8 bytes."""

    def __init__(self, model: bytes):
        import sentencepiece as spm

        self.model = model
        try:
            self.sp = spm.SentencePieceProcessor(model_proto=model)
        except RuntimeError:  # sentencepiece's names a C++ check ("INTERNAL: ... ParseFromArray ...") only
            raise ValueError(f"not a sentencepiece model ({len(model):,} bytes that do not parse as one: damaged, or "
                             "another file)") from None
        self.vocab_size = self.sp.get_piece_size()
        self._space_sign = [self.sp.piece_to_id(f"<0x{b:02X}>") for b in SPACE_SIGN.encode()]  # see `encode`
        has_space = self.sp.piece_to_id(SPACE_SIGN) != self.sp.unk_id()
        self._space = [] if has_space else [self.sp.piece_to_id("<0x20>")]

    @classmethod
    def fit(cls, lines: Iterator[str], vocab_size: int, max_lines: int = 2_000_000) -> BPETokenizer:
        """Trains on (a uniform sample of at most `max_lines` of) the corpus's lines."""
        import io

        import sentencepiece as spm

        model = io.BytesIO()
        failed: list[Exception] = []

        def read() -> Iterator[str]:  # sentencepiece would bury the corpus's own errors in its traceback text
            try:
                yield from pieces(lines)
            except Exception as err:
                failed.append(err)

        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=read(), model_writer=model, vocab_size=vocab_size, model_type="bpe",
                character_coverage=1.0, byte_fallback=True, normalization_rule_name="identity",
                remove_extra_whitespaces=False, add_dummy_prefix=False, user_defined_symbols=["\n"],
                allow_whitespace_only_pieces=True, split_digits=True, hard_vocab_limit=False,
                input_sentence_size=max_lines, shuffle_input_sentence=True, minloglevel=2)
        except RuntimeError as err:
            if not failed:
                raise ValueError(f"sentencepiece could not train a BPE of size {vocab_size}: {_why(err)}") from None
        if failed:
            raise failed[0]
        return cls(model.getvalue())

    def encode(self, text: str) -> np.ndarray:
        """The text's ids. sentencepiece reads U+2581, its own sign for a space, as a space (the ids of 'a\u2581b'
        were those of 'a b'): it is encoded as its UTF-8 bytes' pieces, which decode to it. A model trained on a
        corpus without a space has no piece for one (sentencepiece's U+2581 then fell back to its bytes, and 'a b'
        decoded as 'a\u2581b'): its spaces are the byte piece <0x20> (no piece holds a space to merge across)."""
        ids: list[int] = []
        for i, part in enumerate(text.split(SPACE_SIGN)):
            ids += self._space_sign if i else []
            for j, word in enumerate(self.sp.encode(part.split(" ") if self._space else [part])):
                ids += (self._space if j else []) + word
        return np.asarray(ids, np.int32)

    def decode(self, ids: np.ndarray | list[int]) -> str:
        return self.sp.decode(np.asarray(ids, np.int64).ravel().tolist())

    def meta(self) -> dict[str, Any]:
        return {"kind": "bpe", "model": BPE_MODEL}

    def save(self, directory: Path) -> None:
        write_atomic(directory / BPE_MODEL, self.model, "wb")


def pieces(lines: Iterable[str]) -> Iterator[str]:
    """The lines cut into pieces of at most PIECE characters. sentencepiece skips a sentence longer than its
    max_sentence_length (4,192 bytes) without a word: a corpus of long lines (a text without line ends) trained on
    none of them ('INTERNAL: src/trainer_interface.cc(467) [!sentences_.empty()]'), one with some long lines on
    the others only."""
    for line in lines:
        for start in range(0, max(len(line), 1), PIECE):
            yield line[start:start + PIECE]


def _why(err: RuntimeError) -> str:
    """sentencepiece's reason, in zoo's terms where known (its own names a C++ check and its own flags)."""
    text = str(err).strip().splitlines()[-1]
    need = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", text)
    if need:
        return (f"the corpus has {int(need.group(2)) - BPE_MIN} characters, so it needs at least {need.group(2)} "
                f"tokens ({BPE_MIN} pieces before any character); ask for bpe:{need.group(2)} or more")
    if "[!sentences_.empty()]" in text:  # what pieces() leaves for a corpus of nothing but line ends
        return "the corpus has no text to learn pieces from (only line ends); use --tokenizer byte or char"
    return text


def from_meta(meta: dict[str, Any], directory: Path) -> Tokenizer:
    """The tokenizer a token directory's meta.json describes (a BPE model is read from `directory`)."""
    kind = meta.get("kind")
    needs = {"char": "chars", "bpe": "model"}.get(kind)
    if needs is not None and not (isinstance(meta.get(needs), str) and meta[needs]):
        raise ValueError(f"{directory / 'meta.json'}: a {kind} tokenizer needs its {needs!r} (a non-empty string), "
                         f"got {meta.get(needs)!r}")
    if kind == "char":
        return CharTokenizer(meta["chars"])
    if kind == "byte":
        return ByteTokenizer()
    if kind == "bpe":
        path = directory / meta["model"]
        refuse_special(path, f"the BPE model {path} named in {directory / 'meta.json'}")
        if not path.is_file():
            raise FileNotFoundError(f"the BPE model {path} named in {directory / 'meta.json'} is missing")
        try:
            return BPETokenizer(read_regular(path))
        except ValueError as err:
            raise ValueError(f"the BPE model {path} named in {directory / 'meta.json'} is {err}") from None
    raise ValueError(f"{directory / 'meta.json'}: unknown tokenizer kind {kind!r} (char, byte or bpe)")


def describe(tokenizer: Tokenizer) -> dict[str, Any]:
    """What a checkpoint records of the tokenizer its run trained with: its kind, its size and a SHA-256 of its
    vocabulary (the meta, and a BPE's model), which changes with any token's id (a character added to or taken from
    a text file shifts the ids of the characters after it)."""
    digest = hashlib.sha256(json.dumps(tokenizer.meta(), sort_keys=True).encode())
    if isinstance(tokenizer, BPETokenizer):
        digest.update(tokenizer.model)
    return {"kind": tokenizer.meta()["kind"], "vocab_size": tokenizer.vocab_size, "sha256": digest.hexdigest()}


def parse(spec: str) -> tuple[str, int | None]:
    """'char' | 'byte' | 'bpe:SIZE' -> (kind, size)."""
    kind, colon, size = spec.partition(":")
    if kind in ("char", "byte") and not colon:  # 'byte:' (an unset size after it) was read as 'byte'
        return kind, None
    if kind == "bpe" and digits(size) and 0 < int(size) < BPE_MIN:
        raise ValueError(f"--tokenizer {spec}: a BPE needs at least {BPE_MIN} tokens (256 byte pieces, its special "
                         "pieces and the newline) and one more per character of the corpus; ask for more (e.g. "
                         "bpe:4096)")
    if kind == "bpe" and digits(size) and 0 < int(size) <= INT32_MAX:  # sentencepiece reads SIZE as an int32
        return kind, int(size)
    raise ValueError(f"unknown tokenizer {spec!r}; use char, byte or bpe:SIZE with SIZE from {BPE_MIN} to 2^31 - 1 "
                     "(e.g. bpe:4096)")
