"""Image folders (root/split/class/image) from a directory or a tar archive, decoded once with PIL and cached.

Every image is decoded in one mode (grayscale when every image of the train and eval splits is, else RGB; a 16-bit
grayscale image scaled to 8 bits) and, with `image_size`, resized and center-cropped to N x N (`zoo.data.resize`), so
folders whose images vary in size work."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import tarfile
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from PIL import ImageMode

from zoo.data import cache
from zoo.data.config import DataConfig
from zoo.data.dataset import Dataset
from zoo.data.image_decode import decode_all, decode_chunk, decode_one, opened
from zoo.data.sources import SpecError
from zoo.data.streamed import IN_MEMORY_LIMIT, Streamed, check_host, image_bytes, streams
from zoo.data.view import DataView, check_classes
from zoo.data.walk import files_under
from zoo.files import refuse_special

EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")  # torchvision's + .gif
EVAL_SPLITS = ("test", "val", "validation")
SMALLER = "use a smaller --image-size"
DECODED = 3  # how images decode, in the cache's key: 3 decodes a set in RGB when any image is in colour (2 took the
# mode of the first image, 1 also clipped 16-bit grayscale images to 255)

# (split, class, name for messages, file path or bytes)
Entry = tuple[str, str, str, str | bytes]


def load(path: str, cache_dir: str | None = None, stream: bool | None = None, limit: int = IN_MEMORY_LIMIT,
         image_size: int | None = None) -> DataView:
    """A directory or .tar[.gz] laid out as split/class/image; class names sorted -> labels. Images at their own
    size (which must be one), or resized and center-cropped to `image_size` x `image_size`.

    A directory too big for memory (or with stream=True) is read image by image; an archive is decoded whole."""
    src = Path(path).expanduser()
    if not src.exists():
        raise FileNotFoundError(f"image folder not found: {src}")
    refuse_special(src, f"imagefolder:{src}")  # /dev/zero read as an archive without end
    if image_size is not None:
        check_host(image_bytes(image_size), f"one image at --image-size {image_size}", SMALLER)
    if src.is_dir():
        layout = _layout(src, _dir_entries(src))
        decoded = _decoded_bytes(layout, image_size, limit)
        if streams(stream, decoded, limit):
            return _streamed(layout, image_size)
        check_host(decoded, f"image folder {src}", "let it stream (leave out --stream false)"
                   + (" or use a smaller --image-size" if image_size else ""))
        fingerprint = _dir_fingerprint(src, layout.entries)
    else:
        _check_tar(src)
        if stream:
            raise ValueError(f"{src} is an archive, which cannot be read one image at a time; extract it to a "
                             "folder to stream it")
        layout = None
        fingerprint = cache.file_fingerprint(src)
    fingerprint += f"|decoded={DECODED}" + (f"|image_size={image_size}" if image_size is not None else "")
    where = cache.cache_path("imagefolder", fingerprint, cache_dir)
    arrays = cache.load(where)
    if arrays is None or not _as_decoded(arrays):
        where = cache.writable(where, cache_dir)
        arrays = _decode(layout or _layout(src, _tar_entries(src)), image_size)
        cache.save(where, arrays)
    return _dataset(src, arrays)


def _image_name(name: str) -> bool:
    """An image's name, in no hidden folder (a .ipynb_checkpoints inside a class folder is no subfolder of images)
    and no hidden file (macOS's ._x.jpg beside x.jpg)."""
    parts = name.strip("/").split("/")
    return not any(p.startswith(".") and p != "." for p in parts) and parts[-1].lower().endswith(EXTENSIONS)


def _entry(name: str, payload: str | bytes) -> Entry | None:
    parts = name.strip("/").split("/")
    if len(parts) < 3 or not _image_name(name):
        return None
    return parts[-3], parts[-2], name, payload


def _dir_entries(root: Path) -> list[Entry]:
    """Every image under `root`, through linked folders too (zoo.data.walk)."""
    found = [e for e in (_entry(path.relative_to(root).as_posix(), str(path)) for path in files_under(root)) if e]
    for e in found:  # else os.stat's 'No such file or directory' for a file that ls shows
        if os.path.islink(e[3]) and not os.path.exists(e[3]):
            raise ValueError(f"{e[3]} is a link to {os.readlink(e[3])}, which does not exist: restore its target "
                             "or remove the link")
        if not os.path.isfile(e[3]):  # a FIFO named like an image: its read would never end
            raise ValueError(f"{e[3]} is no regular file (a FIFO, socket or device); remove it from the image folder")
    return found


def _dir_fingerprint(root: Path, entries: list[Entry]) -> str:
    """The folder and a digest of each image's name and `cache.stat_key`. Moving an image to another class folder
    (a label corrected) changes no size and no mtime, so the count, total size and newest mtime this was before
    served the cached labels of before."""
    digest = hashlib.sha256()
    for e in entries:
        digest.update(os.fsencode(e[2]) + f"|{cache.stat_key(Path(e[3]))}\n".encode())
    return f"{root.resolve()}|{digest.hexdigest()}"


def _check_tar(path: Path) -> None:
    """A file given as an image folder that is no tar is no image and no zip archive (each was 'corrupt or unreadable
    archive', with tarfile's reasons why it is no tar of any compression). A tar ending in a zip-format member (a
    .docx, an .npz) is a tar."""
    if tarfile.is_tarfile(path):
        return
    if _image_name(path.name):
        raise ValueError(f"imagefolder:{path} is an image; give the folder (or .tar[.gz] archive) it lies in, laid "
                         "out as split/class/image")
    if zipfile.is_zipfile(path):
        raise ValueError(f"imagefolder:{path} is a zip archive, which zoo does not read; unpack it and give the "
                         "folder, or pack it as a .tar.gz")


def _tar_entries(path: Path) -> list[Entry]:
    """The images of an archive: its files and its links, read as the member each names. tar stores a file's second
    name (a hard link) as a link to the first, so an archive of a folder with such files read fewer images than
    the folder (2 of 4) without a word. A name stored twice (`tar -r`) is its last member, as extracted."""
    found: dict[str, Entry] = {}
    try:
        with tarfile.open(path) as tf:
            for m in tf:
                if (m.isfile() or m.islnk() or m.issym()) and _image_name(m.name):
                    e = _entry(m.name, _member_bytes(tf, m, path))
                    if e is not None:
                        found[os.path.normpath(m.name)] = e
    except (tarfile.TarError, EOFError, OSError, zlib.error) as err:
        reason = " ".join(str(err).split())  # tarfile's says why each compression failed, one per line
        raise ValueError(f"corrupt or unreadable archive {path}: {reason}") from err
    return list(found.values())


def _member_bytes(tf: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> bytes:
    """The bytes of an archive's file, or of the file a link of it names."""
    try:
        f = tf.extractfile(member)
    except KeyError:  # tarfile's "linkname 'x' not found"
        f = None
    if f is None:
        raise ValueError(f"{member.name} in archive {path} links to {member.linkname}, which is no file of the archive")
    return f.read()


def _set_mode(entries: Iterable[Entry]) -> str:
    """The mode every image of a folder is decoded in, so a folder mixing grayscale and colour files (ImageNet has
    both) stacks: "L" when every image is grayscale (PIL's base mode L: 1, L, LA, 16-bit), else "RGB". The first
    image's mode decided it before, so a colour folder whose first image was grayscale trained in grayscale. Read
    from the files' headers (about 40 us each), up to the first colour image."""
    for name, payload in (e[2:] for e in entries):
        with opened(name, payload) as im:
            if ImageMode.getmode(im.mode).basemode != "L":
                return "RGB"
    return "L"


def _decoded_bytes(layout: Layout, image_size: int | None, limit: int) -> int:
    """The decoded set's bytes, for the size rule and the host check: counted as RGB, an upper bound, where that is
    within `limit` (the set stays in memory whatever its mode, so the mode is not read here: a header an image, 3 s
    for 70,000 grayscale images at every start, a cache hit included); else in the set's mode."""
    first = layout.entries[0][2:]
    bound = len(layout.entries) * decode_one(*first, "RGB", image_size).nbytes
    return bound if bound <= limit else len(layout.entries) * decode_one(*first, layout.mode, image_size).nbytes


@dataclasses.dataclass(frozen=True)
class Layout:
    """An image folder `src` as read: `classes` (the train split's, sorted; a label is the rank), the entries of
    the train split and of the eval split, each sorted by class then name, and the eval split's name."""

    src: Path
    classes: list[str]
    splits: dict[str, list[Entry]]
    eval_split: str

    @property
    def entries(self) -> list[Entry]:
        return [e for split in sorted(self.splits) for e in self.splits[split]]

    @functools.cached_property
    def mode(self) -> str:
        return _set_mode(self.entries)

    def labels(self, entries: list[Entry]) -> np.ndarray:
        rank = {c: i for i, c in enumerate(self.classes)}
        return np.array([rank[e[1]] for e in entries], np.int32)


def _layout(src: Path, entries: list[Entry]) -> Layout:
    """The train and eval splits of `entries`; the train split must hold two classes at least and every class of
    the eval split. Other folders beside them (a 'val' beside 'test', or 'extra') are neither read nor counted:
    their classes were labels before, so a class only they held was an output no image trained, and it renumbered
    the classes after it."""
    if not entries:
        raise ValueError(f"no images found in {src}; expected split/class/image.(jpg|png) inside (hidden folders and "
                         "files, named .x, are skipped)")
    splits: dict[str, list[Entry]] = {}
    for e in sorted(entries, key=lambda e: (e[0], e[1], e[2])):
        splits.setdefault(e[0], []).append(e)
    eval_split = _eval_split(src, sorted(splits))
    _check_not_nested(src, entries, ("train", eval_split))
    trained = sorted({e[1] for e in splits["train"]})
    check_classes(len(trained), "image", f"the train split of image folder {src} (classes: {', '.join(trained)})")
    _check_eval_classes(src, splits, eval_split)
    return Layout(src, trained, {s: splits[s] for s in ("train", eval_split)}, eval_split)


def _check_not_nested(src: Path, entries: list[Entry], used: tuple[str, ...]) -> None:
    """The used splits sit in one folder (the top, or an archive's top folder), and no image lies in a folder inside
    a class folder. Splits of two folders (two data sets side by side, a backup copy inside one) were read as one
    set, their images and classes merged without a word; train/b/extra/x.png, read as split 'b' and class 'extra',
    was left out without a word (torchvision's ImageFolder reads it as class b)."""
    tops = {tuple(_parts(e[2])[:-3]) for e in entries if e[0] in used}
    if len(tops) > 1:
        where = sorted("/".join((*t, "")) or "the top" for t in tops)
        raise ValueError(f"image folder {src} holds {' or '.join(used)} splits in {len(where)} folders "
                         f"({', '.join(where[:3])}{', ...' if len(where) > 3 else ''}), which would be read as one "
                         "data set; give the folder of one of them, or move the others out")
    for e in entries:
        parts = _parts(e[2])
        top = next((t for t in tops if len(parts) > len(t) + 3 and tuple(parts[:len(t)]) == t
                    and parts[len(t)] in used), None)
        if top is not None:
            raise ValueError(f"image folder {src}: {e[2]} lies in a subfolder of the class folder "
                             f"{'/'.join(parts[:len(top) + 2])}, which is not read; images go in split/class/image: "
                             "move it up into the class folder, or out of the image folder")


def _parts(name: str) -> list[str]:
    """An entry's folders and file name, without '.' ('./train/a/x.png' and 'train/a/x.png' in one tar, as `tar -cf
    s.tar ./train test` makes, lie in one folder)."""
    return [part for part in name.strip("/").split("/") if part != "."]


def _check_eval_classes(src: Path, splits: dict[str, list[Entry]], eval_split: str) -> None:
    """Every class of the eval split has train images: one it lacks (a misspelled folder, 'Cat' beside 'cat') was
    a label never trained, whose images counted wrong whatever the model did, silently. Checked before decoding,
    so a cached set passed it."""
    unseen = sorted({e[1] for e in splits[eval_split]} - {e[1] for e in splits["train"]})
    if unseen:
        raise ValueError(f"the {eval_split} split of image folder {src} has classes the train split lacks "
                         f"({', '.join(unseen[:3])}{', ...' if len(unseen) > 3 else ''}), whose images no model can "
                         "classify right; add train images of them, or move them out")


def _decode(layout: Layout, image_size: int | None) -> dict[str, np.ndarray]:
    entries = layout.entries
    if image_size is not None:
        check_host(image_bytes(image_size, len(entries)), f"{layout.src} at --image-size {image_size}", SMALLER)
    arrays: dict[str, np.ndarray] = {"classes": np.array(layout.classes)}
    x = decode_all([(e[2], e[3]) for e in entries], layout.mode, image_size)
    start = 0
    for split in sorted(layout.splits):
        n = len(layout.splits[split])
        arrays[f"{split}.x"] = x[start:start + n]
        arrays[f"{split}.y"] = layout.labels(layout.splits[split])
        start += n
    return arrays


def _as_decoded(arrays: dict[str, np.ndarray]) -> bool:
    """A cache entry as `_decode` writes it: the classes, a train split, each split's images and labels of one length,
    the labels among the classes. Anything else at the entry's name (written by another tool, or by hand) is decoded
    again: it was served, and named a folder with a train split as one without."""
    if "classes" not in arrays or "train.x" not in arrays:
        return False
    splits = [k[:-2] for k in arrays if k.endswith(".x")]
    return all(f"{s}.y" in arrays and arrays[f"{s}.y"].ndim == 1 and len(arrays[f"{s}.y"]) == len(arrays[f"{s}.x"])
               and np.all((arrays[f"{s}.y"] >= 0) & (arrays[f"{s}.y"] < len(arrays["classes"]))) for s in splits)


def _eval_split(src: Path, names: list[str]) -> str:
    if "train" not in names:
        raise ValueError(f"image folder {src} has no train split (found: {', '.join(names)})")
    eval_split = next((s for s in EVAL_SPLITS if s in names), None)
    if eval_split is None:
        raise ValueError(f"image folder {src} has no test or val split (found: {', '.join(names)})")
    return eval_split


def _dataset(src: Path, arrays: dict[str, np.ndarray]) -> Dataset:
    names = sorted(k[:-2] for k in arrays if k.endswith(".x"))
    splits = {s: {"x": arrays[f"{s}.x"], "y": arrays[f"{s}.y"]} for s in names}
    eval_split = _eval_split(src, names)
    return Dataset(kind="image", splits=splits, num_classes=len(arrays["classes"]),
                   in_shape=tuple(splits["train"]["x"].shape[1:]), eval_split=eval_split)


class ImageFiles:
    """An image split as a Reader: files (names relative to `root`, stored as compact bytes) decoded (in `mode`,
    resized and center-cropped to `image_size` when given) when a batch asks for them, in grain's workers."""

    def __init__(self, root: Path, names: list[str], labels: np.ndarray, shape: tuple[int, ...], mode: str,
                 image_size: int | None):
        self.root, self.names, self.labels, self.shape = root, np.array([os.fsencode(n) for n in names]), labels, shape
        self.mode, self.image_size, self.size = mode, image_size, len(labels)

    def read(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        paths = [str(self.root / os.fsdecode(self.names[i])) for i in idx]
        x = decode_chunk([(p, p) for p in paths], self.mode, self.image_size, ("the first training image", self.shape))
        return {"x": x, "y": self.labels[idx]}


def _streamed(layout: Layout, image_size: int | None) -> Streamed:
    shape = decode_one(*layout.splits["train"][0][2:], layout.mode, image_size).shape
    readers = {s: ImageFiles(layout.src, [e[2] for e in es], layout.labels(es), shape, layout.mode, image_size)
               for s, es in layout.splits.items()}
    return Streamed(kind="image", readers=readers, num_classes=len(layout.classes), in_shape=shape,
                    eval_split=layout.eval_split)


def source(arg: str, cfg: DataConfig, limit: int) -> DataView:
    """`imagefolder:DIR` or `imagefolder:ARCHIVE.tar.gz`, laid out as split/class/image."""
    if not arg:
        raise SpecError("imagefolder:DIR needs a directory or a .tar.gz")
    return load(arg, cfg.cache_dir, cfg.stream, limit, cfg.image_size)
