"""Each AutoAugment op on the device equals the PIL call its reference makes (DeepVoltaire/AutoAugment, which the
CIFAR recipes of SPT_LSA_ViT and MLP-Mixer-CIFAR train with; timm and torchvision wrap the same PIL calls), on
fixed images: 12 bundled CIFAR-10 images and 4 made to reach the edge cases (one colour, one flat channel, a narrow
range, saturated noise). Tolerances: the lookup tables, the blends, the nearest warps (translate, rotate) are
exact (autocontrast too, with the points where PIL's double arithmetic lands 1 below an exact integer); the
bicubic shear differs by one level at most, on at most 0.5% of the pixels: PIL evaluates the cubic in double, zoo
in float32 (on the device), and a value within float32's rounding of an integer truncates to either side."""

import pathlib
import tarfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from zoo.data import autoaugment, pil_ops

CIFAR = pathlib.Path(__file__).resolve().parents[2] / "data" / "cifar10-jpeg.tar.gz"


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    """(16, 32, 32, 3) uint8: the first 12 images of the bundled CIFAR-10 and 4 edge cases."""
    out = []
    with tarfile.open(CIFAR) as tar:
        for member in tar:
            if member.isfile() and len(out) < 12:
                out.append(np.asarray(Image.open(tar.extractfile(member)).convert("RGB")))
            if len(out) == 12:
                break
    rng = np.random.default_rng(0)
    flat_channel = out[0].copy()
    flat_channel[..., 1] = 100
    edges = [np.full((32, 32, 3), 7, np.uint8), flat_channel, rng.integers(50, 60, (32, 32, 3)).astype(np.uint8),
             np.clip(rng.normal(128, 120, (32, 32, 3)), 0, 255).astype(np.uint8)]
    return np.stack(out + edges)


def pil(x: np.ndarray, f) -> np.ndarray:
    return np.stack([np.asarray(f(Image.fromarray(im), i)) for i, im in enumerate(x)])


def tiled(images: np.ndarray, values) -> tuple[np.ndarray, np.ndarray]:
    """Every image at every value: images (N*V, ...) and the per-image values (N*V,)."""
    values = np.asarray(values)
    return np.repeat(images, len(values), 0), np.tile(values, len(images))


BITS = np.unique(autoaugment.RANGES["posterize"])
THRESHOLDS = autoaugment.RANGES["solarize"]
FACTORS = np.unique(np.concatenate([1 - autoaugment.RANGES["color"], 1 + autoaugment.RANGES["color"]]))
ENHANCE = {"color": (pil_ops.color, ImageEnhance.Color), "contrast": (pil_ops.contrast, ImageEnhance.Contrast),
           "brightness": (pil_ops.brightness, ImageEnhance.Brightness),
           "sharpness": (pil_ops.sharpness, ImageEnhance.Sharpness)}
SHIFTS = [s * m * 32 for m in autoaugment.RANGES["translateX"] for s in (-1, 1)]
DEGREES = [s * d for d in autoaugment.RANGES["rotate"][1:] for s in (-1, 1)]
SHEARS = [s * m for m in autoaugment.RANGES["shearX"][1:] for s in (-1, 1)]
WARPS = {"translate": ([(1, 0, t, 0, 1, 0) for t in SHIFTS] + [(1, 0, 0, 0, 1, t) for t in SHIFTS], pil_ops.NEAREST),
         "rotate": ([pil_ops.rotate_matrix(d, 32, 32) for d in DEGREES], pil_ops.NEAREST),
         "shear": ([(1, m, 0, 0, 1, 0) for m in SHEARS] + [(1, 0, 0, m, 1, 0) for m in SHEARS], pil_ops.BICUBIC)}
DRAWS = 20000
POLICY = len(autoaugment.CIFAR10_POLICY)


@pytest.fixture(scope="module")
def device(images) -> dict:
    """Every op at every value the policy uses, on every image, and the policy itself: one program. The policy's
    images: every sub-policy with both ops at both signs, then the first 100 of 20,000 random draws."""
    matrices = [(m, resample) for ms, resample in WARPS.values() for m in ms]
    tables = pil_ops.stack_tables([pil_ops.warp_table(m, 32, 32, resample) for m, resample in matrices])
    xb, bits = tiled(images, BITS)
    xs, thresholds = tiled(images, THRESHOLDS)
    xf, factors = tiled(images, FACTORS)
    xw, which = tiled(images, np.arange(len(matrices)))
    xp = images[np.arange(2 * POLICY + 100) % len(images)]

    @jax.jit
    def run(key, images, xb, xs, xf, xw, xp):
        sub, applied, sign = autoaugment.draws(key, DRAWS)
        cover = jnp.arange(POLICY)
        policy = (jnp.concatenate([cover, cover, sub[:100]]),
                  jnp.concatenate([jnp.ones((2 * POLICY, 2), bool), applied[:100]]),
                  jnp.concatenate([jnp.zeros((POLICY, 2), jnp.int32), jnp.ones((POLICY, 2), jnp.int32), sign[:100]]))
        rows = jnp.asarray(pil_ops.products(factors))
        return {"invert": pil_ops.invert(images), "posterize": pil_ops.posterize(xb, jnp.asarray(bits)),
                "solarize": pil_ops.solarize(xs, jnp.asarray(thresholds, jnp.float32)),
                "autocontrast": pil_ops.autocontrast(images), "equalize": pil_ops.equalize(images),
                **{name: op(xf, rows) for name, (op, _) in ENHANCE.items()},
                "warp": pil_ops.warp(xw, tables, jnp.asarray(which), 128),
                "policy": autoaugment.apply_policy(xp, *policy), "policy_draws": policy, "draws": (sub, applied, sign)}

    out = jax.tree.map(np.asarray, run(jax.random.key(1), images, xb, xs, xf, xw, xp))
    warped, start = {}, 0
    for name, (ms, _) in WARPS.items():
        pick = (which >= start) & (which < start + len(ms))
        warped[name] = (xw[pick], out["warp"][pick], [ms[i - start] for i in which[pick]])
        start += len(ms)
    return {**out, "warped": warped, "inputs": {"posterize": (xb, bits), "solarize": (xs, thresholds),
                                                "enhance": (xf, factors), "policy": xp}}


def test_lookup_table_ops_equal_pil_exactly(images, device):
    """invert, posterize (the policy's 8..4 bits), solarize (its 10 thresholds 256 - 256 m/9), autocontrast and
    equalize: PIL's integer tables, bit for bit (autocontrast: see below)."""
    (xb, bits), (xs, thresholds) = device["inputs"]["posterize"], device["inputs"]["solarize"]
    np.testing.assert_array_equal(device["invert"], pil(images, lambda im, i: ImageOps.invert(im)))
    np.testing.assert_array_equal(device["posterize"], pil(xb, lambda im, i: ImageOps.posterize(im, int(bits[i]))))
    np.testing.assert_array_equal(device["solarize"], pil(xs, lambda im, i: ImageOps.solarize(im, thresholds[i])))
    np.testing.assert_array_equal(device["equalize"], pil(images, lambda im, i: ImageOps.equalize(im)))
    np.testing.assert_array_equal(device["autocontrast"], pil(images, lambda im, i: ImageOps.autocontrast(im)))


def test_autocontrast_equals_pil_at_every_range():
    """Every 8-bit range [lo, hi] and every value in it, including the 12094 points where PIL's double arithmetic
    lands 1 below the exact stretch (a channel's maximum mapped to 254 for lo 6, hi 242): PIL's table, bit for bit."""
    lo, hi = np.triu_indices(256, 1)
    rows = np.zeros((lo.size, 1, 258, 1), np.uint8)
    rows[:, 0, :256, 0] = np.clip(np.arange(256), lo[:, None], hi[:, None])
    rows[:, 0, 256, 0], rows[:, 0, 257, 0] = lo, hi
    want = np.stack([np.asarray(ImageOps.autocontrast(Image.fromarray(r[..., 0])))[..., None] for r in rows])
    np.testing.assert_array_equal(np.asarray(jax.jit(pil_ops.autocontrast)(rows)), want)


def test_enhance_ops_equal_pil_exactly(device):
    """ImageEnhance's Color, Contrast, Brightness and Sharpness at the policy's 19 factors 1 +- 0.9 m/9."""
    x, factors = device["inputs"]["enhance"]
    for name, (_, enhance) in ENHANCE.items():
        want = pil(x, lambda im, i, enhance=enhance: enhance(im).enhance(factors[i]))
        np.testing.assert_array_equal(device[name], want, err_msg=name)


def test_nearest_warps_equal_pil_exactly(device):
    """Translations (Image.transform's NEAREST default; the policy's +-(150/331) m/9 of the size: up to 14.5 pixels)
    and rotations (the policy's +-30 m/9 degrees; Image.rotate through RGBA, composited on grey 128)."""
    x, got, matrices = device["warped"]["translate"]
    want = pil(x, lambda im, i: im.transform(im.size, Image.AFFINE, matrices[i], fillcolor=(128,) * 3))
    np.testing.assert_array_equal(got, want)

    x, got, matrices = device["warped"]["rotate"]
    degrees = {m: d for d, m in zip(DEGREES, WARPS["rotate"][0], strict=True)}

    def rotate(im, i):
        rot = im.convert("RGBA").rotate(degrees[matrices[i]])
        return Image.composite(rot, Image.new("RGBA", rot.size, (128,) * 4), rot).convert("RGB")

    np.testing.assert_array_equal(got, pil(x, rotate))


def test_bicubic_shear_equals_pil_within_a_level(device):
    """Shear X and Y (BICUBIC, the policy's +-0.3 m/9): within 1 level, on at most 0.5% of the pixels."""
    x, got, matrices = device["warped"]["shear"]
    want = pil(x, lambda im, i: im.transform(im.size, Image.AFFINE, matrices[i], Image.BICUBIC,
                                             fillcolor=(128,) * 3)).astype(int)
    assert np.abs(got.astype(int) - want).max() <= 1
    assert np.mean(got != want) <= 0.005


def deepvoltaire(im: Image.Image, op: str, magnitude: float, sign: int) -> Image.Image:
    """DeepVoltaire/AutoAugment's ops.py, with its random.choice([-1, 1]) given as `sign`."""
    fill = (128, 128, 128)
    affine = {"shearX": ((1, magnitude * sign, 0, 0, 1, 0), Image.BICUBIC),
              "shearY": ((1, 0, 0, magnitude * sign, 1, 0), Image.BICUBIC),
              "translateX": ((1, 0, magnitude * im.size[0] * sign, 0, 1, 0), Image.NEAREST),
              "translateY": ((1, 0, 0, 0, 1, magnitude * im.size[1] * sign), Image.NEAREST)}
    if op in affine:
        return im.transform(im.size, Image.AFFINE, affine[op][0], affine[op][1], fillcolor=fill)
    if op == "rotate":
        rot = im.convert("RGBA").rotate(magnitude * sign)
        return Image.composite(rot, Image.new("RGBA", rot.size, (128,) * 4), rot).convert(im.mode)
    enhance = {"color": ImageEnhance.Color, "contrast": ImageEnhance.Contrast, "sharpness": ImageEnhance.Sharpness,
               "brightness": ImageEnhance.Brightness}
    if op in enhance:
        return enhance[op](im).enhance(1 + magnitude * sign)
    return {"posterize": lambda: ImageOps.posterize(im, int(magnitude)),
            "solarize": lambda: ImageOps.solarize(im, magnitude), "autocontrast": lambda: ImageOps.autocontrast(im),
            "equalize": lambda: ImageOps.equalize(im), "invert": lambda: ImageOps.invert(im)}[op]()


def test_cifar10_policy_equals_deepvoltaire_subpolicies(device):
    """The whole policy: each image through its sub-policy with the draws given (every sub-policy with both ops at
    both signs, then 100 random draws), against DeepVoltaire's SubPolicy on PIL; within 1 level on at most 0.5%
    of the pixels (only shearY is bicubic)."""
    sub, applied, sign = device["policy_draws"]
    x = device["inputs"]["policy"]

    def reference(im, i):
        p1, op1, m1, p2, op2, m2 = autoaugment.CIFAR10_POLICY[sub[i]]
        for stage, (op, m) in enumerate(((op1, m1), (op2, m2))):
            if applied[i, stage]:
                im = deepvoltaire(im, op, autoaugment.RANGES[op][m], 2 * int(sign[i, stage]) - 1)
        return im

    got, want = device["policy"].astype(int), pil(x, reference).astype(int)
    assert np.abs(got - want).max() <= 1
    assert np.mean(got != want) <= 0.005
    assert not np.array_equal(got, x)  # it did something


def test_draws_follow_the_policy_probabilities(device):
    """Sub-policies uniform, each op applied with its probability, signs fair: 20,000 draws, each frequency within
    4 standard errors."""
    sub, applied, sign = device["draws"]
    counts = np.bincount(sub, minlength=POLICY)
    assert np.all(np.abs(counts / DRAWS - 1 / POLICY) < 4 * np.sqrt((1 / POLICY) * (1 - 1 / POLICY) / DRAWS))
    p = autoaugment.PROB[sub]
    assert abs(applied.mean() - p.mean()) < 4 * np.sqrt((p * (1 - p)).mean() / applied.size)
    assert abs(sign.mean() - 0.5) < 4 * 0.5 / np.sqrt(sign.size)
