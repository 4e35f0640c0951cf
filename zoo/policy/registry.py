"""The scaling-policy registry (a name or module:Class to a ScalingPolicy subclass), apart from the package so a
policy that composes another (zoo.policy.fitted) can look its base up."""

from __future__ import annotations

from typing import Any

from zoo.policy.base import ScalingPolicy
from zoo.registry import Registry, named_subclass
from zoo.schema import check_type, from_text, option_fields

POLICIES = Registry("scaling policy", "zoo.policies", named_subclass(ScalingPolicy, "scaling policy"))


def register(cls: type[ScalingPolicy]) -> type[ScalingPolicy]:
    """Add a policy class (a ScalingPolicy subclass with a unique `name`); usable as a decorator."""
    return POLICIES.register_class(cls)


def names() -> list[str]:
    return POLICIES.names()


def get(name: str, **opts: Any) -> ScalingPolicy:
    """An instance of policy `name` (a registered name or module:Class); string option values (a command line's) are
    read as the option's type."""
    cls = POLICIES.get(name)
    fields = option_fields(f"policy {name!r}", cls, opts, "--policy-opt")
    return cls(**{k: _typed(name, k, v, type(fields[k].default)) for k, v in opts.items()})


def _typed(policy: str, key: str, value: Any, kind: type) -> Any:
    where = f"option {key} of policy {policy!r}"
    return from_text(where, value, kind) if isinstance(value, str) and kind is not str else check_type(where, value,
                                                                                                        kind)
