"""MixUp (Zhang et al. 2018) and CutMix (Yun et al. 2019) on the device, as timm's Mixup.

Each image i is mixed with its partner B - 1 - i (the batch reversed; the batch's order is random) with a weight
lam ~ Beta(alpha, alpha), applied with probability `prob`; with both on, CutMix is chosen with `switch_prob`.
MixUp: x = lam x_i + (1 - lam) x_partner. CutMix: a box of sides int(H sqrt(1 - lam)), int(W sqrt(1 - lam)) about
a uniform centre, clipped to the image, is pasted from the partner, and lam becomes the area kept,
1 - box / (H W) (timm's correct_lam). The labels mix by that lam: y = lam e_i + (1 - lam) e_partner (label
smoothing is the loss's, zoo.train.step). mode "batch" draws one lam (and one box) for the whole batch, timm's
default and the reference recipes'; "elem" one per image.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

MODES = ("batch", "elem")


@dataclasses.dataclass(frozen=True)
class Mixing:
    mixup_alpha: float  # 0: no MixUp
    cutmix_alpha: float  # 0: no CutMix
    prob: float = 1.0
    switch_prob: float = 0.5
    mode: str = "batch"


def box_mask(u: jax.Array, lam: jax.Array, height: int, width: int) -> jax.Array:
    """timm's rand_bbox: (n, H, W) masks of boxes of sides int(H sqrt(1 - lam)), int(W sqrt(1 - lam)) centred at a
    uniform pixel (from uniforms u (n, 2)), clipped to the image."""
    ratio = jnp.sqrt(1.0 - lam)
    cut_h, cut_w = (jnp.floor(height * ratio).astype(jnp.int32), jnp.floor(width * ratio).astype(jnp.int32))
    cy, cx = (jnp.floor(u[:, 0] * height).astype(jnp.int32), jnp.floor(u[:, 1] * width).astype(jnp.int32))
    rows, cols = jnp.arange(height)[None, :, None], jnp.arange(width)[None, None, :]

    def inside(pos, centre, cut, size):
        lo = jnp.clip(centre - cut // 2, 0, size)[:, None, None]
        hi = jnp.clip(centre + cut // 2, 0, size)[:, None, None]
        return (pos >= lo) & (pos < hi)

    return inside(rows, cy, cut_h, height) & inside(cols, cx, cut_w, width)


def mix(key: jax.Array, x: jax.Array, y: jax.Array, num_classes: int, m: Mixing) -> tuple[jax.Array, jax.Array]:
    """Mixed float images (B, H, W, C) and their soft labels (B, num_classes)."""
    b, h, w = x.shape[:3]
    n = b if m.mode == "elem" else 1
    k_u, k_lam = jax.random.split(key)
    u = jax.random.uniform(k_u, (n, 4))  # apply, switch, box centre (2): one draw
    applied = u[:, 0] < m.prob
    cut = u[:, 1] < m.switch_prob if m.mixup_alpha > 0 and m.cutmix_alpha > 0 else jnp.full((n,), m.cutmix_alpha > 0)
    alpha = jnp.where(cut, m.cutmix_alpha, m.mixup_alpha)
    lam = jnp.where(applied, jax.random.beta(k_lam, alpha, alpha), 1.0)
    box = box_mask(u[:, 2:], lam, h, w) & (cut & applied)[:, None, None]
    lam = jnp.where(cut, 1.0 - box.sum((1, 2)) / (h * w), lam)  # the area kept
    partner = x[::-1]
    blended = lam[:, None, None, None] * x + (1.0 - lam[:, None, None, None]) * partner
    mixed = jnp.where(cut[:, None, None, None], jnp.where(box[..., None], partner, x), blended)
    onehot = jax.nn.one_hot(y, num_classes, dtype=jnp.float32)
    target = lam[:, None] * onehot + (1.0 - lam[:, None]) * onehot[::-1]
    return mixed.astype(x.dtype), target
