"""What a parameter is, from how its shape changes between sizes (TP IVb Defs 2.9.11/2.9.12; microsoft/mup's base
shapes), independent of its tag: the kind from the axes that grow with width, residual-branch membership from a
leading axis that grows with depth. The audit predicts from these and reports where the tag disagrees."""

from __future__ import annotations

import math
from collections.abc import Mapping

from zoo.param.fans import fans_and_kind
from zoo.param.tags import Tag


def core_shape(shape: tuple[int, ...], tag: Tag) -> tuple[int, ...]:
    """The shape without leading stacked-layer axes: the fewest trailing axes whose sizes multiply to the tag's
    fan_in * fan_out (the whole shape when none do)."""
    for start in range(len(shape), -1, -1):
        if math.prod(shape[start:]) == tag.fan_in * tag.fan_out:
            return shape[start:]
    return shape


def kind_from_shapes(small: tuple[int, ...], large: tuple[int, ...], layout: str, out_axes: int = 1) -> str | None:
    """The kind of a parameter whose core shape is `small` at one width and `large` at a larger one, its fan-out
    over `out_axes` axes placed by `layout` (the tag's: a bias [heads, head_dim] of 2 is all fan-out); None when no
    kind fits (more than two width axes, or axes that change in a way no kind has)."""
    if len(small) != len(large):
        return None
    grows = [a != b for a, b in zip(small, large, strict=True)]
    return fans_and_kind(large, grows, layout, out_axes)[2]


def kinds(shapes: Mapping[str, tuple[tuple[int, ...], tuple[int, ...]]], tags: Mapping[str, Tag]) -> dict[str, str]:
    """Path -> kind by shapes, from (shape at the smallest width, shape at the largest); the tag's kind where the
    shapes cannot tell (a parameter only one width was seen of)."""
    out = {}
    for path, tag in tags.items():
        if path not in shapes:
            out[path] = tag.kind
            continue
        small, large = (core_shape(s, tag) for s in shapes[path])
        out[path] = kind_from_shapes(small, large, tag.layout, tag.out_axes) or tag.kind
    return out


def branches(shapes: Mapping[str, tuple[tuple[int, ...], tuple[int, ...]]]) -> dict[str, bool]:
    """Path -> whether the parameter is one per residual block: its leading axis changes between two depths."""
    return {p: len(a) == len(b) and len(a) > 0 and a[0] != b[0] and a[1:] == b[1:] for p, (a, b) in shapes.items()}
