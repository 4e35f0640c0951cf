"""Everything a run needs, resolved from its config: data, model config, plugin and the pure program.

Shared by train.py and the sweeps (which build one program per shape over the same data)."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax.numpy as jnp

import zoo.data
import zoo.models
import zoo.param
from zoo.config import RunConfig, word
from zoo.data.augment import Augment, options, parse_ops
from zoo.param.base import Parametrization
from zoo.schema import INT32_MAX, compute_dtype
from zoo.train.step import Program, build_program


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything a run needs. `cfg` is resolved: width, depth, base sizes and steps filled in."""

    cfg: RunConfig
    data: Any
    model_cfg: Any
    plugin: Parametrization
    program: Program

    @property
    def steps(self) -> int:
        return self.cfg.loop.steps


def setup(cfg: RunConfig, data: Any = None, reading: bool = False) -> Setup:
    """Data, model config, plugin and program for `cfg`; `data`: an already loaded set for cfg.data (sweeps build
    one program per shape over the same data). Options that act on nothing in the model are refused for a run to
    train, not where a recorded run is `reading` (an export, a sample, an audit or a fork of it)."""
    plugin = zoo.param.get(cfg.param.name, **cfg.param.options)
    zoo.models.config(cfg.model.name, **cfg.model.options)  # unknown model or option: refused before the data loads
    if data is None:
        data = zoo.data.load(cfg.data)
    zoo.models.check_data(cfg.model.name, data.kind, tuple(data.in_shape), cfg.data.name)
    model_cfg = model_config(cfg, data)
    steps = cfg.loop.steps or epoch_steps(cfg, data)
    cfg = cfg.replace(width=model_cfg.width, depth=model_cfg.depth, base_width=model_cfg.base_width,
                      base_depth=model_cfg.base_depth, steps=steps, epochs=None)  # the horizon in steps only
    augment = augmentation(cfg, data)
    dtype = jnp.dtype(compute_dtype(cfg.loop.precision))
    program = build_program(None, plugin, cfg.optim, dtype, augment, cfg.loop.grad_accum, horizon=steps,
                            label_smoothing=cfg.loop.label_smoothing,
                            model_of=functools.partial(zoo.models.create, cfg.model.name, model_cfg))
    if not reading:
        check_attention_options(cfg, plugin, program)
        plugin.check_model(cfg.model.name, model_cfg)
    return Setup(cfg, data, model_cfg, plugin, program)


def check_attention_options(cfg: RunConfig, plugin: Parametrization, program: Program) -> None:
    """The run's plugin options that scale attention logits (attn_mult, abcd's attn_exp), other than their defaults,
    on a model that never asked its plugin for that scale (an MLP-ResNet, a Mixer): refused, where they were recorded
    in the run's identity and changed nothing. (A plugin built in code, a family over models, may carry them.)"""
    defaults = {f.name: f.default for f in dataclasses.fields(plugin) if f.name in ("attn_mult", "attn_exp")}
    given = {k: v for k, v in cfg.param.options.items() if k in defaults and v != defaults[k]}
    if given and not any(question[0] == "attn_scale" for question in program.numbers.questions):
        options = " ".join(f"{k}={word(v)}" for k, v in given.items())
        raise ValueError(f"--param-opt {options} scales attention logits, and {cfg.model.name} has no attention: "
                         "leave it out")


def augmentation(cfg: RunConfig, data: Any) -> Augment | None:
    """The run's --augment on its data (zoo.data.augment.Augment), None when off. It takes uint8 images (height,
    width, channels), AutoAugment RGB ones, a crop's pad below their size: refused in one line otherwise (it was
    dropped silently on text and failed inside the compile on vectors; a pad of 1000 took 12 s a step)."""
    ops = parse_ops(cfg.data.augment)
    if not ops:
        return None
    name, given = cfg.data.name, f"--augment {cfg.data.augment}"
    if data.kind != "image" or len(data.in_shape) != 3:
        what = "a text set" if data.kind == "text" else f"a set of examples of shape {tuple(data.in_shape)}"
        raise ValueError(f"{given} augments images (height, width, channels), but {name} is {what}; leave it out")
    if "autoaugment" in ops and data.in_shape[-1] != 3:
        raise ValueError(f"{given}: AutoAugment's colour ops weigh R, G and B, but {name}'s images have "
                         f"{data.in_shape[-1]} channel(s); leave autoaugment out")
    opts = options(ops, cfg.data.augment_options)
    if any(op.startswith("crop") for op in ops) and opts.pad >= min(data.in_shape[:2]):
        raise ValueError(f"--augment-opt pad={opts.pad} pads {name}'s {data.in_shape[0]}x{data.in_shape[1]} images by "
                         "as much as they are wide: a crop of them is mostly padding; give a pad below their size")
    return Augment(ops, opts, data.num_classes)


def epoch_steps(cfg: RunConfig, data: Any) -> int:
    """The steps of --epochs (default 1) over the training set at the batch size."""
    per_epoch = max(data.size("train") // cfg.loop.batch_size, 1)
    steps = max(1, math.ceil((cfg.loop.epochs or 1.0) * per_epoch))
    if steps > INT32_MAX:
        raise ValueError(f"--epochs {cfg.loop.epochs:g} is {steps:,} steps of {per_epoch:,}, more than 2^31 - 1")
    return steps


DATA_FACTS = ("in_shape", "num_classes", "vocab_size", "seq_len")  # the model config's fields the data sets


def model_config(cfg: RunConfig, data: Any = None) -> Any:
    """The model config the run builds; without `data` (--print-config) the fields it sets (DATA_FACTS) are the
    model's defaults."""
    return zoo.models.config(cfg.model.name, **_model_overrides(cfg, data))


def _model_overrides(cfg: RunConfig, data: Any) -> dict[str, Any]:
    """Flags and data facts mapped onto the model config's fields. The base width and depth default to the model's
    default size, where the plugins equal SP: `--width 1024` alone under muP is muP scaled from there."""
    m = cfg.model
    default = zoo.models.config(m.name)
    fields = {f.name for f in dataclasses.fields(default)}
    given = {"width": m.width, "depth": m.depth, "base_width": m.base_width or default.width,
             "base_depth": m.base_depth or default.depth}
    out = {k: v for k, v in given.items() if v is not None}
    known = {} if data is None else dict(zip(DATA_FACTS, (tuple(data.in_shape), data.num_classes, data.num_classes,
                                                          data.seq_len), strict=True))
    facts = {**known, **{k: v for k, (_, v) in cfg.loop.model_facts().items()}}
    out.update({k: v for k, v in facts.items() if k in fields and v is not None})
    options = check_size_options(cfg)
    for k, v in options.items():
        if k in facts and k not in ("dtype", "remat") and out.get(k) is not None and _differs(v, out[k]):
            raise ValueError(f"model option {k}={v} contradicts the data ({k} = {out[k]}); give it once")
    out.update(options)
    return out


def check_size_options(cfg: RunConfig) -> dict[str, Any]:
    """The model options, typed (--model-opt width=32 is the int 32, not "32"), each size among them that a flag
    gives too (--width, --depth, --base-width, --base-depth) the same: needs no data, so --print-config checks it."""
    m = cfg.model
    options = zoo.models.options(m.name, m.options)
    for k in ("width", "depth", "base_width", "base_depth"):
        if k in options and getattr(m, k) is not None and _differs(options[k], getattr(m, k)):
            raise ValueError(f"model option {k}={options[k]} contradicts --{k.replace('_', '-')} ({k} = "
                             f"{getattr(m, k)}); give it once")
    return options


def _differs(a: Any, b: Any) -> bool:
    return (tuple(a) if isinstance(a, (list, tuple)) else a) != (tuple(b) if isinstance(b, (list, tuple)) else b)
