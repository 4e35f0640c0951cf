"""Parametrization plugins and their registry.

    zoo.param.get("depth_mup", alpha=1.0)   # an instance
    zoo.param.names()                       # what is registered
    zoo.param.register(MyParam)             # a new plugin, usable by every model and tool

Any JAX model (Haiku, Flax Linen, Equinox, a plain pytree) under a plugin, through its init and optimizer:

    tags = zoo.param.infer_tags(params_at_base_width, params, base_width=64, width=1024)
    free = zoo.param.multiplier_free(zoo.param.get("mup"), tags)
    params = zoo.param.rescale_init(params, tags, free)    # then zoo.optim.build(cfg, free, tags)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.param.abcd import ABCD
from zoo.param.base import Parametrization
from zoo.param.completep import CompleteP
from zoo.param.critical import Critical
from zoo.param.depth_mup import DepthMuP
from zoo.param.gauge import MultiplierFree, multiplier_free, rescale_init
from zoo.param.infer import infer_tags
from zoo.param.mean_field import MeanField
from zoo.param.mup import MuP
from zoo.param.ntk import NTK
from zoo.param.ntk_mup import NTKMuP
from zoo.param.sp import SP
from zoo.param.tags import KINDS, Tag

_REGISTRY: dict[str, type[Parametrization]] = {}


def register(cls: type[Parametrization]) -> type[Parametrization]:
    """Add a plugin class (a Parametrization subclass with a unique `name`); usable as a decorator."""
    if not (isinstance(cls, type) and issubclass(cls, Parametrization)) or not cls.name:
        raise TypeError("a plugin is a Parametrization subclass with a non-empty `name`")
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    """The registered plugin names."""
    return sorted(_REGISTRY)


def options(name: str) -> list[str]:
    """The options a plugin accepts."""
    return [f.name for f in dataclasses.fields(_lookup(name))]


def get(name: str, **opts: Any) -> Parametrization:
    """An instance of plugin `name`; string option values (from a CLI) are converted to the field's type."""
    cls = _lookup(name)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(opts) - set(fields))
    if unknown:
        raise ValueError(f"plugin {name!r} has no option {', '.join(map(repr, unknown))}; "
                         f"its options are {', '.join(fields)}")
    converted = {k: _convert(name, k, v, fields[k].default) for k, v in opts.items()}
    return cls(**converted)


def _lookup(name: str) -> type[Parametrization]:
    if name not in _REGISTRY:
        raise ValueError(f"unknown parametrization {name!r}; choose from {', '.join(names())}")
    return _REGISTRY[name]


def _convert(plugin: str, key: str, value: Any, default: Any) -> Any:
    if not isinstance(value, str):
        return value
    if isinstance(default, bool):
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"option {key} of {plugin!r} must be true or false, got {value!r}")
    if isinstance(default, (int, float)):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"option {key} of {plugin!r} must be a number, got {value!r}") from None
    return value


for _cls in (SP, NTK, MuP, MeanField, DepthMuP, CompleteP, NTKMuP, ABCD, Critical):
    register(_cls)

__all__ = ["KINDS", "MultiplierFree", "Parametrization", "Tag", "get", "infer_tags", "multiplier_free", "names",
           "options", "register", "rescale_init"]
