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
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from zoo.param.abcd import ABCD
from zoo.param.base import Parametrization
from zoo.param.completep import CompleteP
from zoo.param.critical import Critical
from zoo.param.depth_mup import DepthMuP
from zoo.param.gauge import MultiplierFree, multiplier_free, rescale_init
from zoo.param.infer import infer_tags, infer_tags_from
from zoo.param.mean_field import MeanField
from zoo.param.mup import MuP
from zoo.param.ntk import NTK
from zoo.param.ntk_mup import NTKMuP
from zoo.param.sp import SP
from zoo.param.tags import KINDS, Tag
from zoo.registry import Registry, named_subclass
from zoo.schema import check_float32, check_type, from_text, option_fields, stored_form


def _plugin(name: str, cls: Any) -> type[Parametrization]:
    """A Parametrization subclass with a `name`, and a `table` holding every kind's (a, b, c, d) as four real numbers
    (a kind left out, three exponents or a text one failed only where a model or optimizer first read it)."""
    cls = named_subclass(Parametrization, "plugin")(name, cls)
    table = cls.table
    for kind in KINDS:
        row = table.get(kind) if isinstance(table, Mapping) else None
        if not (isinstance(row, Sequence) and not isinstance(row, str) and len(row) == 4 and all(
                isinstance(x, numbers.Real) and not isinstance(x, bool) for x in row)):
            raise ValueError(f"plugin {cls.name!r}: its table must give every kind ({', '.join(KINDS)}) four "
                             f"exponents (a, b, c, d) as numbers; {kind}: {row!r}")
    return cls


PLUGINS = Registry("parametrization", "zoo.params", _plugin)


def register(cls: type[Parametrization]) -> type[Parametrization]:
    """Add a plugin class (a Parametrization subclass with a unique `name`); usable as a decorator."""
    return PLUGINS.register_class(cls)


def names() -> list[str]:
    """The registered plugin names (zoo's and those of installed packages)."""
    return PLUGINS.names()


def options(name: str) -> list[str]:
    """The options a plugin accepts."""
    return [f.name for f in dataclasses.fields(PLUGINS.get(name))]


# options that scale a whole network's signal (a sweep's traced values pass unchecked)
SCALES = {"init_mult": "multiplies every init std", "readout_mult": "multiplies the readout's output"}


def get(name: str, **opts: Any) -> Parametrization:
    """An instance of plugin `name` (a registered name or module:Class). String option values (from a command line)
    are converted to the option's type; numbers must be finite; freeze= names known kinds."""
    if not isinstance(name, str):
        raise TypeError(f"zoo.param.get takes a plugin's name (one of {', '.join(names())} or module:Class), not "
                        f"{type(name).__name__}")
    cls = PLUGINS.get(name)
    fields = option_fields(f"plugin {name!r}", cls, opts, "--param-opt")
    plugin = cls(**{k: _convert(name, k, v, fields[k].default) for k, v in opts.items()})
    if "freeze" in opts:  # an unknown kind is refused here; `output,input` is `input,output`, one run's identity
        plugin = dataclasses.replace(plugin, freeze=",".join(plugin.frozen_kinds()))
    for key in opts:  # a number float32 makes 0 or inf (init_mult=1e-50: nothing trains, with rc 0)
        value = getattr(plugin, key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            check_float32(f"option {key} of {name!r}", value, None)
    for key, what in SCALES.items():
        value = getattr(plugin, key)
        if isinstance(value, (int, float)) and value <= 0:
            raise ValueError(f"option {key} of {name!r} {what}: it must be positive, got {value:g} (at 0 no gradient "
                             "reaches the weights, and nothing trains)")
    return plugin



def stored_options(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """`given` typed as `get` types them, in a settings file's form (`stored_form`): a command line's alpha=1 and a
    file's 1.0 are one setting in a run's identity. As given where the plugin or an option is unknown (refused where
    the run resolves its settings), where typing them would import code a file named, or where a value is no setting
    (a sweep's arrays)."""
    if not given or not PLUGINS.importable(name):
        return given
    try:
        plugin = get(name, **given)
        return stored_form({k: getattr(plugin, k) for k in given})
    except (ValueError, TypeError):
        return given


def _convert(plugin: str, key: str, value: Any, default: Any) -> Any:
    """An option value as its default's type: true/false for booleans, a finite number for numbers (an option
    without a default, None, keeps what it is given, a number checked to be finite). Arrays (a sweep's traced
    values) pass as they are."""
    where = f"option {key} of {plugin!r}"
    if isinstance(default, str):  # a file's list (freeze: [input, output]) is no comma list
        return check_type(where, value, str)
    if isinstance(default, bool):
        return from_text(where, value, bool) if isinstance(value, str) else check_type(where, value, bool)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and (default is None or
                                                                            isinstance(default, (int, float))):
        return check_type(where, value, float)
    if isinstance(default, (int, float)) and isinstance(value, (str, list, tuple, dict)):
        return from_text(where, value, float) if isinstance(value, str) else check_type(where, value, float)
    if default is None and isinstance(value, str):
        try:
            float(value)  # a number in any digits (a word, a path or a list stays text), read as typed below
        except ValueError:
            return value
        return from_text(where, value, float)
    return value


for _cls in (SP, NTK, MuP, MeanField, DepthMuP, CompleteP, NTKMuP, ABCD, Critical):
    register(_cls)

__all__ = ["KINDS", "MultiplierFree", "Parametrization", "Tag", "get", "infer_tags", "infer_tags_from",
           "multiplier_free", "names", "options", "register", "rescale_init"]
