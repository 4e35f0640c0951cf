"""Random erasing (Zhong et al. 2020) on the device, as timm's RandomErasing (one box per image).

With probability `prob` an image gets one box of area s H W, s ~ U(min_area, max_area), and aspect ratio r with
log r ~ U(log min_aspect, -log min_aspect): sides round(sqrt(s H W r)) by round(sqrt(s H W / r)), the first of 10
draws that fits inside the image (none fits: no box), at a uniform position. It is filled in the model's input
units ([-1, 1] for images): "const" with 0 (mid grey, timm's 0 of a normalised image), "rand" with one normal
colour per box, "pixel" with normal noise per pixel.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

MODES = ("const", "rand", "pixel")
ATTEMPTS = 10  # timm's


@dataclasses.dataclass(frozen=True)
class Erasing:
    prob: float = 0.5
    min_area: float = 0.02
    max_area: float = 1 / 3
    min_aspect: float = 0.3
    mode: str = "const"


def erase(key: jax.Array, x: jax.Array, e: Erasing) -> jax.Array:
    """Float images (B, H, W, C) with one box erased in each image drawn to be."""
    b, h, w, c = x.shape
    k_u, k_fill = jax.random.split(key)
    u = jax.random.uniform(k_u, (b, 3 + 2 * ATTEMPTS))  # whether, where (2), and each attempt's area and aspect
    erased = u[:, 0] <= e.prob  # timm: skipped when random() > prob
    area = (e.min_area + (e.max_area - e.min_area) * u[:, 3:3 + ATTEMPTS]) * (h * w)
    log_aspect = math.log(e.min_aspect)
    aspect = jnp.exp(log_aspect - 2 * log_aspect * u[:, 3 + ATTEMPTS:])
    eh = jnp.round(jnp.sqrt(area * aspect)).astype(jnp.int32)  # Python's round: half to even, as jnp.round
    ew = jnp.round(jnp.sqrt(area / aspect)).astype(jnp.int32)
    fits = (ew < w) & (eh < h)
    first = jnp.argmax(fits, axis=1)[:, None]
    eh, ew = jnp.take_along_axis(eh, first, 1)[:, 0], jnp.take_along_axis(ew, first, 1)[:, 0]
    erased &= fits.any(1)
    top = jnp.floor(u[:, 1] * (h - eh + 1)).astype(jnp.int32)  # randint(0, h - eh)
    left = jnp.floor(u[:, 2] * (w - ew + 1)).astype(jnp.int32)
    rows, cols = jnp.arange(h)[None, :, None], jnp.arange(w)[None, None, :]
    box = ((rows >= top[:, None, None]) & (rows < (top + eh)[:, None, None]) & (cols >= left[:, None, None])
           & (cols < (left + ew)[:, None, None]) & erased[:, None, None])
    shape = {"const": None, "rand": (b, 1, 1, c), "pixel": x.shape}[e.mode]
    fill = jnp.zeros((), x.dtype) if shape is None else jax.random.normal(k_fill, shape, x.dtype)
    return jnp.where(box[..., None], fill, x)
