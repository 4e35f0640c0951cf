"""Images decoded with PIL into uint8 arrays of one mode and shape, in a fork pool for large sets."""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import re
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from functools import partial

import numpy as np
from PIL import Image, UnidentifiedImageError

from zoo.data import resize
from zoo.data.streamed import usable_cores

CHUNK = 2048
PARALLEL_MIN = 4096


def decode_one(name: str, payload: str | bytes, mode: str = "RGB", image_size: int | None = None) -> np.ndarray:
    """One image, uint8 (H, W, C): converted to `mode` ("L" or "RGB"), and resized and center-cropped to
    `image_size` x `image_size` when given."""
    with opened(name, payload) as im:
        im = eight_bits(im)
        if im.mode != mode:
            im = im.convert(mode)
        if image_size is not None:
            im = resize.center_square(im, image_size)
        arr = np.asarray(im)
    return arr[..., None] if arr.ndim == 2 else arr


@contextlib.contextmanager
def opened(name: str, payload: str | bytes) -> Iterator[Image.Image]:
    """The image PIL opens (lazily: its header is read, its pixels when asked for); what fails in the block is one
    line naming the image."""
    try:
        with Image.open(payload if isinstance(payload, str) else io.BytesIO(payload)) as im:
            yield im
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        reason = re.sub(r" ?<_io\.BytesIO object at 0x[0-9a-f]+>", "", str(err))  # an archive member's: no name
        raise ValueError(f"cannot decode image {name}: {reason}") from err  # a bomb: more pixels than PIL will open


def eight_bits(im: Image.Image) -> Image.Image:
    """`im` with 8 bits a channel. A 16-bit grayscale image (PNG, TIFF: PIL's mode I;16; a PGM of maxval above 255,
    which PIL reads as mode I scaled to 0..65535) is scaled by 255 / 65535 = 1 / 257 and rounded (PIL's convert
    clips every value above 255: a 16-bit image came out white but for its zeros); other 32-bit integer or float
    pixels (modes I and F), whose range is not known, are refused."""
    if im.mode.startswith("I;16") or (im.mode == "I" and im.format == "PPM"):
        return Image.fromarray(sixteen_to_eight_bits(np.asarray(im, np.float32)))
    if im.mode in ("I", "F"):
        raise ValueError(f"its pixels are 32-bit {'floats' if im.mode == 'F' else 'integers'} (PIL mode {im.mode}), "
                         "whose range is not known; convert it to 8 or 16 bits a channel")  # opened names it
    return im


def sixteen_to_eight_bits(pixels: np.ndarray) -> np.ndarray:
    """0..65535 pixels as uint8: scaled by 255 / 65535 = 1 / 257 and rounded."""
    return np.round(pixels / 257).astype(np.uint8)


def other_size(name: str, shape: tuple[int, ...], first: str, first_shape: tuple[int, ...]) -> ValueError:
    return ValueError(f"image {name} has shape {shape}, but {first} has {first_shape}; pass --image-size N (e.g. "
                      "224) to resize and center-crop every image to N x N")


def decode_chunk(items: list[tuple[str, str | bytes]], mode: str, image_size: int | None = None,
                 like: tuple[str, tuple[int, ...]] | None = None) -> np.ndarray:
    """The images stacked, each of the shape of `like` (a name and its shape: a streamed set's first training image;
    default the chunk's first image), else one line naming the image that is not."""
    out = np.empty((0,), np.uint8)
    for i, (name, payload) in enumerate(items):
        arr = decode_one(name, payload, mode, image_size)
        like = like or (name, arr.shape)
        if arr.shape != like[1]:
            raise other_size(name, arr.shape, *like)
        if i == 0:
            out = np.empty((len(items), *arr.shape), np.uint8)
        out[i] = arr
    return out


def decode_all(items: list[tuple[str, str | bytes]], mode: str, image_size: int | None) -> np.ndarray:
    """All images stacked; a fork pool over chunks for large sets (the children only run PIL, never JAX)."""
    chunks = [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]
    workers = min(usable_cores(), 8, len(chunks))
    decode = partial(decode_chunk, mode=mode, image_size=image_size)
    if workers < 2 or len(items) < PARALLEL_MIN:
        parts = [decode(c) for c in chunks]
    else:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                parts = list(pool.map(decode, chunks))
    for c, p in zip(chunks, parts, strict=True):
        if p.shape[1:] != parts[0].shape[1:]:
            raise other_size(c[0][0], p.shape[1:], chunks[0][0][0], parts[0].shape[1:])
    return np.concatenate(parts)
