"""AutoAugment's CIFAR-10 policy (Cubuk et al. 2019, appendix table 6) on the device, one sub-policy per image.

As DeepVoltaire/AutoAugment implements it, which the CIFAR recipes zoo follows train with (aanna0701/SPT_LSA_ViT,
omihub777/MLP-Mixer-CIFAR): each image draws one of the 25 sub-policies, each sub-policy is two ops applied with
their probabilities, magnitude index m of 10 mapped linearly (shear 0.3 m/9, translate (150/331) m/9 of the
image size, rotate 30 m/9 degrees, colour/contrast/sharpness/brightness factors 1 +- 0.9 m/9, posterize
round(8 - 4 m/9) bits, solarize threshold 256 - 256 m/9), the sign of a signed op drawn per image. Geometric ops
fill with grey 128; shears resample bicubic, translations and rotations nearest (PIL's defaults there). Each op
is the PIL call the reference makes (zoo.data.pil_ops), so the whole batch is computed on the device: every op of
the policy for every image, each image keeping the one it drew (a few elementwise passes over 32 x 32 images).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from zoo.data import pil_ops

FILL = 128
# (p1, op1, m1, p2, op2, m2): the 25 sub-policies, in the paper's (and DeepVoltaire's) order
CIFAR10_POLICY = (
    (0.1, "invert", 7, 0.2, "contrast", 6), (0.7, "rotate", 2, 0.3, "translateX", 9),
    (0.8, "sharpness", 1, 0.9, "sharpness", 3), (0.5, "shearY", 8, 0.7, "translateY", 9),
    (0.5, "autocontrast", 8, 0.9, "equalize", 2), (0.2, "shearY", 7, 0.3, "posterize", 7),
    (0.4, "color", 3, 0.6, "brightness", 7), (0.3, "sharpness", 9, 0.7, "brightness", 9),
    (0.6, "equalize", 5, 0.5, "equalize", 1), (0.6, "contrast", 7, 0.6, "sharpness", 5),
    (0.7, "color", 7, 0.5, "translateX", 8), (0.3, "equalize", 7, 0.4, "autocontrast", 8),
    (0.4, "translateY", 3, 0.2, "sharpness", 6), (0.9, "brightness", 6, 0.2, "color", 8),
    (0.5, "solarize", 2, 0.0, "invert", 3), (0.2, "equalize", 0, 0.6, "autocontrast", 0),
    (0.2, "equalize", 8, 0.6, "equalize", 4), (0.9, "color", 9, 0.6, "equalize", 6),
    (0.8, "autocontrast", 4, 0.2, "solarize", 8), (0.1, "brightness", 3, 0.7, "color", 0),
    (0.4, "solarize", 5, 0.9, "autocontrast", 3), (0.9, "translateY", 9, 0.7, "translateY", 9),
    (0.9, "autocontrast", 2, 0.8, "solarize", 3), (0.8, "equalize", 8, 0.1, "invert", 3),
    (0.7, "translateY", 9, 0.9, "autocontrast", 1),
)
RANGES = {"shearX": np.linspace(0, 0.3, 10), "shearY": np.linspace(0, 0.3, 10),
          "translateX": np.linspace(0, 150 / 331, 10), "translateY": np.linspace(0, 150 / 331, 10),
          "rotate": np.linspace(0, 30, 10), "color": np.linspace(0.0, 0.9, 10),
          "posterize": np.round(np.linspace(8, 4, 10), 0).astype(int), "solarize": np.linspace(256, 0, 10),
          "contrast": np.linspace(0.0, 0.9, 10), "sharpness": np.linspace(0.0, 0.9, 10),
          "brightness": np.linspace(0.0, 0.9, 10), "autocontrast": [0] * 10, "equalize": [0] * 10,
          "invert": [0] * 10}
GEOMETRIC = ("shearX", "shearY", "translateX", "translateY", "rotate")
ENHANCE = {"color": pil_ops.color, "contrast": pil_ops.contrast, "sharpness": pil_ops.sharpness,
           "brightness": pil_ops.brightness}  # factor 1 + sign * magnitude
FIXED = {"invert": pil_ops.invert, "autocontrast": pil_ops.autocontrast, "equalize": pil_ops.equalize}
VALUED = {"posterize": pil_ops.posterize, "solarize": pil_ops.solarize}  # the magnitude as it is
OPS = (*GEOMETRIC, *ENHANCE, *FIXED, *VALUED)


def geometry(op: str, magnitude: float, height: int, width: int) -> tuple[tuple[float, ...], str]:
    """The affine matrix (PIL's inverse map) and resampling of a signed geometric op, as DeepVoltaire's calls."""
    m = float(magnitude)
    return {"shearX": ((1, m, 0, 0, 1, 0), pil_ops.BICUBIC), "shearY": ((1, 0, 0, m, 1, 0), pil_ops.BICUBIC),
            "translateX": ((1, 0, m * width, 0, 1, 0), pil_ops.NEAREST),
            "translateY": ((1, 0, 0, 0, 1, m * height), pil_ops.NEAREST),
            "rotate": (pil_ops.rotate_matrix(m, width, height), pil_ops.NEAREST)}[op]


# the policy as arrays over (sub-policy, stage): op index, probability, magnitude (of a signed op: its size)
OP = np.array([[OPS.index(p[1]), OPS.index(p[4])] for p in CIFAR10_POLICY], np.int32)
PROB = np.array([[p[0], p[3]] for p in CIFAR10_POLICY], np.float32)
MAGNITUDE = np.array([[RANGES[p[1]][p[2]], RANGES[p[4]][p[5]]] for p in CIFAR10_POLICY], np.float64)


@functools.lru_cache(maxsize=8)
def _warps(height: int, width: int) -> tuple[np.ndarray, list[tuple[np.ndarray, ...]]]:
    """For images of this size: the index (sub-policy, stage, sign: 0 is -, 1 is +) of each geometric op's warp
    table, and the tables."""
    index = np.zeros((*OP.shape, 2), np.int32)
    tables: list[tuple[np.ndarray, ...]] = []
    for (i, stage), op in np.ndenumerate(OP):
        if OPS[op] in GEOMETRIC:
            for k, sign in enumerate((-1.0, 1.0)):
                matrix, resample = geometry(OPS[op], sign * MAGNITUDE[i, stage], height, width)
                tables.append(pil_ops.warp_table(matrix, height, width, resample))
                index[i, stage, k] = len(tables) - 1
    return index, tables


def draws(key: jax.Array, batch: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per image: its sub-policy (B,), whether each of its two ops applies (B, 2), their signs (B, 2; 1 is +)."""
    u = jax.random.uniform(key, (batch, 5))  # one draw: sub-policy, whether (2), sign (2)
    sub = jnp.minimum(jnp.floor(u[:, 0] * len(CIFAR10_POLICY)).astype(jnp.int32), len(CIFAR10_POLICY) - 1)
    applied = u[:, 1:3] < jnp.asarray(PROB)[sub]
    return sub, applied, (u[:, 3:] < 0.5).astype(jnp.int32)


def cifar10_policy(key: jax.Array, x: jax.Array) -> jax.Array:
    """AutoAugment's CIFAR-10 policy on uint8 images (B, H, W, 3), each image its own sub-policy and signs."""
    return apply_policy(x, *draws(key, x.shape[0]))


def apply_policy(x: jax.Array, sub: jax.Array, applied: jax.Array, sign: jax.Array) -> jax.Array:
    """Each image through the two ops of its sub-policy `sub`, the ones `applied`, with their `sign`s (draws)."""
    index, tables = _warps(x.shape[1], x.shape[2])
    stacked = pil_ops.stack_tables(tables)
    for stage in range(2):
        op = jnp.asarray(OP[:, stage])[sub]
        size = MAGNITUDE[:, stage]
        # the factor 1 +- m as PIL takes it (the sum in double, then Image.blend's float32 alpha), as products
        rows = jnp.asarray(pil_ops.products(np.stack([1 - size, 1 + size], -1)))[sub, sign[:, stage]]
        value = jnp.asarray(size.astype(np.float32))[sub]
        table = jnp.asarray(index[:, stage])[sub, sign[:, stage]]
        used = {OPS[i] for i in np.unique(OP[:, stage])}
        out = x
        if used & set(GEOMETRIC):
            warped = pil_ops.warp(x, stacked, table, FILL)
            is_geometric = jnp.isin(op, jnp.asarray([OPS.index(n) for n in GEOMETRIC]))
            out = jnp.where(is_geometric[:, None, None, None], warped, out)
        for name in sorted(used - set(GEOMETRIC)):
            result = (ENHANCE[name](x, rows) if name in ENHANCE else FIXED[name](x) if name in FIXED else
                      VALUED[name](x, value))
            out = jnp.where((op == OPS.index(name))[:, None, None, None], result, out)
        x = jnp.where(applied[:, stage, None, None, None], out, x)
    return x
