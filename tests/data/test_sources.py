"""zoo.data: sources (imagefolder, text, tfds, synthetic, bundled), batch indices, gather, augmentation, errors."""

from __future__ import annotations

import dataclasses
import tarfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

import zoo.data
from zoo.data import cache
from zoo.data.augment import pad_crop_flip
from zoo.train.step import run_once_options


@pytest.fixture(scope="module")
def synth() -> zoo.data.Dataset:
    return zoo.data.load("synthetic")


# split -> class -> number of images
LAYOUT = {"train": {"cat": 3, "dog": 2, "ant": 1}, "test": {"ant": 1, "dog": 1}}


def _color(split: str, cls: str, i: int) -> tuple[int, int, int]:
    return (sorted(LAYOUT["train"]).index(cls) * 40, i * 50, 200 if split == "train" else 100)


def _make_folder(root: Path, fmt: str = "PNG") -> Path:
    for split, classes in LAYOUT.items():
        for cls, count in classes.items():
            (root / split / cls).mkdir(parents=True)
            for i in range(count):
                img = Image.new("RGB", (8, 6), _color(split, cls, i))
                img.save(root / split / cls / f"{i:03d}.{fmt.lower()}", fmt)
    (root / "train" / "cat" / ".DS_Store").write_bytes(b"junk")
    (root / "train" / "notes.txt").write_text("not an image")
    return root


def _check_folder(ds: zoo.data.Dataset) -> None:
    assert ds.kind == "image" and ds.eval_split == "test"
    assert ds.num_classes == 3 and ds.in_shape == (6, 8, 3)
    assert ds.size("train") == 6 and ds.size("test") == 2
    train, test = ds.splits["train"], ds.splits["test"]
    assert train["x"].dtype == np.uint8 and train["y"].dtype == np.int32
    # classes sorted: ant=0, cat=1, dog=2; within a split, images sorted by class then name
    assert train["y"].tolist() == [0, 1, 1, 1, 2, 2] and test["y"].tolist() == [0, 2]
    assert tuple(train["x"][2, 0, 0]) == _color("train", "cat", 1)
    assert tuple(test["x"][1, 3, 4]) == _color("test", "dog", 0)


def test_imagefolder_directory(tmp_path):
    root = _make_folder(tmp_path / "imgs")
    _check_folder(zoo.data.load(f"imagefolder:{root}", cache_dir=str(tmp_path / "cache")))


def test_imagefolder_tar_gz_and_cache(tmp_path):
    root = _make_folder(tmp_path / "imgs")
    archive = tmp_path / "imgs.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(root, arcname="wrapped")  # a leading folder above split/class/image is allowed
    cache_dir = tmp_path / "cache"
    _check_folder(zoo.data.load(f"imagefolder:{archive}", cache_dir=str(cache_dir)))
    cached = list(cache_dir.glob("imagefolder-*.npz"))
    assert len(cached) == 1 and not list(cache_dir.glob("*.tmp"))
    # a second load reads the cache: poison it and see the poison come back
    arrays = cache.load(cached[0])
    arrays["train.y"] = np.full_like(arrays["train.y"], 2)
    cache.save(cached[0], arrays)
    assert zoo.data.load(f"imagefolder:{archive}", cache_dir=str(cache_dir)).splits["train"]["y"].tolist() == [2] * 6


def test_imagefolder_jpeg_grayscale_and_val_split(tmp_path):
    for split, cls in [("train", "a"), ("train", "b"), ("val", "a")]:
        (tmp_path / split / cls).mkdir(parents=True, exist_ok=True)
        Image.new("L", (4, 4), 77).save(tmp_path / split / cls / "x.jpg", "JPEG", quality=95)
    ds = zoo.data.load(f"imagefolder:{tmp_path}", cache_dir=str(tmp_path / ".cache"))
    assert ds.eval_split == "val" and ds.in_shape == (4, 4, 1) and ds.num_classes == 2
    assert abs(int(ds.splits["train"]["x"][0, 1, 1, 0]) - 77) <= 2


def test_imagefolder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        zoo.data.load(f"imagefolder:{tmp_path / 'nope'}", cache_dir=str(tmp_path))
    bad_tar = tmp_path / "bad.tar.gz"
    bad_tar.write_bytes(b"\x1f\x8b\x08\x00 this is not a gzip stream")
    with pytest.raises(ValueError, match="bad.tar.gz"):
        zoo.data.load(f"imagefolder:{bad_tar}", cache_dir=str(tmp_path))
    root = _make_folder(tmp_path / "imgs")
    (root / "train" / "dog" / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(ValueError, match="broken.png"):
        zoo.data.load(f"imagefolder:{root}", cache_dir=str(tmp_path))
    (root / "train" / "dog" / "broken.png").unlink()
    Image.new("RGB", (5, 5)).save(root / "train" / "dog" / "big.png")
    with pytest.raises(ValueError, match="shape"):
        zoo.data.load(f"imagefolder:{root}", cache_dir=str(tmp_path))
    (root / "train" / "dog" / "big.png").unlink()
    for flag in ({"byte_level": True}, {"seq_len": 64}):  # refused before the set is decoded (cifar10: 19 s)
        with pytest.raises(ValueError, match="leave it out"):
            zoo.data.load(f"imagefolder:{root}", cache_dir=str(tmp_path / "unused"), **flag)
        assert not (tmp_path / "unused").exists()
    only_train = tmp_path / "only_train" / "train" / "a"
    only_train.mkdir(parents=True)
    Image.new("RGB", (2, 2)).save(only_train / "0.png")
    with pytest.raises(ValueError, match="no test or val split"):
        zoo.data.load(f"imagefolder:{only_train.parents[1]}", cache_dir=str(tmp_path))


def test_text_char_level(tmp_path):
    text = "hello world\n" * 50 + "é!"  # 602 characters
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    ds = zoo.data.load(f"text:{path}", seq_len=16)
    assert ds.kind == "text" and ds.eval_split == "val" and ds.in_shape == (16,) and ds.seq_len == 16
    assert ds.tokenizer.chars == sorted(set(text)) and ds.num_classes == len(set(text))
    train, val = ds.splits["train"]["tokens"], ds.splits["val"]["tokens"]
    assert len(train) == int(0.9 * 602) == 541 and len(val) == 61
    assert train.dtype == np.int32
    assert ds.decode(np.concatenate([train, val])) == text
    assert np.array_equal(ds.encode("hello é"), [ds.tokenizer.chars.index(c) for c in "hello é"])
    assert ds.size("train") == 541 - 16
    with pytest.raises(ValueError, match="not in the vocabulary"):
        ds.encode("xyz")


def test_text_byte_level(tmp_path):
    text = "héllo wörld\n" * 40
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    ds = zoo.data.load(f"text:{path}", seq_len=8, byte_level=True)
    raw = text.encode("utf-8")
    assert ds.num_classes == 256 and ds.tokenizer.meta() == {"kind": "byte"}
    tokens = np.concatenate([ds.splits["train"]["tokens"], ds.splits["val"]["tokens"]])
    assert tokens.tolist() == list(raw) and len(ds.splits["train"]["tokens"]) == int(0.9 * len(raw))
    assert ds.decode(tokens) == text and ds.encode("wö").tolist() == list("wö".encode())


def test_text_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        zoo.data.load(f"text:{tmp_path / 'missing.txt'}")
    with pytest.raises(IsADirectoryError, match="is a directory; text:FILE reads one file"):
        zoo.data.load(f"text:{tmp_path}")
    short = tmp_path / "short.txt"
    short.write_text("abc" * 10)
    with pytest.raises(ValueError, match="fewer than seq_len"):
        zoo.data.load(f"text:{short}", seq_len=8)
    with pytest.raises(ValueError, match="--seq-len must be positive"):
        zoo.data.load(f"text:{short}", seq_len=0)
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9 " * 100)
    with pytest.raises(ValueError, match="UTF-8"):
        zoo.data.load(f"text:{latin}", seq_len=8)
    assert zoo.data.load(f"text:{latin}", seq_len=8, byte_level=True).num_classes == 256


def test_image_indices_deterministic_and_epoch_is_permutation(synth):
    ds = synth
    n, batch = ds.size("train"), 100
    per_epoch = n // batch
    a = [ds.indices("train", s, batch, seed=3) for s in range(2 * per_epoch)]
    assert all(i.dtype == np.int32 and i.shape == (batch,) for i in a)
    # a fresh Dataset (a resumed run) gives the same batches, in any order of asking
    again = dataclasses.replace(ds)
    for s in (2 * per_epoch - 1, 0, per_epoch + 5, 7):
        assert np.array_equal(again.indices("train", s, batch, seed=3), a[s])
    epoch0, epoch1 = np.concatenate(a[:per_epoch]), np.concatenate(a[per_epoch:])
    assert len(np.unique(epoch0)) == per_epoch * batch and len(np.unique(epoch1)) == per_epoch * batch
    assert not np.array_equal(epoch0, epoch1)
    assert not np.array_equal(ds.indices("train", 0, batch, seed=4), a[0])
    with pytest.raises(ValueError, match="batch size 5000 must be between 1 and the 1024"):
        ds.indices("test", 0, 5000, seed=0)
    with pytest.raises(ValueError, match="no split"):
        ds.size("validation")


def test_eval_indices_cover_split_once(synth):
    ds = synth
    batches = ds.eval_indices(300)
    assert [len(b) for b in batches] == [300, 300, 300, 124]
    assert np.array_equal(np.concatenate(batches), np.arange(ds.size("test")))


def test_text_indices_gather_and_eval_windows(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("".join(chr(97 + i % 26) for i in range(3000)))
    ds = zoo.data.load(f"text:{path}", seq_len=10)
    idx = ds.indices("train", 5, 32, seed=1)
    assert np.array_equal(idx, ds.indices("train", 5, 32, seed=1))
    assert not np.array_equal(idx, ds.indices("train", 6, 32, seed=1))
    assert idx.min() >= 0 and idx.max() < ds.size("train") == 2700 - 10
    arrays = ds.device_arrays("train")
    batch = jax.jit(ds.gather)(arrays, jnp.asarray(idx))
    tokens = ds.splits["train"]["tokens"]
    assert batch["x"].shape == (32, 10) and batch["y"].shape == (32, 10)
    assert np.array_equal(batch["x"], tokens[idx[:, None] + np.arange(10)])
    assert np.array_equal(batch["x"][:, 1:], batch["y"][:, :-1])
    assert np.array_equal(batch["y"][:, -1], tokens[idx + 10])
    # the last window ends on the last token
    last = jax.jit(ds.gather)(arrays, jnp.array([ds.size("train") - 1], jnp.int32))
    assert int(last["y"][0, -1]) == tokens[-1]
    windows = ds.eval_indices(7)  # val: 300 tokens, 290 windows, non-overlapping starts 0, 10, ..., 280
    assert np.array_equal(np.concatenate(windows), np.arange(0, 290, 10)) and len(windows[-1]) == 1
    thinned = np.concatenate(ds.eval_indices(7, max_eval_windows=5))
    assert len(thinned) == 5 and thinned[0] == 0 and thinned[-1] == 280


def test_image_gather_in_jit(synth):
    ds = synth
    arrays = ds.device_arrays("test")
    idx = np.array([5, 0, 1023], np.int32)
    batch = jax.jit(ds.gather)(arrays, jnp.asarray(idx))
    assert batch["x"].dtype == jnp.uint8 and batch["x"].shape == (3, 32, 32, 3)
    assert np.array_equal(batch["x"], ds.splits["test"]["x"][idx])
    assert np.array_equal(batch["y"], ds.splits["test"]["y"][idx])


def test_synthetic_is_fixed_and_learnable(synth):
    a, b = synth, zoo.data.load("synthetic")
    assert np.array_equal(a.splits["train"]["x"], b.splits["train"]["x"])
    assert a.in_shape == (32, 32, 3) and a.num_classes == 10 and a.size("train") == 4096
    counts = np.bincount(a.splits["train"]["y"], minlength=10)
    assert counts.min() > 100  # every class present in quantity
    # a nearest-class-mean classifier already beats chance by far, so the labels depend on the pixels
    x = a.splits["train"]["x"].reshape(4096, -1).astype(np.float32)
    means = np.stack([x[a.splits["train"]["y"] == c].mean(0) for c in range(10)])
    xt = a.splits["test"]["x"].reshape(1024, -1).astype(np.float32)
    pred = (xt @ means.T - 0.5 * (means**2).sum(1)).argmax(1)
    assert (pred == a.splits["test"]["y"]).mean() > 0.3


def test_synthetic_text():
    ds = zoo.data.load("synthetic:text", seq_len=32)
    assert ds.kind == "text" and ds.num_classes == 64 and ds.in_shape == (32,)
    tokens = ds.splits["train"]["tokens"]
    # each token has at most 4 successors
    pairs = np.unique(tokens[:-1].astype(np.int64) * 64 + tokens[1:])
    assert np.bincount(pairs // 64, minlength=64).max() <= 4


def test_pad_crop_flip(synth):
    x = jnp.asarray(synth.splits["train"]["x"][:64])
    ones = jnp.ones((16, 8, 8, 1), jnp.float32)

    @jax.jit
    def cases(key):  # one compilation for all cases
        k0, k1, k2 = jax.random.split(key, 3)
        return (pad_crop_flip(k0, x), pad_crop_flip(k0, x), pad_crop_flip(k1, x, pad=0),
                pad_crop_flip(k2, ones, pad=2, mode="constant"))

    key = jax.random.key(0)
    out, repeat, unshifted, zeros = cases.lower(key).compile(run_once_options())(key)  # runs once: backend opt. off
    assert out.shape == x.shape and out.dtype == jnp.uint8
    assert not np.array_equal(out, x) and np.array_equal(out, repeat)
    # pad 0: no shift, so each image comes back as itself or mirrored, and both happen
    kept = np.all(unshifted == x, axis=(1, 2, 3))
    flipped = np.all(unshifted == x[:, :, ::-1], axis=(1, 2, 3))
    assert np.all(kept | flipped) and kept.any() and flipped.any()
    # zero padding: shifted crops of an all-ones image bring in zeros
    assert zeros.dtype == jnp.float32 and float(zeros.min()) == 0.0 and float(zeros.max()) == 1.0


def test_tfds_mock_no_network(tmp_path):
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=12, policy=tfds.testing.MockPolicy.USE_CODE):
        ds = zoo.data.load("tfds:mnist", data_dir=str(tmp_path))
    assert ds.kind == "image" and ds.eval_split == "test" and ds.num_classes == 10
    assert ds.in_shape == (28, 28, 1) and ds.size("train") == 12 and ds.size("test") == 12
    assert ds.splits["train"]["x"].dtype == np.uint8 and ds.splits["train"]["y"].dtype == np.int32
    assert 0 <= ds.splits["train"]["y"].min() and ds.splits["train"]["y"].max() < 10
    with tfds.testing.mock_data(num_examples=3, policy=tfds.testing.MockPolicy.USE_CODE):
        assert zoo.data.load("tfds:cifar10:train", data_dir=str(tmp_path)).eval_split == "train"
        with pytest.raises(ValueError, match="unknown tfds dataset 'no_such_set'"):
            zoo.data.load("tfds:no_such_set")


def test_tfds_images_of_16_bits_are_scaled_not_wrapped():
    from zoo.data.tfds_source import TfdsImages

    levels = np.array([0, 1000, 40000, 65535], np.uint16).reshape(2, 2, 1)
    split = TfdsImages([{"image": levels, "label": 1}], "train")
    assert split.read(np.array([0]))["x"][0, :, :, 0].tolist() == [[0, 4], [156, 255]]  # a cast: 0, 232, 64, 255
    with pytest.raises(ValueError, match="its images are float32, whose range is not known"):
        TfdsImages([{"image": levels.astype(np.float32), "label": 1}], "train").read(np.array([0]))


def test_bundled_shakespeare():
    ds = zoo.data.load("shakespeare", seq_len=256)
    assert ds.num_classes == 65 and len(ds.tokenizer.chars) == 65
    assert len(ds.splits["train"]["tokens"]) == 1_003_854 and len(ds.splits["val"]["tokens"]) == 111_540
    assert ds.decode(ds.splits["train"]["tokens"][:14]) == "First Citizen:"


@pytest.mark.parametrize("spec", ["nope", "imagefolder:", "text:", "tfds:", "synthetic:video", "cifar10:x"])
def test_bad_specs(spec):
    with pytest.raises(ValueError, match="unknown data spec") as err:
        zoo.data.load(spec)
    assert "imagefolder:DIR" in str(err.value) and "tokens:DIR" in str(err.value) and "shakespeare" in str(err.value)


def test_empty_spec():
    with pytest.raises(ValueError, match="^--data must not be empty$"):
        zoo.data.load("")


def test_missing_bundled_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="cifar10-jpeg.tar.gz"):
        zoo.data.load("cifar10", data_dir=str(tmp_path))


@pytest.mark.slow
def test_bundled_cifar10():
    ds = zoo.data.load("cifar10")  # the default cache: a first run decodes, later runs (and tests) read it
    assert ds.size("train") == 50_000 and ds.size("test") == 10_000 and ds.eval_split == "test"
    assert ds.num_classes == 10 and ds.in_shape == (32, 32, 3)
    assert np.bincount(ds.splits["train"]["y"]).tolist() == [5000] * 10
    assert np.bincount(ds.splits["test"]["y"]).tolist() == [1000] * 10
