"""The model registry: name -> (module class, config dataclass). Models only tag parameters and ask the plugin."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
from flax import nnx

from zoo.models.gpt import GPT, GPTConfig
from zoo.models.mixer import Mixer, MixerConfig
from zoo.models.mlp_resnet import MLPResNet, MLPResNetConfig
from zoo.models.vit import ViT, ViTConfig
from zoo.param.base import Parametrization

MODELS: dict[str, tuple[type[nnx.Module], type]] = {
    "mlp_resnet": (MLPResNet, MLPResNetConfig),
    "mixer": (Mixer, MixerConfig),
    "vit": (ViT, ViTConfig),
    "gpt": (GPT, GPTConfig),
}


def names() -> list[str]:
    return sorted(MODELS)


def _lookup(name: str) -> tuple[type[nnx.Module], type]:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(names())}")
    return MODELS[name]


def config(name: str, **overrides: Any) -> Any:
    """The model's config dataclass with `overrides` applied (unknown keys are an error)."""
    cls = _lookup(name)[1]
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"model {name!r} has no option {', '.join(unknown)}; "
                         f"its options are {', '.join(sorted(fields))}")
    return cls(**overrides)


def check_data(name: str, data_kind: str, in_shape: tuple[int, ...], spec: str) -> None:
    """A model meets data it can read: language models text, classifiers images (ViT and Mixer (H, W, C) ones)."""
    cls = _lookup(name)[0]
    want = "text" if cls.task == "lm" else "image"
    if data_kind != want:
        examples = {"text": "shakespeare, synthetic:text, text:FILE", "image": "cifar10, synthetic, imagefolder:DIR"}
        raise ValueError(f"model {name} needs {want} data; {spec} is {'a text' if data_kind == 'text' else 'an image'}"
                         f" set (try --data {examples[want]})")
    rank = getattr(cls, "input_rank", None)
    if rank is not None and len(in_shape) != rank:
        raise ValueError(f"model {name} needs images of shape (height, width, channels); {spec} has inputs of shape "
                         f"{in_shape}")


def create(name: str, cfg: Any, plugin: Parametrization, rngs: nnx.Rngs) -> nnx.Module:
    return _lookup(name)[0](cfg, plugin.for_model(name, cfg), rngs)


def param_count(tree: Any) -> int:
    """The number of trainable scalars of a model (its nnx.Params; a tied embedding counts once) or of a params
    state. Works on abstract models."""
    params = nnx.state(tree, nnx.Param) if isinstance(tree, nnx.Module) else tree
    return sum(math.prod(p.shape) for p in jax.tree.leaves(params))
