"""Referee round 9, data and runs: image folders mixing modes and holding other folders, ..."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import zoo.data

RED, GRAY = (200, 30, 60), 90


def _save(root: Path, rel: str, image: Image.Image) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


@pytest.mark.parametrize("stream", [False, True])
def test_a_colour_folder_whose_first_image_is_grayscale_keeps_its_colour(tmp_path, stream):
    """The first training image (train/a/0.png, grayscale: 16-bit here) set the mode of the whole set: every colour
    image after it was read in grayscale, red (200, 30, 60) as 94. Any colour image makes the set RGB."""
    root = tmp_path / "set"
    gray16 = Image.fromarray(np.full((5, 7), GRAY * 257, np.uint16))
    _save(root, "train/a/0.png", gray16)
    _save(root, "train/b/1.jpg", Image.new("CMYK", (7, 5), (0, 0, 0, 0)))
    _save(root, "train/b/2.png", Image.new("RGBA", (7, 5), (*RED, 255)))
    _save(root, "test/b/3.png", Image.new("RGB", (7, 5), RED))
    data = zoo.data.load(f"imagefolder:{root}", cache_dir="off", stream=stream)
    assert tuple(data.in_shape) == (5, 7, 3)
    if stream:
        x = data.readers["train"].read(np.arange(3))["x"]
        test = data.readers["test"].read(np.arange(1))["x"]
    else:
        x, test = data.splits["train"]["x"], data.splits["test"]["x"]
    assert x[0, 2, 3].tolist() == [GRAY] * 3  # the grayscale image, its gray in each channel
    assert x[2, 2, 3].tolist() == list(RED) and test[0, 0, 0].tolist() == list(RED)
    assert x[1, 0, 0].tolist() == [255, 255, 255]  # CMYK (0, 0, 0, 0) is white


def test_a_grayscale_folder_stays_one_channel(tmp_path):
    root = tmp_path / "set"
    for i, rel in enumerate(("train/a/0.png", "train/b/1.png", "test/a/2.png")):
        _save(root, rel, Image.new("LA", (4, 4), (40 * i, 255)) if i else Image.new("1", (4, 4), 1))
    data = zoo.data.load(f"imagefolder:{root}", cache_dir="off")
    assert tuple(data.in_shape) == (4, 4, 1)
    assert data.splits["train"]["x"][:, 0, 0, 0].tolist() == [255, 40]


def test_classes_of_folders_that_are_neither_train_nor_eval_are_no_labels(tmp_path):
    """A 'val' beside 'test' (the eval split) added its classes to the labels: 3 outputs for a set of 2 classes, the
    unused 'aardvark' taking label 0 and shifting a and b to 1 and 2."""
    root = tmp_path / "set"
    for rel in ("train/a/0.png", "train/b/1.png", "test/b/2.png", "val/aardvark/3.png"):
        _save(root, rel, Image.new("RGB", (4, 4), RED))
    data = zoo.data.load(f"imagefolder:{root}", cache_dir=str(tmp_path / "cache"))
    assert data.num_classes == 2 and sorted(data.splits) == ["test", "train"]
    assert data.splits["train"]["y"].tolist() == [0, 1] and data.splits["test"]["y"].tolist() == [1]


@pytest.mark.parametrize("top", ["", "top/"])
def test_an_image_in_a_subfolder_of_a_class_folder_is_one_line(tmp_path, top):
    """train/b/extra/4.png was read as split 'b', class 'extra': left out without a word, and its class counted as
    a label (3 outputs for 2 classes). Under an archive's top folder too; a top folder named like a split is none."""
    import tarfile

    root = tmp_path / "set"
    for rel in ("train/a/0.png", "train/b/1.png", "test/b/2.png"):
        _save(root, top + rel, Image.new("RGB", (4, 4), RED))
    archive = tmp_path / "set.tar"
    with tarfile.open(archive, "w") as tf:
        tf.add(root, "test")  # test/[top/]train/a/0.png: its top folder 'test' is no split
    _save(root, top + "train/b/.ipynb_checkpoints/1-checkpoint.png", Image.new("RGB", (4, 4), RED))  # hidden: not read
    assert zoo.data.load(f"imagefolder:{archive}", cache_dir="off").num_classes == 2
    assert zoo.data.load(f"imagefolder:{root}", cache_dir="off").size("train") == 2
    _save(root, top + "train/b/extra/4.png", Image.new("RGB", (4, 4), RED))
    with pytest.raises(ValueError, match=f"{top}train/b/extra/4.png lies in a subfolder of the class folder "
                       f"{top}train/b, which is not read"):
        zoo.data.load(f"imagefolder:{root}", cache_dir="off")


def test_a_full_disk_during_a_prepare_names_the_file_and_leaves_no_out(tmp_path, monkeypatch, capsys):
    """A write error names no file, so a prepare that ran out of space said 'no space left on the device writing .
    (79,107 MB free)', the free space of the working folder's disk, not of --out's."""
    import errno

    from zoo.cli.prepare import main
    from zoo.data import prepare

    class FullDisk(prepare.ByteTokenizer):
        def encode(self, text: str) -> np.ndarray:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(prepare, "ByteTokenizer", FullDisk)
    corpus, out = tmp_path / "corpus.txt", tmp_path / "tokens"
    corpus.write_text("some text\n" * 50)
    with pytest.raises(SystemExit) as stop:
        main(["text", str(corpus), "--out", str(out), "--tokenizer", "byte"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 1 and err.startswith(f"error: no space left on the device writing {out}/all.bin.partial")
    assert not out.exists()


def test_a_linked_class_folder_is_read_and_a_link_to_a_folder_above_does_not_loop(tmp_path):
    """os.walk follows no links by default: train/dog linked in from elsewhere (as ImageNet subsets are made) was
    skipped without a word, leaving 2 classes and 2 training images of 3 and 4."""
    elsewhere, root = tmp_path / "elsewhere", tmp_path / "set"
    for rel in ("train/bird/0.png", "train/cat/0.png", "test/cat/1.png"):
        _save(root, rel, Image.new("RGB", (4, 4), RED))
    for i in range(2):
        _save(elsewhere, f"dog/{i}.png", Image.new("RGB", (4, 4), (i, 0, 0)))
    (root / "train" / "dog").symlink_to(elsewhere / "dog", target_is_directory=True)
    (root / "train" / "cat" / "loop").symlink_to(root, target_is_directory=True)
    data = zoo.data.load(f"imagefolder:{root}", cache_dir="off")
    assert data.num_classes == 3 and data.splits["train"]["y"].tolist() == [0, 1, 2, 2]
    assert data.splits["train"]["x"][3, 0, 0].tolist() == [1, 0, 0]


def test_a_prepare_reads_a_linked_folder_of_the_corpus(tmp_path):
    """Path.rglob follows no links either (Python 3.11): a folder of the corpus linked in from elsewhere was left
    out of the token directory without a word."""
    from zoo.data.prepare import text_files

    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    (corpus / "a").mkdir(parents=True)
    elsewhere.mkdir()
    (corpus / "a" / "one.txt").write_text("one\n")
    (elsewhere / "two.txt").write_text("two\n")
    (corpus / "b").symlink_to(elsewhere, target_is_directory=True)
    (corpus / "a" / "up").symlink_to(corpus, target_is_directory=True)
    assert text_files(corpus) == [corpus / "a" / "one.txt", corpus / "b" / "two.txt"]


def test_an_archive_reads_its_links_as_the_files_they_name(tmp_path):
    """tar stores a file's second name (a hard link) as a link member, which is no regular file: the archive of a
    folder with 4 training images read 2. A link to no file of the archive is one line naming it."""
    import os
    import tarfile

    root = tmp_path / "set"
    for i, rel in enumerate(("train/cat/0.png", "train/dog/0.png", "test/cat/1.png")):
        _save(root, rel, Image.new("RGB", (4, 4), (i, 0, 0)))
    os.link(root / "train/cat/0.png", root / "train/cat/1.png")
    (root / "train/dog/1.png").symlink_to("0.png")
    archive = tmp_path / "set.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(root, "set")
    data = zoo.data.load(f"imagefolder:{archive}", cache_dir="off")
    assert zoo.data.load(f"imagefolder:{root}", cache_dir="off").size("train") == data.size("train") == 4
    assert data.splits["train"]["x"][:, 0, 0, 0].tolist() == [0, 0, 1, 1]
    dangling = tarfile.TarInfo("set/train/dog/2.png")
    dangling.type, dangling.linkname = tarfile.SYMTYPE, "gone.png"
    with tarfile.open(tmp_path / "dangling.tar", "w") as tf:
        tf.add(root, "set")
        tf.addfile(dangling)
    with pytest.raises(ValueError, match="set/train/dog/2.png in archive .* links to gone.png, which is no file"):
        zoo.data.load(f"imagefolder:{tmp_path / 'dangling.tar'}", cache_dir="off")


def test_an_image_moved_to_another_class_is_not_served_its_old_label_from_the_cache(tmp_path):
    """The cache's key held the folder's image count, total size and newest mtime; a move between class folders (a
    label corrected) changes none of them, so the cache served [0, 0, 1] for a set now labelled [0, 1, 1]."""
    import shutil

    root, cache_dir = tmp_path / "set", str(tmp_path / "cache")
    for i, rel in enumerate(("train/cat/0.png", "train/cat/1.png", "train/dog/2.png", "test/cat/3.png")):
        _save(root, rel, Image.new("RGB", (4, 4), (i, 0, 0)))
    assert zoo.data.load(f"imagefolder:{root}", cache_dir=cache_dir).splits["train"]["y"].tolist() == [0, 0, 1]
    shutil.move(root / "train/cat/1.png", root / "train/dog/1.png")
    assert zoo.data.load(f"imagefolder:{root}", cache_dir=cache_dir).splits["train"]["y"].tolist() == [0, 1, 1]


def test_file_names_that_are_not_utf8_stream(tmp_path):
    """A streamed split stores its file names as bytes; str.encode refused a name that is not UTF-8 (os.walk gives
    its bytes as surrogates): 'unexpected UnicodeEncodeError' where the in-memory path read the same folder."""
    import os

    root = os.fsencode(tmp_path / "set")
    for i, rel in enumerate((b"train/caf\xe9/0.png", b"train/dog/1\xff.png", b"test/dog/2.png")):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.new("RGB", (4, 4), (i, 0, 0)).save(os.fsdecode(path), "PNG")
    data = zoo.data.load(f"imagefolder:{os.fsdecode(root)}", cache_dir="off", stream=True)
    batch = data.readers["train"].read(np.arange(2))
    assert batch["x"][:, 0, 0, 0].tolist() == [0, 1] and batch["y"].tolist() == [0, 1]


def test_a_corrupt_image_met_while_streaming_is_one_expected_line(tmp_path, capsys):
    """A truncated PNG read by the stream was 'error: unexpected DataError: ... (full traceback in RUN/error-...log)':
    DataError was no ZooError, so the boundary took a corrupt file for a bug in zoo."""
    from zoo.cli.boundary import boundary

    root = tmp_path / "set"
    for rel in ("train/a/0.png", "train/b/1.png", "test/a/2.png"):
        _save(root, rel, Image.new("RGB", (4, 4), RED))
    whole = (root / "train/b/1.png").read_bytes()
    (root / "train/b/1.png").write_bytes(whole[:len(whole) // 2])
    data = zoo.data.load(f"imagefolder:{root}", cache_dir="off", stream=True)

    @boundary
    def main() -> None:
        next(zoo.data.stream(data, "train", batch_size=2, seed=0))

    with pytest.raises(SystemExit) as stop:
        main()
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 1 and err.startswith("error: reading step 0 of split 'train' failed: cannot decode "
                                                   f"image {root / 'train/b/1.png'}") and "\n" not in err


def test_a_damaged_bpe_model_is_one_line_naming_it(tmp_path):
    """sentencepiece raises a RuntimeError naming its C++ check ('INTERNAL: src/sentencepiece_processor.cc(109)
    [model_proto->ParseFromArray(...)]'), which the boundary took for a bug: 'unexpected RuntimeError'."""
    from zoo.data.tokenizer import from_meta

    (tmp_path / "tokenizer.model").write_bytes(b"\x0a\x05hello" * 10)
    with pytest.raises(ValueError, match=f"the BPE model {tmp_path / 'tokenizer.model'} named in .*meta.json is not a "
                       r"sentencepiece model \(70 bytes"):
        from_meta({"kind": "bpe", "model": "tokenizer.model"}, tmp_path)


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


def test_a_bpe_trains_on_a_corpus_without_line_ends(tmp_path):
    """sentencepiece skips a sentence over 4,192 bytes without a word: a corpus of one 12,000-character line
    trained on nothing ('sentencepiece could not train a BPE of size 300: INTERNAL: src/trainer_interface.cc(467)
    [!sentences_.empty()]'). Lines are cut into pieces of 1,024 characters to train on."""
    from zoo.data.tokenizer import BPE_MIN, BPETokenizer

    text = "the cat sat on the mat. " * 500
    bpe = BPETokenizer.fit(iter([text]), 300)
    assert BPE_MIN < bpe.vocab_size <= 300
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text and len(ids) < len(text) / 3  # merges learnt: 'the cat' is a few pieces, not 7


def test_a_prepare_reads_a_file_without_line_ends_a_chunk_at_a_time(tmp_path, monkeypatch):
    """Each chunk ran on to the next line end: a file without line ends was read whole at once (the rest of the
    line after the first chunk), so memory grew with the file. A chunk is now at most twice CHUNK characters."""
    from zoo.data import prepare

    monkeypatch.setattr(prepare, "CHUNK", 10)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("x" * 95 + "\nshort\n" + "y" * 12)
    chunks = list(prepare.read_chunks([corpus], "strict"))
    assert "".join(chunks) == corpus.read_text() and max(map(len, chunks)) == 20
    assert "x" * 15 + "\n" in chunks  # a chunk still runs on to its line end when that is near


@pytest.mark.parametrize("spec", ["byte:", "char:"])
def test_a_tokenizer_with_an_empty_size_is_refused(spec):
    """'byte:' and 'char:' (a size from an unset variable after them) were read as 'byte' and 'char'."""
    from zoo.data.tokenizer import parse

    assert parse(spec[:-1]) == (spec[:-1], None)
    with pytest.raises(ValueError, match=f"unknown tokenizer '{spec}'"):
        parse(spec)


def test_tiff_and_netpbm_images_are_images(tmp_path):
    """.tif, .tiff, .ppm and .pgm files (torchvision's ImageFolder reads them) were skipped without a word: a class
    of TIFF scans beside PNG ones was missing from the labels."""
    root = tmp_path / "set"
    for rel in ("train/a/0.png", "train/b/1.tif", "train/c/2.tiff", "train/d/3.ppm", "test/a/4.pgm"):
        _save(root, rel, Image.new("RGB" if rel.endswith("ppm") else "L", (4, 4), GRAY))
    data = zoo.data.load(f"imagefolder:{root}", cache_dir="off")
    assert data.num_classes == 4 and data.size("test") == 1 and tuple(data.in_shape) == (4, 4, 3)


def test_links_between_two_folders_do_not_loop_the_walk(tmp_path):
    """A/toB -> B beside B/toA -> A: each link is to no folder above its own, and the walk of 145a800 went round
    A/toB/toA/toB/... without end. A link back to a folder the walk came through is not followed."""
    from zoo.data.walk import files_under

    for name in ("A", "B"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.txt").write_text(name)
    (tmp_path / "A" / "toB").symlink_to(tmp_path / "B", target_is_directory=True)
    (tmp_path / "B" / "toA").symlink_to(tmp_path / "A", target_is_directory=True)
    (tmp_path / "B" / "root").symlink_to("/", target_is_directory=True)
    found = sorted(str(p.relative_to(tmp_path)) for p in itertools.islice(files_under(tmp_path), 10))
    assert found == ["A/A.txt", "A/toB/B.txt", "B/B.txt", "B/toA/A.txt"]


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
