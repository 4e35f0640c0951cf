"""`--image-size N`: every image resized so that its shorter side is N, then center-cropped to N x N, as it is read.

This is the standard "resize + center crop" eval preprocessing, here used for training too: it is deterministic,
so a resumed run and the streamed and in-memory paths see the same pixels, and sets whose images vary in size
(imagenet2012) stack into (B, N, N, C) batches. Augmentation stays on the device (pad-crop-flip in the jitted
step). big_vision's ViT recipe trains on random inception crops (and evaluates on the central 224 crop of a resize
to 256); zoo does neither.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

RESAMPLE = Image.Resampling.BICUBIC


def center_square(im: Image.Image, size: int) -> Image.Image:
    """The central size x size crop of `im` resized so that its shorter side s = min(h, w) is `size`.

    Done as one bicubic resample of the central s x s square of `im` (antialiased: PIL widens the filter by the
    scale s / size when it shrinks), which is resize-then-crop without rounding the crop's offset."""
    w, h = im.size
    s = min(w, h)
    box = ((w - s) / 2, (h - s) / 2, (w + s) / 2, (h + s) / 2)
    return im.resize((size, size), RESAMPLE, box=box)


def square(image: np.ndarray, size: int) -> np.ndarray:
    """`center_square` of a uint8 (H, W, C) image with C = 1, 3 or 4: uint8 (size, size, C)."""
    channels = image.shape[-1]
    if image.ndim != 3 or channels not in (1, 3, 4):
        raise ValueError(f"cannot resize an image of shape {image.shape}; need (height, width, 1, 3 or 4)")
    out = np.asarray(center_square(Image.fromarray(image[..., 0] if channels == 1 else image), size))
    return out.reshape(size, size, channels)


def images(x: np.ndarray, size: int) -> np.ndarray:
    """`square` of each image of a uint8 batch (B, H, W, C): (B, size, size, C)."""
    out = np.empty((len(x), size, size, x.shape[-1]), np.uint8)
    for i, image in enumerate(x):
        out[i] = square(image, size)
    return out
