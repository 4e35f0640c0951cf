"""A leaf's fans and kind from which of its axes grow with width (design.md section 2: the kinds by width axes)."""

from __future__ import annotations

import math


def fan_out_axes(ndim: int, layout: str, out_axes: int = 1) -> range:
    """The k = `out_axes` fan-out axes of a leaf of `ndim` axes (ndim > k): the last k under in_out ([..., in, out]:
    Flax, Haiku), the first k under out_in ([out, in, ...]: Equinox, PyTorch), the k before the last under
    spatial_out_in ([..., out, in]: Haiku's ConvTranspose [kh, kw, out, in]); the other axes are the fan-in."""
    if layout == "in_out":
        return range(ndim - out_axes, ndim)
    if layout == "out_in":
        return range(out_axes)
    return range(ndim - 1 - out_axes, ndim - 1)


def fans_and_kind(shape: tuple, grows: list[bool], layout: str, out_axes: int = 1
                  ) -> tuple[int, int, str | None]:
    """(fan_in, fan_out, kind or None when no kind fits) of a leaf whose axes grow as `grows` says: fan_out the
    product of its `out_axes` fan-out axes (fan_out_axes), fan_in of the rest;
    with one width axis, input when it is a fan-out axis, output when a fan-in one; with two, hidden when one is
    each."""
    if not shape:
        return 1, 1, "scalar"
    k = sum(grows)
    if len(shape) <= out_axes:
        return 1, math.prod(shape), {0: "scalar", 1: "vector"}.get(k)
    outs = fan_out_axes(len(shape), layout, out_axes)
    fan_out = math.prod(shape[a] for a in outs)
    fan_in = math.prod(shape) // fan_out
    grows_out = sum(grows[a] for a in outs)
    if k == 0:
        return fan_in, fan_out, "scalar"
    if k == 2:
        return fan_in, fan_out, "hidden" if grows_out == 1 else None
    if k == 1:
        return fan_in, fan_out, "input" if grows_out else "output"
    return fan_in, fan_out, None
