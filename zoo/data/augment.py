"""Jittable image augmentation on a batch (B, H, W, C) of uint8 or float images."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def pad_crop_flip(key: jax.Array, x: jax.Array, pad: int = 4, mode: str = "reflect") -> jax.Array:
    """Pad by `pad` (reflect or constant zeros), crop a random HxW window per image, flip half horizontally."""
    b, h, w, c = x.shape
    # one draw for all three choices: row shift, column shift, flip (0 or 1)
    dy, dx, flip = jax.random.randint(key, (3, b), 0, jnp.array([[2 * pad + 1], [2 * pad + 1], [2]]))
    padded = jnp.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode=mode)
    crop = jax.vmap(lambda img, i, j: jax.lax.dynamic_slice(img, (i, j, 0), (h, w, c)))(padded, dy, dx)
    return jnp.where(flip[:, None, None, None] == 1, crop[:, :, ::-1], crop)
