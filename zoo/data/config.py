"""The data part of a run's config (its flags: --data, --seq-len, ...)."""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.schema import NON_NEGATIVE, POSITIVE, check_settings, setting


@dataclasses.dataclass(frozen=True)
class DataConfig:
    name: str = setting("cifar10", "cifar10, shakespeare, synthetic, synthetic:text, synthetic:teacher, "
                        "imagefolder:<dir|.tar.gz>, text:<file>, tokens:<dir>, tfds:<name>[:split], or a source an "
                        "installed package registers", flag="data")
    data_dir: str | None = setting(None, "data dir for tfds and the bundled files", identity=False,
                                   shown="tfds's own; the bundled data/ folder")
    cache_dir: str | None = setting(None, "where decoded image sets are cached (off: decode each time)", identity=False,
                                    shown="$ZOO_CACHE or ~/.cache/zoo")
    stream: bool | None = setting(None, "stream batches from the host through grain instead of holding the set on "
                                  "the devices", identity=False, shown="by decoded size: over 1 GiB streams")
    workers: int = setting(0, "processes that read and decode streamed batches, at most one per CPU core (0: "
                           "threads of the training process)", identity=False, check=NON_NEGATIVE)
    image_size: int | None = setting(None, "resize every image (shorter side) to N and center-crop it to N x N as it "
                                     "is read, so sets of varying image size work", metavar="N",
                                     shown="the set's own, which must be one size", check=POSITIVE)
    seq_len: int = setting(256, "context length for text data", check=POSITIVE)
    byte_level: bool = setting(False, "text as bytes instead of characters")
    augment: str = setting("none", "image augmentation on the device: none, crop_flip, or ops in order from crop, "
                           "flip, autoaugment, erasing, mixup, cutmix (zoo.data.augment)", metavar="OPS")
    augment_options: dict[str, Any] = setting({}, "augmentation option, repeatable (e.g. mix_prob=0.5; "
                                              "zoo.data.augment.AugmentOptions)", flag="augment_opt", metavar="K=V")

    def __post_init__(self):
        from zoo.data import augment

        check_settings(self)
        ops = augment.parse_ops(self.augment)  # the ops spelled out, the options typed: as the run stores them
        if self.augment_options and not ops:
            raise ValueError(f"--augment-opt {','.join(self.augment_options)} sets options of --augment's ops, but "
                             "--augment is none: leave it out, or give --augment")
        typed = augment.options(ops, self.augment_options)
        object.__setattr__(self, "augment", ",".join(ops) or "none")
        object.__setattr__(self, "augment_options", {k: getattr(typed, k) for k in self.augment_options})
