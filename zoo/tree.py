"""Pytree helpers every floor may use (it imports nothing of zoo)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def key_path(path: Sequence[Any]) -> str:
    """A pytree key path as "block_0/mlp/w" (dict keys, attribute names, indices; nnx's and orbax's "value" leaf
    key dropped, a module named "value", an attention's, kept), the name a parameter goes by in checkpoints, rules
    and exports."""
    parts = [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path]
    return "/".join(parts[:-1] if parts[-1:] == ["value"] else parts)


def fill_by_name(target: Any, values: dict[str, Any]) -> tuple[Any, list[str]]:
    """`target` (a pytree of arrays or ShapeDtypeStructs) with each leaf replaced by the value of the same name
    (`key_path`) and shape in `values`, cast to the leaf's dtype and placed as it is placed; leaves without one keep
    their own. Returns the tree and the leaves that kept their own, as "name (why)"."""
    import jax
    import jax.numpy as jnp

    flat, treedef = jax.tree_util.tree_flatten_with_path(target)
    leaves, kept = [], []
    for path, leaf in flat:
        name = key_path(path)
        value = values.get(name)
        if value is None or tuple(value.shape) != tuple(leaf.shape):
            kept.append(f"{name} ({'missing' if value is None else f'shape {tuple(value.shape)} -> {leaf.shape}'})")
            leaves.append(leaf)
            continue
        value = jnp.asarray(value, leaf.dtype)
        sharding = getattr(leaf, "sharding", None)
        leaves.append(jax.device_put(value, sharding) if sharding is not None else value)
    return jax.tree_util.tree_unflatten(treedef, leaves), kept
