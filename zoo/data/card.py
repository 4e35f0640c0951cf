"""A data set's card: what a checkpoint records of its run's data (kind, classes, shapes, eval split, text window
and the whole tokenizer, no examples), from which sampling, export, the audit and a fork's source rebuild the data
where its files are not (a run dir copied to another machine)."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

from zoo.data.dataset import Dataset
from zoo.data.tokenizer import BPETokenizer, describe, from_meta
from zoo.errors import CheckpointError, one_line

BPE_BYTES = "model_base64"  # a card's BPE tokenizer: its sentencepiece model


def record(data: Any) -> dict[str, Any]:
    """What a checkpoint records of its run's data: the tokenizer of a text set (zoo.data.tokenizer.describe), and
    the set's card (`data_card`), from which the readers that need no examples (sampling, export, the audit, a fork's
    source) rebuild the data where its files are not: a run dir copied to another machine."""
    card = {"data": data_card(data)}
    return {**card, "tokenizer": described(data)} if data.tokenizer is not None else card


def described(data: Any) -> dict[str, Any] | None:
    """The tokenizer of a text set as a checkpoint records it (zoo.data.tokenizer.describe); None for images."""
    return describe(data.tokenizer) if data.tokenizer is not None else None


def data_card(data: Any) -> dict[str, Any]:
    """A data set without its examples: kind, classes (a vocabulary's size), input shape, eval split, text window and
    the whole tokenizer (its meta; a BPE's sentencepiece model in base64)."""
    card = {"kind": data.kind, "num_classes": int(data.num_classes), "in_shape": [int(n) for n in data.in_shape],
            "eval_split": data.eval_split, "seq_len": data.seq_len}
    if data.tokenizer is not None:
        extra = {BPE_BYTES: base64.b64encode(data.tokenizer.model).decode()} \
            if isinstance(data.tokenizer, BPETokenizer) else {}
        card["tokenizer"] = {**data.tokenizer.meta(), **extra}
    return card


class RecordedData(Dataset):
    """A run's data as its checkpoint recorded it (`data_card`): shapes and tokenizer, no examples."""

    def reader(self, split: str) -> Any:
        raise ValueError(f"the run's data was read from its checkpoint's record, which holds no examples (split "
                         f"{split!r} was asked for); read the run where its --data is")


def from_card(card: dict[str, Any], where: Path) -> Dataset:
    """The data set of a `data_card` (no splits: it reads no examples); CheckpointError where it is malformed."""
    try:
        meta = card.get("tokenizer")
        tokenizer = None if meta is None else BPETokenizer(base64.b64decode(meta[BPE_BYTES], validate=True)) \
            if meta.get("kind") == "bpe" else from_meta(meta, where)
        return RecordedData(card["kind"], {}, card["num_classes"], tuple(card["in_shape"]), card["eval_split"],
                       card["seq_len"], tokenizer)
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as e:
        raise CheckpointError(f"checkpoint {where}: its record of the run's data is malformed "
                              f"({one_line(e)})") from None


