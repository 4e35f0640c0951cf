"""Pytree helpers every floor may use (it imports nothing of zoo)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def key_path(path: Sequence[Any]) -> str:
    """A pytree key path as "block_0/mlp/w" (dict keys, attribute names, indices; nnx's and orbax's "value" leaf
    keys dropped), the name a parameter goes by in checkpoints, rules and exports."""
    parts = [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path]
    return "/".join(p for p in parts if p != "value")
