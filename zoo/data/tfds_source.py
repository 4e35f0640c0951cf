"""tensorflow-datasets sets via `tfds.data_source` (random access over ArrayRecord files, no TensorFlow).

Image classification sets (features image, label) go into memory when they fit and are read batch by batch
(decoded in grain's workers) when they do not; with `image_size` every image is resized and center-cropped to
N x N as it is read (`zoo.data.resize`), so sets whose images vary in size (imagenet2012) work. Text sets (a text
feature) are tokenized into memory; one too big for that is prepared into token files first
(`python -m zoo.data.prepare tfds NAME`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from zoo.data import resize, text
from zoo.data.config import DataConfig
from zoo.data.dataset import Dataset
from zoo.data.image_decode import sixteen_to_eight_bits
from zoo.data.sources import SpecError
from zoo.data.streamed import IN_MEMORY_LIMIT, Streamed, check_host, image_bytes, streams
from zoo.data.tokenizer import ByteTokenizer, CharTokenizer
from zoo.data.view import DataView, check_classes
from zoo.errors import reraise_stop

TEXT_FEATURES = ("text", "content", "document", "article")


def load(name: str, eval_split: str | None = None, data_dir: str | None = None, *, seq_len: int = 256,
         byte_level: bool = False, stream: bool | None = None, limit: int = IN_MEMORY_LIMIT,
         image_size: int | None = None) -> DataView:
    """Splits "train" and `eval_split` (default "test", else "validation"); images at their own (fixed) size, or
    resized and center-cropped to `image_size` x `image_size`."""
    sources, eval_split = open_splits(name, eval_split, data_dir)
    features = sources["train"].dataset_info.features
    if text_feature(features) is not None:
        if image_size is not None:
            raise ValueError(f"--image-size resizes images, but tfds dataset {name!r} is text")
        return _text(name, sources, eval_split, seq_len, byte_level, stream, limit)
    if "image" not in features or "label" not in features:
        raise ValueError(f"tfds dataset {name!r} has features {', '.join(features)}; only image classification "
                         f"sets (image, label) and text sets ({', '.join(TEXT_FEATURES)}) are supported")
    check_classes(features["label"].num_classes, "image", f"tfds dataset {name!r}")
    shape = tuple(features["image"].shape)
    if image_size is not None:
        check_host(image_bytes(image_size), f"one image at --image-size {image_size}", "use a smaller --image-size")
        shape = (image_size, image_size, shape[-1])
    elif None in shape:
        raise ValueError(f"tfds dataset {name!r} has images of varying size {shape}; pass --image-size 224 to "
                         "resize and center-crop them (or use a fixed-size variant, e.g. imagenet_resized/64x64)")
    readers = {s: TfdsImages(src, f"{name}:{s}", image_size) for s, src in sources.items()}
    streamed = Streamed(kind="image", readers=readers, num_classes=features["label"].num_classes, in_shape=shape,
                        eval_split=eval_split)
    decoded = sum(r.size for r in readers.values()) * int(np.prod(shape))
    if streams(stream, decoded, limit):
        return streamed
    check_host(decoded, f"tfds dataset {name!r}", "let it stream (leave out --stream false)")
    splits = {s: r.read(np.arange(r.size)) for s, r in readers.items()}
    return Dataset(kind="image", splits=splits, num_classes=streamed.num_classes, in_shape=shape,
                   eval_split=eval_split)


def open_splits(name: str, eval_split: str | None, data_dir: str | None) -> tuple[dict[str, Any], str]:
    """The data sources of "train" and of the eval split (default "test", else "validation"), and its name."""
    train = _source(name, "train", data_dir)
    if eval_split is None:
        known = list(train.dataset_info.splits)
        eval_split = "validation" if "validation" in known and "test" not in known else "test"
    return {"train": train, eval_split: train if eval_split == "train" else _source(name, eval_split, data_dir)}, \
        eval_split


def _source(name: str, split: str, data_dir: str | None):
    """The random-access source of a prepared split; zoo never downloads (preparing most sets needs TensorFlow and
    the network), so a set that is not on disk is one line saying where it was looked for and how to prepare it."""
    with _quiet_absl():
        try:
            return tfds.data_source(name, split=split, data_dir=data_dir, download=False)
        except tfds.core.registered.DatasetNotFoundError as err:
            raise ValueError(f"unknown tfds dataset {name!r}") from err
        except (ValueError, KeyError, NotImplementedError, AssertionError, OSError) as err:
            builder = tfds.builder(name, data_dir=data_dir)
            if not builder.is_prepared():
                raise ValueError(f"tfds dataset {name!r} is not prepared: nothing in {builder.data_dir} (zoo never "
                                 f"downloads); prepare it where there is network (or its files, in --manual_dir) "
                                 f"with `tfds build {name} --file_format array_record --data_dir DIR` and pass "
                                 "--data-dir DIR") from None
            if isinstance(err, NotImplementedError):
                raise ValueError(f"tfds dataset {name!r} in {builder.data_dir} is not in array_record format, which "
                                 f"random access needs; rebuild it with `tfds build {name} --file_format "
                                 "array_record`") from None
            raise ValueError(f"tfds dataset {name!r} has no split {split!r}: {err}") from err


@contextlib.contextmanager
def _quiet_absl() -> Iterator[None]:
    """tfds logs a warning for every folder it inspects; the one line zoo prints says what matters."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class TfdsImages:
    """An image split as a Reader: the examples of a batch fetched (and their images decoded, and resized and
    center-cropped to `image_size` when given) on demand."""

    def __init__(self, source: Any, what: str, image_size: int | None = None):
        self.source, self.what, self.size, self.image_size = source, what, len(source), image_size
        if not self.size:
            raise ValueError(f"tfds split {what} is empty")

    def read(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        examples = []
        for i in idx:
            try:
                examples.append(self.source[int(i)])
            except Exception as err:  # ArrayRecord and the feature decoders raise many types
                reraise_stop(err)
                why = (str(err).strip() or type(err).__name__).splitlines()[0]
                raise ValueError(f"tfds split {self.what}: cannot read example {int(i)}: {why}") from None
        x = np.stack([self._image(self._eight_bits(np.asarray(e["image"]))) for e in examples])
        y = np.array([int(e["label"]) for e in examples], np.int32)
        return {"x": x, "y": y}

    def _eight_bits(self, image: np.ndarray) -> np.ndarray:
        """uint8 pixels; a 16-bit image's scaled by 255 / 65535 = 1 / 257, as an image folder's (a cast wrapped them
        modulo 256). Other dtypes, whose range is not known, are refused."""
        if image.dtype == np.uint16:
            return sixteen_to_eight_bits(image)
        if image.dtype != np.uint8:
            raise ValueError(f"tfds split {self.what}: its images are {image.dtype}, whose range is not known; zoo "
                             "reads 8- and 16-bit images")
        return image

    def _image(self, image: np.ndarray) -> np.ndarray:
        return image if self.image_size is None else resize.square(image, self.image_size)


def text_feature(features: Any) -> str | None:
    """The name of a set's text feature, if it has one."""
    return next((f for f in TEXT_FEATURES if f in features and isinstance(features[f], tfds.features.Text)), None)


def texts(source: Any, feature: str) -> Iterator[str]:
    """A split's documents, one at a time."""
    for i in range(len(source)):
        value = source[i][feature]
        yield value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _text(name: str, sources: dict[str, Any], eval_split: str, seq_len: int, byte_level: bool,
          stream: bool | None, limit: int) -> DataView:
    """Documents joined by newlines, tokenized (bytes, or the characters of all splits) into memory."""
    info = sources["train"].dataset_info
    recorded = [info.splits[s].num_bytes if s in info.splits else 0 for s in sources]
    if streams(stream, 4 * sum(recorded), limit):  # int32 tokens: at most 4 bytes per byte of text
        raise ValueError(f"tfds text set {name!r} is too big for memory; prepare it as token files "
                         f"(python -m zoo.data.prepare tfds {name} --out DIR) and use --data tokens:DIR")
    feature = text_feature(info.features)
    docs = {s: "\n".join(texts(src, feature)) for s, src in sources.items()}
    tokenizer = ByteTokenizer() if byte_level else CharTokenizer.fit(docs.values())
    splits = {s: tokenizer.encode(d) for s, d in docs.items()}
    return text.from_splits(splits, tokenizer, seq_len, f"tfds:{name}", eval_split=eval_split)


def source(arg: str, cfg: DataConfig, limit: int) -> DataView:
    """`tfds:NAME[:EVAL_SPLIT]`: a tensorflow-datasets set already prepared in --data-dir."""
    name, _, split = arg.partition(":")
    if not name:
        raise SpecError("tfds:NAME needs a data set name")
    return load(name, split or None, cfg.data_dir, seq_len=cfg.seq_len, byte_level=cfg.byte_level, stream=cfg.stream,
                limit=limit, image_size=cfg.image_size)
