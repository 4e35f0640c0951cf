"""The decoded-image cache (zoo.data.cache, keyed in zoo.data.imagefolder): a moved, replaced or relabelled image is
decoded again, an entry that is not what the loader writes is remade, an unwritable or full cache dir is named in
one line, and `off` writes nothing."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from image_helpers import save_image as _save
from PIL import Image

import zoo.data

GRAY = 90


def test_an_image_moved_to_another_class_is_not_served_its_old_label_from_the_cache(tmp_path):
    """The cache's key held the folder's image count, total size and newest mtime; a move between class folders (a
    label corrected) changes none of them, so the cache served [0, 0, 1] for a set now labelled [0, 1, 1]."""

    root, cache_dir = tmp_path / "set", str(tmp_path / "cache")
    for i, rel in enumerate(("train/cat/0.png", "train/cat/1.png", "train/dog/2.png", "test/cat/3.png")):
        _save(root, rel, Image.new("RGB", (4, 4), (i, 0, 0)))
    assert zoo.data.load(f"imagefolder:{root}", cache_dir=cache_dir).splits["train"]["y"].tolist() == [0, 0, 1]
    shutil.move(root / "train/cat/1.png", root / "train/dog/1.png")
    assert zoo.data.load(f"imagefolder:{root}", cache_dir=cache_dir).splits["train"]["y"].tolist() == [0, 1, 1]


def test_an_image_replaced_at_its_size_and_mtime_is_decoded_again(tmp_path):
    """The cache's key was each image's size and mtime: an image replaced by another of the same size with its
    mtime kept (cp -p, rsync -a; a fixed-size format) was served its old pixels, and nothing said so."""
    root, cache_dir = tmp_path / "set", str(tmp_path / "cache")
    for rel in ("train/cat/0.ppm", "train/dog/1.ppm", "test/cat/2.ppm"):
        _save(root, rel, Image.new("RGB", (4, 4), (200, 200, 200)))
    assert zoo.data.load(f"imagefolder:{root}", cache_dir=cache_dir).splits["train"]["x"].max() > 0
    image = root / "train/cat/0.ppm"
    stat = image.stat()
    _save(root, "train/cat/0.ppm", Image.new("RGB", (4, 4), (0, 0, 0)))
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert image.stat().st_size == stat.st_size and image.stat().st_mtime_ns == stat.st_mtime_ns
    assert zoo.data.load(f"imagefolder:{root}", cache_dir=cache_dir).splits["train"]["x"][0].max() == 0


def test_a_cache_entry_without_the_arrays_of_a_set_is_decoded_again(tmp_path):
    """Whatever npz stands at the entry's name was served: one without the train split named a folder with one as
    without ('has no train split (found: )'), one with labels past the classes trained on them."""
    root, cache_dir = tmp_path / "set", tmp_path / "cache"
    for i, rel in enumerate(("train/cat/0.png", "train/dog/1.png", "test/cat/2.png")):
        _save(root, rel, Image.new("RGB", (4, 4), (i, 0, 0)))
    zoo.data.load(f"imagefolder:{root}", cache_dir=str(cache_dir))
    (entry,) = cache_dir.glob("imagefolder-*.npz")
    arrays = dict(np.load(entry))
    for damaged in ({"classes": arrays["classes"]}, {**arrays, "train.y": np.array([0, 9])}):
        np.savez(entry, **damaged)
        ds = zoo.data.load(f"imagefolder:{root}", cache_dir=str(cache_dir))
        assert ds.splits["train"]["y"].tolist() == [0, 1] and ds.eval_split == "test"


def test_a_cached_grayscale_folder_reads_no_image_header(tmp_path, monkeypatch):
    """A grayscale folder's mode is read from every image's header (a colour one's up to its first colour image):
    the in-memory size rule read it at every start, a cache hit included (3 s for 70,000 images). Counted as RGB
    the set's size is an upper bound, which decides while it is within the limit: a cache hit reads no header, and
    the decoded set is grayscale as before."""
    from zoo.data import imagefolder

    for rel in ("train/a/0.png", "train/b/1.png", "test/a/2.png"):
        _save(tmp_path / "set", rel, Image.new("L", (4, 4), GRAY))
    first = zoo.data.load(f"imagefolder:{tmp_path / 'set'}", cache_dir=str(tmp_path / "cache"))
    reads = []
    real = imagefolder._set_mode
    monkeypatch.setattr(imagefolder, "_set_mode", lambda entries: reads.append(1) or real(entries))
    again = zoo.data.load(f"imagefolder:{tmp_path / 'set'}", cache_dir=str(tmp_path / "cache"))
    assert reads == [] and first.splits["train"]["x"].shape == again.splits["train"]["x"].shape == (2, 4, 4, 1)
    np.testing.assert_array_equal(again.splits["train"]["x"], first.splits["train"]["x"])


def test_a_full_disk_writing_the_decoded_cache_names_the_cache_file(tmp_path, monkeypatch):
    """A write error names no file, so a cache write that ran out of space said 'no space left on the device
    writing . (78,432 MB free)': the working folder's disk, not the cache's; no partial file is left."""
    import errno

    from zoo.data import cache
    from zoo.errors import DiskFull

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache.np, "savez", full)
    where = tmp_path / "cache" / "set.npz"
    with pytest.raises(DiskFull, match=f"writing {where} \\(it needs about 0.0 MB, .* are free\\).* --cache-dir off"):
        cache.save(where, {"x": np.zeros(8, np.uint8)})
    assert list(where.parent.iterdir()) == []


def test_a_cache_dir_that_cannot_be_written_is_named_before_decoding(tmp_path, monkeypatch, capsys):
    """`--cache-dir FILE` decoded the whole image set, then failed as 'File exists: FILE' (and an unwritable one as
    'No such file or directory'): the line did not say it was the cache, nor how to choose another. It is now
    checked before anything is decoded, named, with --cache-dir DIR or off as the way out."""
    from PIL import Image

    from zoo.data import imagefolder

    for split in ("train", "test"):
        for cls in ("a", "b"):
            (tmp_path / "set" / split / cls).mkdir(parents=True)
            Image.new("RGB", (4, 4)).save(tmp_path / "set" / split / cls / "0.png")
    (tmp_path / "file").write_text("x")
    monkeypatch.setattr(imagefolder, "_decode", lambda *a: pytest.fail("decoded before the cache was checked"))
    with pytest.raises(ValueError, match=r"the decoded-data cache .*file \(--cache-dir DIR, or off\) cannot be "
                                         r"written: .*file is a file, not a folder"):
        imagefolder.load(str(tmp_path / "set"), cache_dir=str(tmp_path / "file"), stream=False)
    # the default folder ($ZOO_CACHE) that cannot be written: decoded without a cache, after one warning line, as the
    # compile cache goes without one (the run gave the compile cache's warning, then the data cache's error)
    monkeypatch.undo()
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "file"))
    data = imagefolder.load(str(tmp_path / "set"), stream=False)
    assert data.splits["train"]["x"].shape == (2, 4, 4, 3)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("warning: the decoded-data cache") and "without a cache" in err[0], err


def test_cache_dir_off_decodes_each_time_and_writes_nothing(tmp_path, monkeypatch):
    """`--cache-dir off` turns the sweep's compile cache off, but train.py's (the decoded image sets') made a folder
    named 'off' in the current folder and cached there. 'off' now means no cache for both."""
    from PIL import Image

    from zoo.data.imagefolder import load

    for split in ("train", "test"):
        for cls in ("a", "b"):
            (tmp_path / "set" / split / cls).mkdir(parents=True)
            Image.new("RGB", (4, 4), (200 if cls == "a" else 10, 0, 0)).save(tmp_path / "set" / split / cls / "0.png")
    monkeypatch.chdir(tmp_path)
    data = load(str(tmp_path / "set"), cache_dir="off", stream=False)
    assert data.size("train") == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["set"]
