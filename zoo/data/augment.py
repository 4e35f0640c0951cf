"""Image augmentation on the device: the ops `--augment` names, applied in order inside the jitted train step.

    --augment crop,flip,autoaugment,erasing,mixup,cutmix --augment-opt pad_mode=constant --augment-opt mix_prob=0.5

  crop           pad by `pad` pixels (`pad_mode` reflect, or constant zeros as torchvision's RandomCrop) and crop a
                 random H x W window
  flip           mirror half the images left to right
  autoaugment    AutoAugment's CIFAR-10 policy, one sub-policy per image (zoo.data.autoaugment)
  erasing        random erasing, timm's RandomErasing (zoo.data.erasing)
  mixup, cutmix  timm's Mixup (zoo.data.mix): the labels become the mixed distribution, `target`

`crop_flip` is crop,flip (zoo's pad-crop-flip, as `--augment true` was); `none` is off. The image ops (crop, flip,
autoaugment) act on the uint8 images and come first, then erasing on the model's input ([-1, 1]), then mixing.
Every op draws per image (mixing per batch in mode "batch", as timm's default). The key is the step's
(Program.train_step: fold_in(the run's key, step)), so a resumed run augments as the uninterrupted one did.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import jax
import jax.numpy as jnp

from zoo.data import erasing, mix
from zoo.data.autoaugment import cifar10_policy
from zoo.schema import FRACTION, NON_NEGATIVE, POSITIVE, check_settings, check_type, from_text, setting

IMAGE_OPS = ("crop", "flip", "autoaugment")  # on uint8 images
OPS = (*IMAGE_OPS, "erasing", "mixup", "cutmix")
NAMES = {"none": (), "crop_flip": ("crop", "flip")}
OPEN = (lambda v: 0 < v < 1, "must be in (0, 1)")


@dataclasses.dataclass(frozen=True)
class AugmentOptions:
    """The ops' parameters (`--augment-opt K=V`); defaults are timm's (zoo's own for crop)."""

    pad: int = setting(4, "crop: pixels of padding on each side", check=NON_NEGATIVE)
    pad_mode: str = setting("reflect", "crop: padding", choices=("reflect", "constant"))
    erasing_prob: float = setting(0.5, "erasing: probability per image", check=FRACTION)
    erasing_min_area: float = setting(0.02, "erasing: smallest box, a fraction of the image", check=OPEN)
    erasing_max_area: float = setting(1 / 3, "erasing: largest box, a fraction of the image", check=OPEN)
    erasing_min_aspect: float = setting(0.3, "erasing: aspect ratios from this to its inverse",
                                        check=(lambda v: 0 < v <= 1, "must be in (0, 1]"))
    erasing_mode: str = setting("const", "erasing: fill", choices=erasing.MODES)
    mixup_alpha: float = setting(1.0, "mixup: lam ~ Beta(alpha, alpha)", check=POSITIVE)
    cutmix_alpha: float = setting(1.0, "cutmix: lam ~ Beta(alpha, alpha)", check=POSITIVE)
    mix_prob: float = setting(1.0, "mixup/cutmix: probability of mixing", check=FRACTION)
    switch_prob: float = setting(0.5, "mixup and cutmix: probability of cutmix", check=FRACTION)
    mix_mode: str = setting("batch", "mixup/cutmix: one lam per batch or per image (elem)", choices=mix.MODES)

    def __post_init__(self):
        check_settings(self, prefix="--augment-opt ")
        if self.erasing_min_area > self.erasing_max_area:
            raise ValueError(f"--augment-opt erasing_min_area={self.erasing_min_area:g} is above erasing_max_area="
                             f"{self.erasing_max_area:g}")


READ_BY = {"pad": ("crop",), "pad_mode": ("crop",), "mixup_alpha": ("mixup",), "cutmix_alpha": ("cutmix",),
           "mix_prob": ("mixup", "cutmix"), "switch_prob": ("mixup", "cutmix"), "mix_mode": ("mixup", "cutmix"),
           **{f.name: ("erasing",) for f in dataclasses.fields(AugmentOptions) if f.name.startswith("erasing_")}}
READ_BY_ALL = {"switch_prob"}  # read only where every op of READ_BY applies (the choice between mixup and cutmix)


def parse_ops(text: str) -> tuple[str, ...]:
    """`--augment`'s ops in order, `none` and `crop_flip` spelled out; refused in one line where unknown or out of
    order."""
    names = [n.strip() for n in text.split(",")]
    ops = tuple(op for n in names for op in NAMES.get(n, (n,)))
    unknown = [n for n in ops if n not in OPS]
    if unknown or ("none" in names and len(names) > 1):
        what = f"has no op {unknown[0]!r}" if unknown else "gives none beside other ops"
        raise ValueError(f"--augment {text} {what}; give none, crop_flip, or ops from {', '.join(OPS)}")
    phase = [0 if op in IMAGE_OPS else 1 if op == "erasing" else 2 for op in ops]
    if phase != sorted(phase):
        raise ValueError(f"--augment {text}: the image ops ({', '.join(IMAGE_OPS)}) come first, then erasing, then "
                         "mixup and cutmix")
    for once in ("erasing", "mixup", "cutmix"):
        if ops.count(once) > 1:
            raise ValueError(f"--augment {text} gives {once} twice; give it once")
    return ops


def options(ops: tuple[str, ...], given: dict[str, Any]) -> AugmentOptions:
    """The typed options (strings from a command line converted), each given one read by a listed op."""
    hints = typing.get_type_hints(AugmentOptions)
    unknown = sorted(set(given) - set(hints))
    if unknown:
        raise ValueError(f"--augment-opt has no option {', '.join(unknown)}; its options are {', '.join(hints)}")
    for k in given:
        if k in READ_BY_ALL and not set(READ_BY[k]) <= set(ops):
            raise ValueError(f"--augment-opt {k} is read only where --augment applies both {' and '.join(READ_BY[k])}"
                             f", which --augment {','.join(ops) or 'none'} does not: leave it out")
        if not set(READ_BY[k]) & set(ops):
            raise ValueError(f"--augment-opt {k} is read by {' and '.join(READ_BY[k])}, which --augment "
                             f"{','.join(ops) or 'none'} does not apply: leave it out")
    typed = {k: (from_text if isinstance(v, str) and hints[k] is not str else check_type)(
        f"--augment-opt {k}", v, hints[k]) for k, v in given.items()}
    return AugmentOptions(**typed)


def unit_range(x: jax.Array) -> jax.Array:
    """uint8 images as the models take them: x / 127.5 - 1, in [-1, 1] (float32)."""
    return x.astype(jnp.float32) / 127.5 - 1.0


def pad_crop_flip(key: jax.Array, x: jax.Array, pad: int = 4, mode: str = "reflect", flip: bool = True) -> jax.Array:
    """Pad by `pad` (reflect or constant zeros), crop a random HxW window per image, flip half horizontally (with
    `flip`)."""
    b, h, w, c = x.shape
    # one draw for all three choices: row shift, column shift, flip (0 or 1)
    dy, dx, flipped = jax.random.randint(key, (3, b), 0, jnp.array([[2 * pad + 1], [2 * pad + 1], [2]]))
    padded = jnp.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode=mode)
    crop = jax.vmap(lambda img, i, j: jax.lax.dynamic_slice(img, (i, j, 0), (h, w, c)))(padded, dy, dx)
    return jnp.where(flipped[:, None, None, None] == 1, crop[:, :, ::-1], crop) if flip else crop


def flip_half(key: jax.Array, x: jax.Array) -> jax.Array:
    """Each image mirrored left to right with probability 1/2."""
    flipped = jax.random.bernoulli(key, 0.5, (x.shape[0],))
    return jnp.where(flipped[:, None, None, None], x[:, :, ::-1], x)


@dataclasses.dataclass(frozen=True)
class Augment:
    """The augmentation of a run: (key, batch) -> batch, inside the jitted step. A crop followed by a flip is one
    draw (pad_crop_flip, as zoo's pad-crop-flip always was); stage i draws from fold_in(key, i), the first from
    the key itself."""

    ops: tuple[str, ...]
    options: AugmentOptions
    num_classes: int

    def stages(self) -> list[str]:
        out: list[str] = []
        for op in self.ops:
            stage = "mix" if op in ("mixup", "cutmix") else op
            if stage == "flip" and out[-1:] == ["crop"]:
                out[-1] = "crop_flip"
            elif not (stage == "mix" and out[-1:] == ["mix"]):  # mixup and cutmix: one Mixup
                out.append(stage)
        return out

    def __call__(self, key: jax.Array, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
        o, out = self.options, dict(batch)
        x = out["x"]
        for i, stage in enumerate(self.stages()):
            k = key if i == 0 else jax.random.fold_in(key, i)
            if stage in ("crop", "crop_flip"):
                x = pad_crop_flip(k, x, o.pad, o.pad_mode, flip=stage == "crop_flip")
            elif stage == "flip":
                x = flip_half(k, x)
            elif stage == "autoaugment":
                x = cifar10_policy(k, x)
            else:
                x = unit_range(x) if x.dtype == jnp.uint8 else x
                if stage == "erasing":
                    x = erasing.erase(k, x, erasing.Erasing(o.erasing_prob, o.erasing_min_area, o.erasing_max_area,
                                                            o.erasing_min_aspect, o.erasing_mode))
                else:
                    mixing = mix.Mixing(o.mixup_alpha if "mixup" in self.ops else 0.0,
                                        o.cutmix_alpha if "cutmix" in self.ops else 0.0, o.mix_prob,
                                        o.switch_prob, o.mix_mode)
                    x, out["target"] = mix.mix(k, x, out["y"], self.num_classes, mixing)
        out["x"] = x
        return out
