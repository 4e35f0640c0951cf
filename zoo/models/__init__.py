"""The model registry: name -> model class. Models only tag parameters and ask the plugin.

A model class carries what the rest of zoo needs to know about it: `config_class` (its config dataclass: width,
depth, base_width, base_depth and its own options), `task` ("lm" or "classify"), optionally `input_rank` (the
input's rank a classifier needs) and `recipe` (the run's defaults for `train.py --model NAME`). A new model is one
file and one `MODELS.register` line here (or an entry point `zoo.models` of an installed package).
"""

from __future__ import annotations

import math
import typing
from typing import Any

import jax
from flax import nnx

from zoo.param.base import Parametrization, check_plugin
from zoo.registry import Registry
from zoo.schema import check_type, from_text, option_fields, stored_form


def _model(name: str, cls: Any) -> type[nnx.Module]:
    if not (isinstance(cls, type) and issubclass(cls, nnx.Module) and hasattr(cls, "config_class")
            and getattr(cls, "task", None) in ("lm", "classify")):
        raise ValueError(f"{name!r} is not a zoo model (an nnx.Module with a `config_class` and a `task`)")
    return cls


MODELS = Registry("model", "zoo.models", _model)
MODELS.register("mlp_resnet", "zoo.models.mlp_resnet:MLPResNet")
MODELS.register("mixer", "zoo.models.mixer:Mixer")
MODELS.register("vit", "zoo.models.vit:ViT")
MODELS.register("gpt", "zoo.models.gpt:GPT")


def names() -> list[str]:
    return MODELS.names()


def model_class(name: str) -> type[nnx.Module]:
    return MODELS.get(name)


def recipe(name: str) -> dict[str, Any]:
    """The run's defaults the model states (data, optimizer, LR, schedule, ...), as flat settings."""
    return dict(getattr(MODELS.get(name), "recipe", {}))


def recipes() -> dict[str, dict[str, Any]]:
    """Every model's recipe that loads (--help's defaults): an installed package's broken model is left out here, and
    named in one line where it is used."""
    out = {}
    for name in names():
        try:
            out[name] = recipe(name)
        except ValueError:
            continue
    return out


def config(name: str, **overrides: Any) -> Any:
    """The model's config dataclass with `overrides` applied: strings (from a command line) converted to each
    field's type, every value checked against it; unknown keys are an error."""
    cls = MODELS.get(name).config_class
    hints = typing.get_type_hints(cls)
    option_fields(f"model {name!r}", cls, overrides, "--model-opt")
    typed = {k: (from_text if isinstance(v, str) and hints[k] is not str else check_type)(
        f"model option {k}", v, hints[k]) for k, v in overrides.items()}
    return cls(**typed)


def options(name: str, pairs: list[tuple[str, str]] | dict[str, Any]) -> dict[str, Any]:
    """Model options (from a command line: strings) typed as the model's config fields."""
    given = dict(pairs)
    cfg = config(name, **given)
    return {k: getattr(cfg, k) for k in given}


def stored_options(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """`given` typed as `options` types them, in a settings file's form (`stored_form`), so that a command line's
    "16", a file's 16 and a recipe's 16 are one setting in a run's identity; as given where the model or an option is
    unknown (refused in one line where the run resolves its settings), or where typing them would import code a file
    named (a module:Object neither registered nor allowed: reading a file never runs code)."""
    if not given or not MODELS.importable(name):
        return given
    try:
        return stored_form(options(name, given))
    except (ValueError, TypeError):
        return given


def check_data(name: str, data_kind: str, in_shape: tuple[int, ...], spec: str) -> None:
    """A model meets data it can read: language models text, classifiers images (ViT and Mixer (H, W, C) ones)."""
    cls = MODELS.get(name)
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
    check_plugin("zoo.models.create", plugin)
    return MODELS.get(name)(cfg, plugin.for_model(name, cfg), rngs)


def param_count(tree: Any) -> int:
    """The number of trainable scalars of a model (its nnx.Params; a tied embedding counts once) or of a params
    state. Works on abstract models."""
    params = nnx.state(tree, nnx.Param) if isinstance(tree, nnx.Module) else tree
    return sum(math.prod(p.shape) for p in jax.tree.leaves(params))
