"""--image-size: images of varying size resized (shorter side N) and center-cropped to N x N as they are read, the
same pixels streamed and in memory, for tfds sets (through mock_data), image folders and a train.py run."""

from __future__ import annotations

import json
from itertools import islice

import numpy as np
import pytest
from cli_utils import run_train
from PIL import Image

import zoo.data
from zoo.data import Streamed, resize, stream


def _smooth(h: int, w: int, channels: int = 3, seed: int = 0) -> np.ndarray:
    """A blocky random uint8 image (8 x 8 blocks), so a resample has structure to get wrong."""
    coarse = np.random.default_rng(seed).integers(0, 256, (h // 8, w // 8, channels))
    return np.kron(coarse, np.ones((8, 8, 1))).astype(np.uint8)


def _resize_then_crop(image: np.ndarray, size: int) -> np.ndarray:
    """The two-step definition: bicubic resize of the shorter side to `size`, then the central size x size crop."""
    h, w = image.shape[:2]
    rw, rh = round(w * size / min(h, w)), round(h * size / min(h, w))
    im = Image.fromarray(image).resize((rw, rh), Image.Resampling.BICUBIC)
    left, top = (rw - size) // 2, (rh - size) // 2
    return np.asarray(im.crop((left, top, left + size, top + size)))


@pytest.mark.parametrize("size", [20, 10])
def test_square_is_resize_then_center_crop(size):
    """Where the crop offset is a whole pixel (64 x 40 -> 32 x 20 or 16 x 10) the one-resample square equals
    resize-then-crop up to PIL's rounding (1 level of 255; a crop one pixel off differs by over 100 on these 8 x 8
    blocks); a tall image gives the transpose (to the same rounding); grayscale keeps its one channel."""
    wide = _smooth(40, 64)
    out = resize.square(wide, size)
    assert out.shape == (size, size, 3) and out.dtype == np.uint8
    np.testing.assert_allclose(out.astype(int), _resize_then_crop(wide, size), rtol=0, atol=1)
    tall = resize.square(wide.transpose(1, 0, 2).copy(), size)  # PIL resamples rows, then columns: rounding again
    np.testing.assert_allclose(tall.astype(int), out.transpose(1, 0, 2), rtol=0, atol=1)
    gray = _smooth(40, 64, channels=1)
    np.testing.assert_allclose(resize.square(gray, size)[..., 0].astype(int), _resize_then_crop(gray[..., 0], size),
                               rtol=0, atol=1)


def test_square_is_antialiased():
    """A one-pixel checkerboard shrunk 4x averages to gray (nearest-neighbour sampling would give all 0 or 255)."""
    checker = (np.indices((64, 64)).sum(0) % 2 * 255).astype(np.uint8)[..., None]
    out = resize.square(checker, 16)
    assert out.min() >= 120 and out.max() <= 135, (out.min(), out.max())


def _assert_same_reads(a: zoo.data.DataView, b: zoo.data.DataView, batch: int, steps: int) -> None:
    for step in range(steps):
        idx = a.indices("train", step, batch, seed=3)
        np.testing.assert_array_equal(idx, b.indices("train", step, batch, seed=3))
        for key in ("x", "y"):
            np.testing.assert_array_equal(a.read("train", idx)[key], b.read("train", idx)[key])
    for idx in a.eval_indices(5):
        np.testing.assert_array_equal(a.read(a.eval_split, idx)["x"], b.read(b.eval_split, idx)["x"])


def test_tfds_images_of_varying_size(tmp_path):
    """imagenet2012 under mock_data (random heights and widths in [5, 50)): refused in one line without an image
    size; with --image-size 16 every batch is (B, 16, 16, 3), streamed equals in memory, and each image is the
    square of the source's own image."""
    import tensorflow_datasets as tfds

    spec, where = "tfds:imagenet2012:validation", str(tmp_path)
    with tfds.testing.mock_data(num_examples=12, policy=tfds.testing.MockPolicy.USE_CODE):
        raw = tfds.data_source("imagenet2012", split="train", data_dir=where)
        raw_images = [np.asarray(raw[i]["image"]) for i in range(len(raw))]
        with pytest.raises(ValueError, match="pass --image-size 224") as err:
            zoo.data.load(spec, data_dir=where)
        assert "\n" not in str(err.value)
        streamed = zoo.data.load(spec, data_dir=where, image_size=16, stream=True)
        in_memory = zoo.data.load(spec, data_dir=where, image_size=16)
        batches = [b for _, b in islice(stream(streamed, "train", batch_size=4, seed=1), 3)]
    assert len({im.shape for im in raw_images}) > 1  # the source's sizes do vary
    assert isinstance(streamed, Streamed) and isinstance(in_memory, zoo.data.Dataset)
    assert streamed.in_shape == in_memory.in_shape == (16, 16, 3) and streamed.num_classes == 1000
    assert in_memory.splits["train"]["x"].shape == (12, 16, 16, 3)
    for i, image in enumerate(raw_images):
        np.testing.assert_array_equal(in_memory.splits["train"]["x"][i], resize.square(image, 16))
    _assert_same_reads(in_memory, streamed, batch=4, steps=4)
    for step, batch in enumerate(batches):  # grain's stream: the device path's gather of the same step
        idx = in_memory.indices("train", step, 4, 1)
        np.testing.assert_array_equal(batch["x"], in_memory.splits["train"]["x"][idx])


COLORS = {("train", "a", 0): (200, 10, 30), ("train", "a", 1): (0, 90, 250), ("train", "b", 0): (60, 60, 60),
          ("train", "b", 1): (120,), ("test", "a", 0): (1, 2, 3), ("test", "b", 0): (250, 240, 230)}
SIZES = {"a": (12, 8), "b": (8, 20)}  # (width, height) per class: two sizes, one wide and one tall


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Constant-colour images of two sizes, one of them grayscale among colour ones (as in ImageNet)."""
    root = tmp_path_factory.mktemp("sizes")
    for (split, cls, i), color in COLORS.items():
        (root / split / cls).mkdir(parents=True, exist_ok=True)
        Image.new("L" if len(color) == 1 else "RGB", SIZES[cls], color).save(root / split / cls / f"{i}.png")
    return root


def test_imagefolder_of_two_sizes(folder, tmp_path):
    """Refused in one line naming --image-size without it; with it, the in-memory set (cached per size) and the
    streamed one are the same N x N x 3 images, each of its own colour, the grayscale one as (v, v, v)."""
    spec, cache = f"imagefolder:{folder}", str(tmp_path)
    with pytest.raises(ValueError, match="pass --image-size N") as err:
        zoo.data.load(spec, cache_dir=cache)
    assert "\n" not in str(err.value)
    in_memory = zoo.data.load(spec, cache_dir=cache, image_size=6)
    streamed = zoo.data.load(spec, cache_dir=cache, image_size=6, stream=True)
    assert in_memory.in_shape == streamed.in_shape == (6, 6, 3) and not in_memory.streamed and streamed.streamed
    train = in_memory.splits["train"]["x"]
    for i, key in enumerate(k for k in COLORS if k[0] == "train"):  # sorted by class, then name
        color = COLORS[key] * 3 if len(COLORS[key]) == 1 else COLORS[key]
        assert (train[i] == np.array(color, np.uint8)).all(), (key, train[i, 0, 0])
    _assert_same_reads(in_memory, streamed, batch=2, steps=4)
    assert zoo.data.load(spec, cache_dir=cache, image_size=4).in_shape == (4, 4, 3)  # not the size-6 cache entry
    assert len(list(tmp_path.glob("imagefolder-*.npz"))) == 2


def test_train_on_a_folder_of_two_sizes(folder, tmp_path):
    """train.py --image-size 16 trains 2 steps on the folder (streamed) and records the size in its config."""
    run = tmp_path / "run"
    proc = run_train(["--model", "mlp_resnet", "--width", "16", "--depth", "1", "--batch-size", "2", "--data",
                      f"imagefolder:{folder}", "--image-size", "16", "--stream", "--steps", "2", "--eval-every",
                      "2", "--eval-batch-size", "2", "--run-dir", str(run)], env={"ZOO_CACHE": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads((run / "summary.json").read_text())["steps"] == 2
    assert json.loads((run / "config.json").read_text())["data"]["image_size"] == 16
