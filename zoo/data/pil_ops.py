"""PIL's image operations as jittable JAX on a batch of uint8 images (B, H, W, C), each image with its own parameter.

AutoAugment and RandAugment (timm, torchvision, DeepVoltaire/AutoAugment) are written on PIL images: each op is
one PIL call (ImageOps, ImageEnhance, Image.transform). These are those calls, in PIL's own arithmetic, so that an
augmented batch computed on the device equals PIL's image by image (tests/data/test_augment_pil.py states the
tolerance of each):

- lookup tables (invert, posterize, solarize, autocontrast, equalize): PIL's integer tables;
- enhancements (color, contrast, brightness, sharpness): Image.blend(degenerate, image, f), out = trunc(d + f (x - d))
  in float32 clipped to [0, 255], the degenerate image as PIL makes it (ITU-R 601 luma L = (19595 R + 38470 G +
  7471 B + 2^15) >> 16, its rounded mean, black, the SMOOTH 3 x 3 filter with the border kept); they take each
  image's factor as its row of float32 products (`products`), PIL's rounding;
- affine warps (rotate, shear, translate): Image.transform's sampling positions, computed on the host in double
  precision exactly as PIL's C code does (NEAREST: 16.16 fixed point, or double steps for a pure translation;
  BICUBIC: PIL's a = -1 cubic with clamped taps), as a table of 16 taps and weights per output pixel; a pixel whose
  position falls outside the image takes the fill colour.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

NEAREST, BICUBIC = "nearest", "bicubic"


def _per_image(v: jax.Array, x: jax.Array) -> jax.Array:
    """A per-image parameter (B,) broadcast against images (B, H, W, C)."""
    return jnp.reshape(v, (-1,) + (1,) * (x.ndim - 1))


def invert(x: jax.Array) -> jax.Array:
    """ImageOps.invert: 255 - x."""
    return 255 - x


def posterize(x: jax.Array, bits: jax.Array) -> jax.Array:
    """ImageOps.posterize: keep the top `bits` bits, x & ~(2^(8 - bits) - 1)."""
    mask = (0xFF << (8 - _per_image(bits, x).astype(jnp.int32))) & 0xFF
    return (x.astype(jnp.int32) & mask).astype(jnp.uint8)


def solarize(x: jax.Array, threshold: jax.Array) -> jax.Array:
    """ImageOps.solarize: x where x < threshold, else 255 - x."""
    return jnp.where(x < _per_image(threshold, x), x, 255 - x)


def autocontrast(x: jax.Array) -> jax.Array:
    """ImageOps.autocontrast (no cutoff): each channel's [lo, hi] stretched to [0, 255] by PIL's table
    lut(i) = int(i * scale + offset), scale = 255 / (hi - lo), offset = -lo * scale, evaluated in double: the integer
    floor((i - lo) 255 / (hi - lo)), less 1 at the points where that double lands just below it (`_autocontrast_low`);
    a channel of one value is kept. Each channel's table of 256 is built, then looked up."""
    v = _channels(x)  # (B, C, N)
    lo, hi = v.min(-1, keepdims=True), v.max(-1, keepdims=True)
    i = jnp.arange(256, dtype=jnp.int32)
    stretched = (i - lo) * 255 // jnp.maximum(hi - lo, 1)
    low = jnp.asarray(_autocontrast_low())
    key = (lo * 256 + hi) * 256 + i
    below = low[jnp.minimum(jnp.searchsorted(low, key), low.size - 1)] == key
    lut = jnp.where(hi > lo, stretched - below, i)
    return _from_channels(jnp.take_along_axis(lut, v, axis=-1), x.shape)


@functools.cache
def _autocontrast_low() -> np.ndarray:
    """The sorted keys (lo 256 + hi) 256 + i of the 8-bit (lo < hi, i in [lo, hi]) where PIL's double i * scale +
    offset lands below the exact (i - lo) 255 / (hi - lo), an integer there (12094 of them)."""
    keys = []
    i = np.arange(256, dtype=np.float64)
    for lo in range(255):
        hi = np.arange(lo + 1, 256, dtype=np.float64)[:, None]
        scale = 255.0 / (hi - lo)
        pil = np.floor(i * scale + -lo * scale)  # PIL's int() of a value >= 0 wherever i >= lo
        exact = (i - lo) * 255 // (hi - lo)
        h, j = np.nonzero((pil < exact) & (i >= lo) & (i <= hi))
        keys.append((lo * 256 + lo + 1 + h) * 256 + j)
    return np.sort(np.concatenate(keys)).astype(np.int32)


def equalize(x: jax.Array) -> jax.Array:
    """ImageOps.equalize per channel: with the histogram h, N pixels and h_max the count of the largest value,
    step = (N - h_max) // 255 and lut(i) = (step // 2 + sum_{j < i} h_j) // step, clipped to 255 (Image.point's
    8-bit table); a channel of one value, or step 0, is kept."""
    v = _channels(x)  # (B, C, N)
    hist = jax.vmap(jax.vmap(lambda a: jnp.bincount(a, length=256)))(v)  # (B, C, 256)
    last = jnp.take_along_axis(hist, v.max(-1, keepdims=True), axis=-1)  # count of the largest value
    step = (v.shape[-1] - last) // 255
    below = jnp.cumsum(hist, axis=-1) - hist
    lut = jnp.minimum((step // 2 + below) // jnp.maximum(step, 1), 255)
    keep = ((hist > 0).sum(-1, keepdims=True) <= 1) | (step == 0)
    return _from_channels(jnp.where(keep, v, jnp.take_along_axis(lut, v, axis=-1)), x.shape)


def _channels(x: jax.Array) -> jax.Array:
    """Images (B, H, W, C) as each channel's pixels (B, C, H W), int32."""
    b, hgt, wid, c = x.shape
    return x.astype(jnp.int32).reshape(b, hgt * wid, c).transpose(0, 2, 1)


def _from_channels(v: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """The inverse of `_channels`, as uint8 images of `shape`."""
    return v.transpose(0, 2, 1).reshape(shape).astype(jnp.uint8)


def products(factor: np.ndarray | float) -> np.ndarray:
    """The products of Image.blend with factor f, f k for every difference k = -255..255 between the image and its
    degenerate, each rounded to float32 as PIL's C code rounds it (..., 511), computed on the host."""
    return np.asarray(factor, np.float32)[..., None] * np.arange(-255, 256, dtype=np.float32)


def blend(degenerate: jax.Array, x: jax.Array, rows: jax.Array) -> jax.Array:
    """Image.blend(degenerate, x, f) as PIL's C code: trunc(d + f (x - d)) in float32, clipped to [0, 255], with
    each image's products f (x - d) from its row of `products` (B, 511): PIL rounds the product before the sum,
    and a product computed here would be fused with the sum into one FMA, rounded once (XLA does so on CPU and
    GPU), which truncates a level lower or higher where the sum is near an integer."""
    d = degenerate.astype(jnp.int32)
    k = (x.astype(jnp.int32) - d + 255).reshape(x.shape[0], -1)
    product = jnp.take_along_axis(rows, k, axis=1).reshape(x.shape)
    return jnp.floor(jnp.clip(d.astype(jnp.float32) + product, 0.0, 255.0)).astype(jnp.uint8)


def luma(x: jax.Array) -> jax.Array:
    """Image.convert("L") of RGB: (19595 R + 38470 G + 7471 B + 2^15) >> 16, kept as (B, H, W, 1)."""
    v = x.astype(jnp.int32)
    return (v[..., :1] * 19595 + v[..., 1:2] * 38470 + v[..., 2:3] * 7471 + 0x8000) >> 16


def color(x: jax.Array, rows: jax.Array) -> jax.Array:
    """ImageEnhance.Color: blend with the image's grey (luma) version."""
    return blend(jnp.broadcast_to(luma(x), x.shape), x, rows)


def contrast(x: jax.Array, rows: jax.Array) -> jax.Array:
    """ImageEnhance.Contrast: blend with the mean luma, int(mean + 0.5) (taken in integers: exact)."""
    lum = luma(x)
    n = lum.shape[1] * lum.shape[2]
    mean = (2 * lum.sum(axis=(1, 2, 3), keepdims=True) + n) // (2 * n)
    return blend(jnp.broadcast_to(mean, x.shape), x, rows)


def brightness(x: jax.Array, rows: jax.Array) -> jax.Array:
    """ImageEnhance.Brightness: blend with black."""
    return blend(jnp.zeros_like(x), x, rows)


def smooth(x: jax.Array) -> jax.Array:
    """ImageFilter.SMOOTH: the 3 x 3 kernel [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 in float32, rows summed in
    PIL's order, rounded (+0.5, truncated); the border rows and columns are kept. The products v k are PIL's
    float32 ones, looked up (as in `blend`, so that no FMA rounds them away)."""
    times = [jnp.asarray(np.arange(256, dtype=np.float32) * (np.float32(w) / np.float32(13))) for w in (1, 5)]
    v = x.astype(jnp.int32)
    h, w = x.shape[1], x.shape[2]

    def row(dy: int, mid: jax.Array) -> jax.Array:
        r = v[:, 1 + dy:h - 1 + dy]
        return times[0][r[:, :, :-2]] + mid[r[:, :, 1:-1]] + times[0][r[:, :, 2:]]

    ss = np.float32(0.5) + row(1, times[0])
    ss = ss + row(0, times[1])
    ss = ss + row(-1, times[0])
    inner = jnp.floor(jnp.clip(ss, 0.0, 255.0)).astype(jnp.uint8)
    return x.at[:, 1:h - 1, 1:w - 1].set(inner)


def sharpness(x: jax.Array, rows: jax.Array) -> jax.Array:
    """ImageEnhance.Sharpness: blend with the SMOOTH-filtered image."""
    return blend(smooth(x), x, rows)


# ---- affine warps: PIL's sampling positions, tabulated on the host ----

def rotate_matrix(degrees: float, width: int, height: int) -> tuple[float, ...]:
    """Image.rotate(degrees)'s inverse affine matrix (expand=False, about the centre), as PIL computes it."""
    angle = -math.radians(degrees)
    m = [round(math.cos(angle), 15), round(math.sin(angle), 15), 0.0,
         round(-math.sin(angle), 15), round(math.cos(angle), 15), 0.0]
    cx, cy = width / 2, height / 2
    m[2], m[5] = m[0] * -cx + m[1] * -cy + m[2], m[3] * -cx + m[4] * -cy + m[5]
    m[2] += cx
    m[5] += cy
    return tuple(m)


def _coord(v: np.ndarray) -> np.ndarray:
    """PIL's COORD: -1 below 0, else truncated."""
    return np.where(v < 0, -1, np.trunc(v)).astype(np.int64)


def _steps(start: float, step: float, n: int) -> np.ndarray:
    """start, start + step, ... accumulated in double as PIL's loops do."""
    out, v = [], start
    for _ in range(n):
        out.append(v)
        v += step
    return np.array(out)


def _nearest(a: tuple[float, ...], h: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ImagingTransformAffine with NEAREST: (rows, cols) (h, w) of the source pixel of each output pixel, -1 where
    it falls outside. A pure translation or scale goes through ImagingScaleAffine (double steps), anything else
    through affine_fixed (16.16 fixed point)."""
    if a[1] == 0 and a[3] == 0:
        cols = _coord(_steps(a[2] + a[0] * 0.5, a[0], w))[None, :].repeat(h, 0)
        rows = _coord(_steps(a[5] + a[4] * 0.5, a[4], h))[:, None].repeat(w, 1)
    else:
        fix = [math.floor(v * 65536.0 + 0.5) for v in (a[0], a[1], a[3], a[4], a[2] + a[0] * 0.5 + a[1] * 0.5,
                                                       a[5] + a[3] * 0.5 + a[4] * 0.5)]
        a0, a1, a3, a4, a2, a5 = fix
        y, x = np.mgrid[0:h, 0:w].astype(np.int64)
        cols, rows = (a2 + x * a0 + y * a1) >> 16, (a5 + x * a3 + y * a4) >> 16
    inside = (cols >= 0) & (cols < w) & (rows >= 0) & (rows < h)
    taps = np.zeros((h, w, 16), np.int64)
    taps[..., 0] = np.where(inside, rows * w + cols, 0)
    weights = np.zeros((h, w, 16))
    weights[..., 0] = 1.0
    return taps, weights, inside


def _cubic_weights(d: np.ndarray) -> np.ndarray:
    """PIL's BICUBIC(v1..v4, d) = p1 + d (p2 + d (p3 + d p4)) written as weights of v1..v4 (the a = -1 cubic)."""
    return np.stack([-d + 2 * d**2 - d**3, 1 - 2 * d**2 + d**3, d + d**2 - d**3, -(d**2) + d**3], -1)


CENTRE_FIRST = [5, *range(5), *range(6, 16)]  # tap (1, 1) of the 4 x 4, the nearest to the point, first


def _bicubic(a: tuple[float, ...], h: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ImagingGenericTransform with affine_transform and the BICUBIC filter: the source point of output pixel (x, y)
    is a (x + 1/2, y + 1/2); outside [0, w) x [0, h) it is filled, else 4 x 4 taps around it, clamped to the image."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    xin = a[0] * (x + 0.5) + a[1] * (y + 0.5) + a[2]
    yin = a[3] * (x + 0.5) + a[4] * (y + 0.5) + a[5]
    inside = (xin >= 0) & (xin < w) & (yin >= 0) & (yin < h)
    xs, ys = xin - 0.5, yin - 0.5
    x0, y0 = np.floor(xs), np.floor(ys)
    wx, wy = _cubic_weights(xs - x0), _cubic_weights(ys - y0)
    cols = np.clip(x0[..., None].astype(np.int64) - 1 + np.arange(4), 0, w - 1)
    rows = np.clip(y0[..., None].astype(np.int64) - 1 + np.arange(4), 0, h - 1)
    taps = (rows[..., :, None] * w + cols[..., None, :]).reshape(h, w, 16)[..., CENTRE_FIRST]
    weights = (wy[..., :, None] * wx[..., None, :]).reshape(h, w, 16)[..., CENTRE_FIRST]
    return np.where(inside[..., None], taps, 0), weights, inside


@functools.lru_cache(maxsize=256)
def warp_table(matrix: tuple[float, ...], height: int, width: int, resample: str) -> tuple[np.ndarray, ...]:
    """Image.transform(size, AFFINE, matrix, resample)'s sampling of an image of this size: per output pixel 16
    source pixel indices (row * width + col), their float32 weights, and whether it lies inside the image."""
    make = {NEAREST: _nearest, BICUBIC: _bicubic}[resample]
    taps, weights, inside = make(tuple(float(v) for v in matrix), height, width)
    return (taps.reshape(-1, 16).astype(np.int32), weights.reshape(-1, 16).astype(np.float32),
            inside.reshape(-1))


def stack_tables(tables: list[tuple[np.ndarray, ...]]) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Warp tables stacked (K, H*W, 16), (K, H*W, 16), (K, H*W), so that each image can pick its own."""
    return tuple(jnp.asarray(np.stack(parts)) for parts in zip(*tables, strict=True))


def warp(x: jax.Array, tables: tuple[jax.Array, jax.Array, jax.Array], which: jax.Array,
         fill: int) -> jax.Array:
    """Each image warped by its table `which` (B,) of `tables` (stack_tables): the weighted sum of its 16 taps,
    clipped to [0, 255] and truncated as PIL's bicubic filter does; pixels outside the source image take `fill`.
    The sum is taken as v_0 + sum_t w_t (v_t - v_0) about the first tap (the nearest): the weights sum to 1 in
    double but not in float32, and a flat region (v_t = v_0) must come back exactly, not 1e-7 below and truncated
    one level down. A nearest tap has weight 1 and the rest 0: exact."""
    b, h, w, c = x.shape
    taps, weights, inside = (t[which] for t in tables)  # (B, HW, 16), (B, HW, 16), (B, HW)
    flat = x.reshape(b, h * w, c).astype(jnp.float32)
    picked = jnp.take_along_axis(flat, taps.reshape(b, -1, 1), axis=1).reshape(b, h * w, 16, c)
    # a product and a sum, not a dot: XLA may take an f32 dot in TF32 on a GPU
    base = picked[:, :, :1]
    value = jnp.floor(jnp.clip(base[:, :, 0] + (weights[..., None] * (picked - base)).sum(2), 0.0, 255.0))
    out = jnp.where(inside[..., None], value, float(fill))
    return out.reshape(x.shape).astype(jnp.uint8)
