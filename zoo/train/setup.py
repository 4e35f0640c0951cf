"""Everything a run needs, resolved from its config: data, model config, plugin and the pure program.

Shared by train.py and the sweeps (which build one program per shape over the same data)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax.numpy as jnp

import zoo.data
import zoo.models
import zoo.param
from zoo.config import RunConfig
from zoo.optim import OptimConfig
from zoo.train.step import Program, build_program


@dataclasses.dataclass
class Setup:
    """Everything a run needs, resolved from the config."""

    cfg: RunConfig
    data: Any
    model_cfg: Any
    plugin: Any
    program: Program
    steps: int


def setup(cfg: RunConfig, data: Any = None) -> Setup:
    """Data, model config, plugin and program for `cfg` (fills cfg.width/depth with the model's values).

    `data`: an already loaded Dataset for cfg.data (sweeps build one program per shape over the same data)."""
    plugin = zoo.param.get(cfg.param, **cfg.param_opt)
    zoo.models.config(cfg.model, **cfg.model_opt)  # unknown model or option: refused before the data loads
    if data is None:
        data = zoo.data.load(cfg.data, seq_len=cfg.seq_len, byte_level=cfg.byte_level, data_dir=cfg.data_dir,
                             stream=cfg.stream, image_size=cfg.image_size)
    zoo.models.check_data(cfg.model, data.kind, tuple(data.in_shape), cfg.data)
    model_cfg = zoo.models.config(cfg.model, **_model_overrides(cfg, data))
    cfg.width, cfg.depth = model_cfg.width, model_cfg.depth
    cfg.base_width, cfg.base_depth = model_cfg.base_width, model_cfg.base_depth
    per_epoch = max(data.size("train") // cfg.batch_size, 1)
    steps = cfg.steps if cfg.steps else max(1, math.ceil((cfg.epochs or 1.0) * per_epoch))
    cfg.steps = steps
    optim_cfg = optim_config(cfg, steps)
    augment = None
    if cfg.augment and data.kind == "image":
        from zoo.data.augment import pad_crop_flip

        augment = pad_crop_flip
    dtype = jnp.bfloat16 if cfg.precision == "bf16" else jnp.float32
    program = build_program(lambda r: zoo.models.create(cfg.model, model_cfg, plugin, r), plugin, optim_cfg,
                            dtype, augment, cfg.grad_accum)
    return Setup(cfg, data, model_cfg, plugin, program, steps)


def optim_config(cfg: RunConfig, steps: int) -> OptimConfig:
    """The optimizer of a run of `steps` steps."""
    return OptimConfig(name=cfg.optimizer, lr=cfg.lr, schedule=cfg.schedule, warmup=cfg.warmup, steps=steps,
                       min_lr_ratio=cfg.min_lr_ratio, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps,
                       weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm, clip_rms=cfg.clip_rms)


def _model_overrides(cfg: RunConfig, data: Any) -> dict[str, Any]:
    """Flags and data facts mapped onto the model config's fields. The base width and depth default to the model's
    default size, where the plugins equal SP: `--width 1024` alone under muP is muP scaled from there."""
    default = zoo.models.config(cfg.model)
    fields = {f.name for f in dataclasses.fields(default)}
    given = {"width": cfg.width, "depth": cfg.depth, "base_width": cfg.base_width or default.width,
             "base_depth": cfg.base_depth or default.depth}
    out = {k: v for k, v in given.items() if v is not None}
    facts = {"in_shape": tuple(data.in_shape), "num_classes": data.num_classes, "vocab_size": data.num_classes,
             "seq_len": data.seq_len, "dtype": "bfloat16" if cfg.precision == "bf16" else "float32",
             "remat": cfg.remat == "block"}
    out.update({k: v for k, v in facts.items() if k in fields and v is not None})
    out.update(cfg.model_opt)
    return out
