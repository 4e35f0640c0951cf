"""The scaling-policy registry (a name or module:Class to a ScalingPolicy subclass), apart from the package so a
policy that composes another (zoo.policy.fitted) can look its base up."""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.policy.base import ScalingPolicy
from zoo.registry import Registry
from zoo.schema import check_type, from_text


def _policy(name: str, cls: Any) -> type[ScalingPolicy]:
    if not (isinstance(cls, type) and issubclass(cls, ScalingPolicy)) or not cls.name:
        raise ValueError(f"{name!r} is not a scaling policy (a ScalingPolicy subclass with a non-empty `name`)")
    return cls


POLICIES = Registry("scaling policy", "zoo.policies", _policy)


def register(cls: type[ScalingPolicy]) -> type[ScalingPolicy]:
    """Add a policy class (a ScalingPolicy subclass with a unique `name`); usable as a decorator."""
    try:
        return POLICIES.register(getattr(cls, "name", ""), _policy(repr(cls), cls))
    except ValueError as e:
        raise TypeError(str(e)) from None


def names() -> list[str]:
    return POLICIES.names()


def get(name: str, **opts: Any) -> ScalingPolicy:
    """An instance of policy `name` (a registered name or module:Class); string option values (a command line's) are
    read as the option's type."""
    cls = POLICIES.get(name)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(opts) - set(fields))
    if unknown:
        raise ValueError(f"policy {name!r} has no option {', '.join(map(repr, unknown))}; its options are "
                         f"{', '.join(fields) or 'none'}")
    return cls(**{k: _typed(name, k, v, type(fields[k].default)) for k, v in opts.items()})


def _typed(policy: str, key: str, value: Any, kind: type) -> Any:
    where = f"option {key} of policy {policy!r}"
    return from_text(where, value, kind) if isinstance(value, str) and kind is not str else check_type(where, value,
                                                                                                        kind)
