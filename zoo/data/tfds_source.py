"""Image classification sets from tensorflow-datasets via `tfds.data_source` (no TensorFlow), read into memory."""

from __future__ import annotations

import numpy as np
import tensorflow_datasets as tfds

from zoo.data.dataset import Dataset


def load(name: str, eval_split: str | None = None, data_dir: str | None = None) -> Dataset:
    """Splits "train" and `eval_split` (default "test", else "validation") with features "image" and "label"."""
    train = _source(name, "train", data_dir)
    info = train.dataset_info
    if "image" not in info.features or "label" not in info.features:
        raise ValueError(f"tfds dataset {name!r} has features {', '.join(info.features)}; "
                         "only image classification sets (image, label) are supported")
    known = list(info.splits)
    if eval_split is None:
        eval_split = "validation" if "validation" in known and "test" not in known else "test"
    splits = {"train": _read(train, f"{name}:train"),
              eval_split: _read(_source(name, eval_split, data_dir), f"{name}:{eval_split}")}
    return Dataset(kind="image", splits=splits, num_classes=info.features["label"].num_classes,
                   in_shape=tuple(splits["train"]["x"].shape[1:]), eval_split=eval_split)


def _source(name: str, split: str, data_dir: str | None):
    try:
        return tfds.data_source(name, split=split, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError as err:
        raise ValueError(f"unknown tfds dataset {name!r}") from err
    except (ValueError, KeyError) as err:
        raise ValueError(f"tfds dataset {name!r} has no split {split!r}: {err}") from err


def _read(source, what: str) -> dict[str, np.ndarray]:
    examples = [source[i] for i in range(len(source))]
    if not examples:
        raise ValueError(f"tfds split {what} is empty")
    x = np.stack([np.asarray(e["image"], np.uint8) for e in examples])
    y = np.array([int(e["label"]) for e in examples], np.int32)
    return {"x": x, "y": y}

