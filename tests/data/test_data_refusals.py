"""Data that cannot train is refused in one line before a run dir exists (issue 16 items 10 and 13): a tfds set that
is not prepared (offline: never a download attempt; the line says where it looked and how to prepare it), and a
classification set with fewer than 2 classes, from every source that yields classes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_utils import clean_error, run_main_many
from PIL import Image

import zoo.data
from zoo.data import synthetic

TINY = ["--model", "mlp_resnet", "--width", "16", "--depth", "2", "--batch-size", "2", "--steps", "1"]


def image_folder(root: Path, classes: dict[str, list[str]]) -> Path:
    """root/split/class/i.png, two 4x4 images per class."""
    for split, names in classes.items():
        for c in names:
            (root / split / c).mkdir(parents=True)
            for i in range(2):
                Image.fromarray(np.full((4, 4, 3), 60 * i + 10, np.uint8)).save(root / split / c / f"{i}.png")
    return root


def test_single_class_folder_and_unprepared_tfds_are_one_line_and_leave_nothing(tmp_path):
    cats = image_folder(tmp_path / "cats", {"train": ["cat"], "test": ["cat"]})
    empty = tmp_path / "tfds"
    empty.mkdir()
    runs = [tmp_path / "r1", tmp_path / "r2"]
    single, offline = [clean_error(code, err) for code, err in run_main_many(
        [[*TINY, "--data", f"imagefolder:{cats}", "--run-dir", str(runs[0])],
         [*TINY, "--data", "tfds:mnist", "--data-dir", str(empty), "--run-dir", str(runs[1])]],
        env={"ZOO_CACHE": str(tmp_path / "cache")})]
    assert "has 1 class" in single and "(classes: cat)" in single and str(cats) in single, single
    assert "'mnist' is not prepared" in offline and str(empty / "mnist") in offline, offline
    assert "tfds build mnist --file_format array_record" in offline and "--data-dir" in offline, offline
    assert not any(r.exists() for r in runs) and not any(empty.iterdir())  # nothing downloaded or written


def test_every_source_refuses_fewer_than_two_classes(tmp_path):
    """A train split with one class (the other only in test), in memory and streamed; a generated set; a
    one-character text file."""
    half = image_folder(tmp_path / "half", {"train": ["cat"], "test": ["cat", "dog"]})
    for stream in (False, True):
        with pytest.raises(ValueError, match=r"train split of image folder .* has 1 class"):
            zoo.data.load(f"imagefolder:{half}", cache_dir=str(tmp_path / "cache"), stream=stream)
    with pytest.raises(ValueError, match="the data set has 1 class"):
        synthetic.images(num_train=8, num_test=8, num_classes=1)
    (tmp_path / "a.txt").write_text("a" * 100)
    with pytest.raises(ValueError, match=r"a\.txt has 1 token in its vocabulary"):
        zoo.data.load(f"text:{tmp_path / 'a.txt'}", seq_len=8)


def test_images_that_cannot_fit_in_host_memory_are_refused_before_decoding(tmp_path, monkeypatch):
    """An --image-size (or a forced in-memory folder) whose decoded pixels exceed the host's available memory is one
    line before any is decoded, not the kernel's OOM killer (here the host is made to have 100 kB)."""
    from zoo.data import streamed

    folder = image_folder(tmp_path / "imgs", {"train": ["a", "b"], "test": ["a", "b"]})
    monkeypatch.setattr(streamed, "host_available", lambda: 100_000)
    for spec, options, what in [
        (f"imagefolder:{folder}", {"image_size": 200}, "one image at --image-size 200"),  # 120 kB
        ("synthetic", {"image_size": 8}, "the synthetic set at --image-size 8"),  # 5120 x 192 B
    ]:
        with pytest.raises(ValueError, match=f"{what} takes .* GB decoded, more than the 0.0 GB of memory this host"):
            zoo.data.load(spec, cache_dir=str(tmp_path / "cache"), **options)
    monkeypatch.setattr(streamed, "host_available", lambda: 100)
    with pytest.raises(ValueError, match="let it stream"):
        zoo.data.load(f"imagefolder:{folder}", cache_dir=str(tmp_path / "cache"), stream=False)  # 16 x 48 B
    assert not (tmp_path / "cache").exists()


def test_an_image_beyond_pils_pixel_limit_is_one_line(tmp_path, monkeypatch):
    """An image with more pixels than PIL opens (its decompression-bomb guard: 20000 x 20000 by default; here the
    limit is made 4 pixels) was an unexpected DecompressionBombError, in memory and streamed."""
    from PIL import Image

    folder = image_folder(tmp_path / "imgs", {"train": ["a", "b"], "test": ["a", "b"]})
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 4)
    for stream in (False, True):  # a streamed set decodes its first image to learn the shape
        with pytest.raises(ValueError, match=r"cannot decode image .*\.png: Image size \(16 pixels\) exceeds"):
            zoo.data.load(f"imagefolder:{folder}", cache_dir=str(tmp_path / "cache"), stream=stream)


def test_a_fifo_named_like_an_image_is_refused_not_read(tmp_path):
    """A FIFO named x.png in an image folder hung the load for ever (its read waits for a writer): one line."""
    import os

    from zoo.data.config import DataConfig

    root = image_folder(tmp_path / "set", {"train": ["a", "b"], "test": ["a", "b"]})
    os.mkfifo(root / "train" / "a" / "x.png")
    with pytest.raises(ValueError, match=r"x\.png is no regular file \(a FIFO, socket or device\); remove it"):
        zoo.data.load(DataConfig(name=f"imagefolder:{root}", cache_dir="off"))


def test_an_odd_image_in_a_stream_is_named_against_the_sets_shape(tmp_path):
    """A streamed batch was checked against its own first image, so a batch that began with the odd image blamed a
    regular one: each image is checked against the set's shape (its first training image's)."""
    from zoo.data.image_decode import decode_chunk

    for name, side in (("odd.png", 6), ("even.png", 4)):
        Image.fromarray(np.zeros((side, side, 3), np.uint8)).save(tmp_path / name)
    items = [(str(tmp_path / n), str(tmp_path / n)) for n in ("odd.png", "even.png")]
    with pytest.raises(ValueError, match=r"odd\.png has shape \(6, 6, 3\), but the first training image has \(4, 4, "
                                         r"3\); pass --image-size N"):
        decode_chunk(items, "RGB", like=("the first training image", (4, 4, 3)))
    with pytest.raises(ValueError, match=r"even\.png has shape \(4, 4, 3\), but .*odd\.png has \(6, 6, 3\)"):
        decode_chunk(items, "RGB")
    assert decode_chunk(items[1:], "RGB", like=("the first training image", (4, 4, 3))).shape == (1, 4, 4, 3)
