"""MixUp, CutMix and random erasing on the device against timm's Mixup and RandomErasing, and the --augment
pipeline. Mixing is checked exactly (each label weight is the weight or box area its image was mixed with); the
draws, statistically against timm's own sampling code run in numpy (below, line for line), to 4 standard errors."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo.data import augment, erasing, mix
from zoo.train.step import run_once_options


def constant_images(n: int, size: int = 16) -> tuple[jax.Array, jax.Array]:
    """Image i is the constant i + 1 (so each pixel says which image it came from); labels i mod 10."""
    values = jnp.arange(1.0, n + 1)
    return jnp.broadcast_to(values[:, None, None, None], (n, size, size, 3)), jnp.arange(n) % 10


MIX_N, MIX_SIZE = 64, 16
DRAWS_N = 4096


ERASE_N, ERASE_SIZE = 4096, 16
ERASING = erasing.Erasing(prob=0.7, min_area=0.02, max_area=0.4, min_aspect=0.3, mode="const")
PIPELINE = augment.parse_ops("crop,flip,autoaugment,erasing,mixup,cutmix")
BATCH = {"x": jnp.asarray(np.random.default_rng(0).integers(0, 256, (8, 32, 32, 3), dtype=np.uint8)),
         "y": jnp.arange(8) % 10}


@pytest.fixture(scope="module")
def sampled() -> dict:
    """64 images mixed in each mode (MixUp and CutMix both on) and 4096 in mode elem for the draws; 4096 images of
    ones erased (const) and 512 of fives (pixel, rand); in a second program (XLA compiles one program of both
    several times slower than the two), the pipelines crop_flip and all ops on a batch, and pad_crop_flip on it; each
    program runs once, so it is compiled with XLA's backend optimisation off
    (run_once_options(): the module 41 -> 17 CPU-s)."""
    modes = {mode: mix.Mixing(mixup_alpha=1.0, cutmix_alpha=1.0, prob=0.8, switch_prob=0.5, mode=mode)
             for mode in mix.MODES}
    x, y = constant_images(MIX_N, MIX_SIZE)
    xd, yd = constant_images(DRAWS_N, MIX_SIZE)
    draws = mix.Mixing(mixup_alpha=1.0, cutmix_alpha=1.0, prob=0.6, switch_prob=0.3, mode="elem")
    ones, fives = jnp.ones((ERASE_N, ERASE_SIZE, ERASE_SIZE, 3)), jnp.full((512, 16, 16, 3), 5.0)
    noise = {m: erasing.Erasing(prob=1.0, mode=m) for m in ("pixel", "rand")}
    legacy = augment.Augment(augment.parse_ops("crop_flip"), augment.AugmentOptions(), 10)
    full = augment.Augment(PIPELINE, augment.options(PIPELINE, {"pad_mode": "constant"}), 10)

    @jax.jit
    def sample(key, x, xd, ones, fives):  # arguments, not constants: XLA would fold the ops on them
        mixed = {**{m: mix.mix(key, x, y, 10, c) for m, c in modes.items()}, "draws": mix.mix(key, xd, yd, 10, draws)}
        erased = {"const": erasing.erase(key, ones, ERASING), **{m: erasing.erase(key, fives, e)
                                                                  for m, e in noise.items()}}
        return {"mixed": mixed, "erased": erased}

    @jax.jit
    def pipelines(key, batch):
        return {"pad_crop_flip": augment.pad_crop_flip(key, batch["x"]), "crop_flip": legacy(key, batch),
                "all": full(key, batch)}

    key = jax.random.key(3)
    once = lambda f, *args: f.lower(*args).compile(run_once_options())(*args)  # noqa: E731  (each program runs once)
    out = jax.tree.map(np.asarray, {**once(sample, key, x, xd, ones, fives), "pipelines": once(pipelines, key, BATCH)})
    out["mixed"] = {k: (v[0][..., 0], v[1]) for k, v in out["mixed"].items()}
    return out


@pytest.fixture(scope="module")
def mixed(sampled) -> dict:
    return sampled["mixed"]


@pytest.fixture(scope="module")
def erased(sampled) -> dict:
    return sampled["erased"]


@pytest.mark.parametrize("mode", mix.MODES)
def test_mixup_and_cutmix_mix_the_labels_by_the_weight_and_area_used(mixed, mode):
    """Per image: MixUp's weight read back from its pixels, CutMix's from the share of its own pixels, equal the
    weight its label got (lam e_i + (1 - lam) e_partner, the partner B - 1 - i); in mode batch one lam for all."""
    images, target = mixed[mode]
    y = np.arange(MIX_N) % 10
    own, partner = np.arange(1.0, MIX_N + 1), np.arange(MIX_N, 0.0, -1)
    is_own, is_partner = images == own[:, None, None], images == partner[:, None, None]
    cut = np.all(is_own | is_partner, axis=(1, 2)) & (own != partner)
    kept = np.where(cut, is_own.mean((1, 2)), (images[:, 0, 0] - partner) / (own - partner))
    np.testing.assert_allclose(target.sum(1), 1.0, rtol=1e-6)
    onehot = np.eye(10)[y]
    np.testing.assert_allclose(target, kept[:, None] * onehot + (1 - kept[:, None]) * onehot[::-1], atol=1e-5)
    if mode == "batch":
        assert len(np.unique(np.round(kept, 5))) == 1
    else:
        assert cut.any() and ((kept < 1) & ~cut).any() and (kept == 1).any()


def timm_rand_bbox(rng: np.random.Generator, size: int, lam: np.ndarray) -> np.ndarray:
    """timm.data.mixup.rand_bbox (margin 0, `count` boxes) and correct_lam: the lam of the area kept."""
    ratio = np.sqrt(1 - lam)
    cut = (size * ratio).astype(int)
    cy, cx = rng.integers(0, size, len(lam)), rng.integers(0, size, len(lam))
    yl, yh = np.clip(cy - cut // 2, 0, size), np.clip(cy + cut // 2, 0, size)
    xl, xh = np.clip(cx - cut // 2, 0, size), np.clip(cx + cut // 2, 0, size)
    return 1.0 - (yh - yl) * (xh - xl) / float(size * size)


def test_mixing_draws_follow_timm(mixed):
    """Mode elem, 4096 images: the share mixed is prob (0.6), the share of those cut is switch_prob (0.3), and
    CutMix's corrected lam (Beta(1, 1) drawn, then the clipped box) has the mean timm's rand_bbox gives."""
    images, target = mixed["draws"]
    y = np.arange(DRAWS_N) % 10
    own = np.arange(1.0, DRAWS_N + 1)
    changed = np.any(images != own[:, None, None], axis=(1, 2))
    cut = changed & ~np.all(images == images[:, :1, :1], axis=(1, 2))  # MixUp keeps an image flat, a box not
    se = lambda p, k: 4 * math.sqrt(p * (1 - p) / k)  # noqa: E731
    assert abs(changed.mean() - 0.6) < se(0.6, DRAWS_N) + 0.01  # + a box of 0 pixels (lam near 1) changes nothing
    assert abs(cut.sum() / changed.sum() - 0.3) < se(0.3, changed.sum()) + 0.01
    rng = np.random.default_rng(0)
    reference = timm_rand_bbox(rng, MIX_SIZE, rng.beta(1.0, 1.0, 100000))
    two_labels = cut & (y != y[::-1])
    lam_cut = target[two_labels, y[two_labels]]
    assert abs(lam_cut.mean() - reference.mean()) < 4 * reference.std() / math.sqrt(len(lam_cut))


def timm_erase(rng: np.random.Generator, size: int, e: erasing.Erasing) -> tuple[int, int] | None:
    """timm.data.random_erasing.RandomErasing._erase, count 1: the (h, w) of the box, or None."""
    if rng.random() > e.prob:
        return None
    log_ratio = (math.log(e.min_aspect), math.log(1 / e.min_aspect))
    for _ in range(10):
        target_area = rng.uniform(e.min_area, e.max_area) * size * size
        aspect = math.exp(rng.uniform(*log_ratio))
        h, w = int(round(math.sqrt(target_area * aspect))), int(round(math.sqrt(target_area / aspect)))
        if w < size and h < size:
            return h, w
    return None


def test_random_erasing_follows_timm(erased):
    """4096 images of 16 x 16: the share erased and the mean box height, width and area as timm's sampler gives
    them (50,000 draws of it), each to 4 standard errors; the box is one rectangle filled with 0 (const)."""
    out = erased["const"]
    box = out[..., 0] == 0
    assert np.all((out == 0) == box[..., None])  # every channel
    h, w = box.any(2).sum(1), box.any(1).sum(1)
    assert np.array_equal(box.sum((1, 2)), h * w)  # a rectangle
    hit = h > 0
    rng = np.random.default_rng(0)
    ref = [timm_erase(rng, ERASE_SIZE, ERASING) for _ in range(50000)]
    ref_hw = np.array([r for r in ref if r is not None])
    p = len(ref_hw) / len(ref)
    assert abs(hit.mean() - p) < 4 * math.sqrt(p * (1 - p) / ERASE_N)
    for got, want in ((h[hit], ref_hw[:, 0]), (w[hit], ref_hw[:, 1]), ((h * w)[hit], ref_hw.prod(1))):
        assert abs(got.mean() - want.mean()) < 4 * want.std() / math.sqrt(hit.sum())


def test_random_erasing_fills_noise_in_pixel_and_rand_modes(erased):
    """pixel: standard normal noise in every erased pixel; rand: one normal colour per box and channel."""
    pixel = erased["pixel"][erased["pixel"] != 5.0]
    assert abs(pixel.mean()) < 0.02 and abs(pixel.std() - 1) < 0.02
    for img in erased["rand"][:20]:
        hit = img[..., 0] != 5.0
        assert hit.any() and all(len(np.unique(img[hit][:, c])) == 1 for c in range(3))


def test_crop_flip_is_zoos_pad_crop_flip(sampled):
    """--augment crop_flip (as --augment true was) draws exactly what pad_crop_flip drew (a run from before resumes
    bit for bit); all ops give images in [-1, 1] and soft labels."""
    pipelines = sampled["pipelines"]
    np.testing.assert_array_equal(pipelines["crop_flip"]["x"], pipelines["pad_crop_flip"])
    assert "target" not in pipelines["crop_flip"] and pipelines["crop_flip"]["x"].dtype == np.uint8
    assert augment.Augment(PIPELINE, augment.AugmentOptions(), 10).stages() == ["crop_flip", "autoaugment",
                                                                                "erasing", "mix"]
    out = pipelines["all"]
    assert out["x"].dtype == np.float32 and out["x"].min() >= -1 and out["x"].max() <= 1 + 1e-6
    np.testing.assert_allclose(out["target"].sum(1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(out["y"], BATCH["y"])


@pytest.mark.parametrize("text, error", [
    ("crop,jitter", "has no op 'jitter'"),
    ("none,crop", "gives none beside other ops"),
    ("mixup,crop", "the image ops (crop, flip, autoaugment) come first"),
    ("crop,mixup,mixup", "gives mixup twice"),
])
def test_augment_ops_refused_in_one_line(text, error):
    with pytest.raises(ValueError, match=error.replace("(", r"\(").replace(")", r"\)")):
        augment.parse_ops(text)


def test_augment_options_typed_and_refused_where_unread():
    ops = augment.parse_ops("crop,crop,autoaugment,cutmix")
    assert ops == ("crop", "crop", "autoaugment", "cutmix")
    o = augment.options(ops, {"mix_prob": "0.5", "pad_mode": "constant", "cutmix_alpha": 2})
    assert (o.mix_prob, o.pad_mode, o.cutmix_alpha) == (0.5, "constant", 2.0)
    for given, error in (({"mixup_alpha": 0.2}, "mixup_alpha is read by mixup, which --augment crop,crop,"),
                         ({"mix_prob": "2"}, "--augment-opt mix_prob must be in \\[0, 1\\]"),
                         ({"cutmix_alpha": "0"}, "cutmix_alpha must be positive"),
                         ({"switch_prob": 0.3}, "switch_prob is read only where --augment applies both mixup and "
                          "cutmix, which --augment crop,crop,autoaugment,cutmix does not"),
                         ({"blur": 1}, "has no option blur")):
        with pytest.raises(ValueError, match=error):
            augment.options(ops, given)
    assert augment.options(("mixup", "cutmix"), {"switch_prob": 0.3}).switch_prob == 0.3
    with pytest.raises(ValueError, match="erasing_min_area=0.5 is above erasing_max_area=0.4"):
        augment.options(("erasing",), {"erasing_min_area": 0.5, "erasing_max_area": 0.4})
