"""Image folders and archives (zoo.data.imagefolder, zoo.data.walk, zoo.data.cache): every image mode and format
torchvision's ImageFolder reads, colour kept where any image has it, labels only from the train and eval splits'
class folders, links followed without loops, and a bad archive, image or layout said in one line. The decoded cache:
test_image_cache.py."""

from __future__ import annotations

import itertools
import os
import shutil
import tarfile

import numpy as np
import pytest
from image_helpers import save_image as _save
from PIL import Image

import zoo.data

RED, GRAY = (200, 30, 60), 90


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


def test_tiff_and_netpbm_images_are_images(tmp_path):
    """.tif, .tiff, .ppm and .pgm files (torchvision's ImageFolder reads them) were skipped without a word: a class
    of TIFF scans beside PNG ones was missing from the labels."""
    root = tmp_path / "set"
    for rel in ("train/a/0.png", "train/b/1.tif", "train/c/2.tiff", "train/d/3.ppm", "test/a/4.pgm"):
        _save(root, rel, Image.new("RGB" if rel.endswith("ppm") else "L", (4, 4), GRAY))
    data = zoo.data.load(f"imagefolder:{root}", cache_dir="off")
    assert data.num_classes == 4 and data.size("test") == 1 and tuple(data.in_shape) == (4, 4, 3)


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


def test_a_link_to_a_missing_image_is_named_as_one(tmp_path):
    root = tmp_path / "set"
    for rel in ("train/cat/0.png", "train/dog/1.png", "test/cat/2.png"):
        _save(root, rel, Image.new("RGB", (4, 4)))
    os.symlink(tmp_path / "gone.png", root / "train/cat/9.png")
    with pytest.raises(ValueError, match=r"train/cat/9.png is a link to .*gone.png, which does not exist"):
        zoo.data.load(f"imagefolder:{root}", cache_dir="off")


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


def test_a_16_bit_grayscale_image_keeps_its_levels(tmp_path):
    """A 16-bit grayscale PNG (PIL's mode I;16, common for scans and microscopy) was decoded as RGB through PIL's
    convert, which clips at 255: levels 0, 4369, ..., 65535 all came out 255 but the zeros, silently. It decodes
    now as grayscale scaled by 255 / 65535 (0, 17, ..., 255), and 32-bit pixels, whose range is unknown, are one
    line."""
    import io

    import numpy as np
    from PIL import Image

    from zoo.data.image_decode import decode_one
    from zoo.data.imagefolder import load

    levels = (np.arange(16, dtype=np.uint16).reshape(4, 4) * 4369)
    for split in ("train", "test"):
        for k, cls in enumerate(("a", "b")):
            (tmp_path / "set" / split / cls).mkdir(parents=True)
            Image.fromarray(levels if k else levels[::-1]).save(tmp_path / "set" / split / cls / "0.png")
    data = load(str(tmp_path / "set"), cache_dir="off", stream=False)
    x = data.splits["train"]["x"]
    assert x.shape == (2, 4, 4, 1) and x.dtype == np.uint8
    np.testing.assert_array_equal(x[1, ..., 0], np.arange(16).reshape(4, 4) * 17)
    for maxval in (65535, 1023):  # a 16-bit PGM (PIL's mode I, scaled by PIL to 0..65535), a 10-bit one
        pgm = b"P5\n4 4\n%d\n" % maxval + (levels.astype(np.int64) * maxval // 65535).astype(">u2").tobytes()
        np.testing.assert_array_equal(decode_one("scan.pgm", pgm, "L")[..., 0], np.arange(16).reshape(4, 4) * 17)
    tiff = io.BytesIO()
    Image.fromarray(levels.astype(np.int32)).save(tiff, format="TIFF")
    with pytest.raises(ValueError, match=r"cannot decode image wide.tif: its pixels are 32-bit integers .* convert it "
                                         "to 8 or 16 bits"):
        decode_one("wide.tif", tiff.getvalue())


def test_an_eval_class_without_train_images_is_refused(tmp_path):
    """An image folder whose test split holds a class the train split lacks (a misspelled folder: train/cat,
    test/Cat) trained with that label never seen and scored its test images wrong whatever the model did,
    silently (the eval accuracy of such a set: 0.0). Now one line naming the class, before anything is decoded
    (nothing is cached) or streamed."""
    from PIL import Image

    from zoo.data.imagefolder import load

    for split, classes in (("train", ("cat", "dog")), ("test", ("Cat", "dog"))):
        for cls in classes:
            (tmp_path / "set" / split / cls).mkdir(parents=True)
            Image.new("RGB", (4, 4)).save(tmp_path / "set" / split / cls / "0.png")
    for stream in (False, True):
        with pytest.raises(ValueError, match=r"the test split of image folder .* has classes the train split lacks "
                                             r"\(Cat\)"):
            load(str(tmp_path / "set"), cache_dir=str(tmp_path / "cache"), stream=stream)
    assert not list((tmp_path / "cache").glob("*.npz"))


def test_an_archive_that_is_no_tar_says_why_in_its_one_line(tmp_path):
    """An --data imagefolder:X.tar.gz that is no archive was 'corrupt or unreadable archive X: file could not be
    opened successfully:', the line a user sees ending at the colon (tarfile gives the reasons on the next lines)."""
    from zoo.data.imagefolder import load

    (tmp_path / "junk.tar.gz").write_text("junk\n")
    with pytest.raises(ValueError) as refused:
        load(str(tmp_path / "junk.tar.gz"), cache_dir=str(tmp_path / "cache"))
    line = str(refused.value)
    assert "\n" not in line and "not a gzip file" in line, line


def test_splits_of_two_folders_are_refused_not_merged(tmp_path):
    """Two sets side by side (a/train, a/test, b/train, b/test) were read as one, images and classes merged; a backup
    copy inside a set (backup/train beside train) counted every image twice. One line naming the folders."""
    two, backed = tmp_path / "two", tmp_path / "backed"
    for rel in ("train/a/0.png", "train/b/1.png", "test/b/2.png"):
        for root in (two / "setA", two / "setB", backed, backed / "backup"):
            _save(root, rel, Image.new("RGB", (4, 4), RED))
    with pytest.raises(ValueError, match=r"image folder .*two holds train or test splits in 2 folders "
                                         r"\(setA/, setB/\), which would be read as one data set"):
        zoo.data.load(f"imagefolder:{two}", cache_dir="off")
    with pytest.raises(ValueError, match=r"in 2 folders \(backup/, the top\)"):
        zoo.data.load(f"imagefolder:{backed}", cache_dir="off")
    shutil.rmtree(backed / "backup")
    assert zoo.data.load(f"imagefolder:{backed}", cache_dir="off").size("train") == 2
    assert zoo.data.load(f"imagefolder:{two / 'setB'}", cache_dir="off").size("train") == 2


def test_a_zip_or_an_image_given_as_the_folder_says_what_it_is(tmp_path):
    import zipfile

    _save(tmp_path, "one.png", Image.new("RGB", (4, 4), RED))
    with zipfile.ZipFile(tmp_path / "set.zip", "w") as z:
        z.write(tmp_path / "one.png", "train/a/one.png")
    for name, what in (("set.zip", "is a zip archive, which zoo does not read"), ("one.png", "is an image; give")):
        with pytest.raises(ValueError, match=f"imagefolder:{tmp_path / name} {what}"):
            zoo.data.load(f"imagefolder:{tmp_path / name}", cache_dir=str(tmp_path / "cache"))
    assert not (tmp_path / "cache").exists()


def test_a_tar_ending_in_a_zip_member_or_mixing_dot_prefixes_is_read(tmp_path):
    """A tar whose last member is zip-format (a .docx: zip's directory sits in the file's last 64 KiB) was taken for
    a zip and refused; a tar of `./train` and `test` (names with and without './') for splits in two folders."""
    import io
    import tarfile
    import zipfile

    root = tmp_path / "set"
    for rel in ("train/a/0.png", "train/b/1.png", "test/a/2.png"):
        _save(root, rel, Image.new("RGB", (4, 4), RED))
    docx = io.BytesIO()
    with zipfile.ZipFile(docx, "w") as z:
        z.writestr("word/document.xml", "<doc/>")
    with tarfile.open(tmp_path / "with-docx.tar", "w") as tf:
        tf.add(root, "set")
        member = tarfile.TarInfo("set/README.docx")
        member.size = len(docx.getvalue())
        tf.addfile(member, io.BytesIO(docx.getvalue()))
    with tarfile.open(tmp_path / "mixed.tar", "w") as tf:
        tf.add(root / "train", "./train")
        tf.add(root / "test", "test")
    for archive in ("with-docx.tar", "mixed.tar"):
        assert zoo.data.load(f"imagefolder:{tmp_path / archive}", cache_dir="off").size("train") == 2, archive


def test_an_archives_image_that_does_not_decode_is_named_without_pils_buffer(tmp_path):
    """PIL names a member's bytes by their buffer's repr: 'cannot identify image file <_io.BytesIO object at 0x..>'."""
    root = tmp_path / "set"
    for rel in ("train/cat/0.png", "train/dog/1.png", "test/cat/2.png"):
        _save(root, rel, Image.new("RGB", (4, 4)))
    (root / "train/dog/3.png").write_bytes(b"")
    with tarfile.open(tmp_path / "set.tar", "w") as tf:
        tf.add(root, "set")
    with pytest.raises(ValueError, match=r"^cannot decode image set/train/dog/3.png: cannot identify image file$"):
        zoo.data.load(f"imagefolder:{tmp_path / 'set.tar'}", cache_dir="off")


def test_an_archive_member_stored_twice_is_read_once_as_extracted(tmp_path):
    """`tar -r` appends a second copy of a name; extraction keeps the last. Both were read: 4 train images for the
    3 of the folder the archive extracts to."""
    root = tmp_path / "set"
    for i, rel in enumerate(("train/cat/0.png", "train/dog/1.png", "train/dog/2.png", "test/cat/3.png")):
        _save(root, rel, Image.new("RGB", (4, 4), (i, 0, 0)))
    with tarfile.open(tmp_path / "set.tar", "w") as tf:
        tf.add(root, "set")
    _save(root, "train/cat/0.png", Image.new("RGB", (4, 4), (99, 0, 0)))
    with tarfile.open(tmp_path / "set.tar", "a") as tf:
        tf.add(root / "train/cat/0.png", "./set/train/cat/0.png")
    ds = zoo.data.load(f"imagefolder:{tmp_path / 'set.tar'}", cache_dir="off")
    assert sorted(ds.splits["train"]["x"][:, 0, 0, 0].tolist()) == [1, 2, 99]
