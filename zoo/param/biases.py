"""What a layer's bias tells zoo.param.infer_tags about the layer: its weight's layout (a bias [C] has the weight's
fan-out C), a bias or gain stored broadcastable over size-1 axes (a vector, not an input or output layer), and a
readout's bias (role readout_bias)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from zoo.param.fans import fan_out_axes
from zoo.param.stacks import exact, parent
from zoo.param.tags import LAYOUTS, Tag

BIAS_NAMES = ("b", "bias")  # a layer's bias: Haiku's b, Flax's and Equinox's bias
GAIN_NAMES = (*BIAS_NAMES, "offset", "scale")  # biases and norm gains: Haiku (b, offset, scale), Flax, Equinox
STORED = {"in_out": "[..., in, out] (Flax, Haiku)", "out_in": "[out, in, ...] (Equinox, PyTorch)",
          "spatial_out_in": "[..., out, in] (Haiku's ConvTranspose, Flax's with transpose_kernel=True)"}


def check_bias_sizes(names: Sequence[str], tags: list[Tag | None], shapes: Mapping[str, tuple[tuple, tuple]],
                     roles: Mapping[str, set[str]]) -> None:
    """A layer's bias [C] (named b or bias) has its weight's fan-out C. Where a module's only weight (of one fan-out
    axis; a stack axis aside) reads as fan-out of another size under its layout, but another layout's fan-out axis
    has C entries, the layout is wrong, and read so it swaps the kinds: an Equinox Linear [out, in] read in_out
    makes the first layer [n, 3072] an output layer (a readout's init and LR) and the readout [10, n] an input
    layer; a Haiku ConvTranspose kernel [..., out, in] outside Haiku's module names (Flax's with
    transpose_kernel=True) needs spatial_out_in. One line naming the weight, its bias and the layout to give; where
    no layout has the fan-out on the bias's axis (PyTorch's ConvTranspose [in, out, kh, kw], read out_in with its
    fans swapped), one line saying so."""
    tagged = {n: t for n, t in zip(names, tags, strict=True) if t is not None}

    def core(name: str) -> tuple:
        return shapes[name][1][1:] if "stacked" in roles[name] else shapes[name][1]

    for bias in (n for n in tagged if n.rpartition("/")[2] in BIAS_NAMES and len(core(n)) == 1):
        size = core(bias)[0]
        weights = [n for n in tagged if parent(n) == parent(bias) and len(core(n)) >= 2]
        if len(weights) != 1 or tagged[weights[0]].out_axes != 1:
            continue
        weight, shape = weights[0], core(weights[0])
        given = tagged[weight].layout
        axis = {layout: fan_out_axes(len(shape), layout)[0] for layout in LAYOUTS
                if layout != "spatial_out_in" or len(shape) >= 3}
        fits = [layout for layout in ("spatial_out_in", "out_in", "in_out") if layout in axis
                and shape[axis[layout]] == size]
        elsewhere = [a for a, size_a in enumerate(shape) if size_a == size]
        if shape[axis[given]] == size or not elsewhere:  # a bias of no axis's size is not this weight's
            continue
        read = f"parameter {weight!r} {shape} reads as fan-out {shape[axis[given]]} ({given}), but its bias {bias!r} " \
               f"has {size} entries"
        if not fits:
            raise ValueError(f"{read}, as its axis {elsewhere[0]}, where no layout has the fan-out (PyTorch's "
                             "ConvTranspose stores [in, out, kh, kw]): give zoo the weight with its axes permuted to "
                             f"one of {', '.join(STORED.values())}")
        raise ValueError(f"{read}, as its axis {axis[fits[0]]}: a weight stored {STORED[fits[0]]}; give its layout: "
                         f"rules={{{exact(weight)!r}: {fits[0]!r}}} (or layout={fits[0]!r} for every weight)")


def broadcast_biases(names: Sequence[str], tags: list[Tag | None], ranks: Mapping[str, int],
                     shapes: Mapping[str, tuple[tuple, tuple]]) -> list[Tag | None]:
    """`tags` with vector kind (fan-in 1, fan-out C) on each bias or gain stored broadcastable over size-1 axes: a leaf
    whose axes but its one width axis C all have size 1, and which is named as one (GAIN_NAMES: Haiku's BatchNorm and
    LayerNorm scale and offset [1, C, 1, 1] NCHW or [1, 1, 1, C] NHWC in a module of their own, a stack of one
    layer's gain [1, C]) or sits beside a weight in its module whose fan-out is C and whose fan-in is larger than 1
    (Equinox's Conv2d bias [out, 1, 1] beside its weight [out, in, kh, kw], out_in; Haiku's NCHW Conv2D bias
    [out, 1, 1] beside w [kh, kw, in, out], in_out). Read by shapes alone it is an input layer of fan-in 1 (decayed,
    orthogonalised with muon_io) or an output layer of fan-in C (a readout's init and LR); it is its layer's bias as
    Linear's [out] is. Beside a weight, a leaf read as output needs 3+ axes (its `ranks`, less a stack axis): a
    readout to one output [n, 1] is no bias. A weight of fan-in 1 beside a 1-D bias (a Linear from 1 feature), a cls
    token [1, 1, n] and unnamed leaves at the top of the tree stay input, as do leaves with a kind rule (not in
    `ranks`)."""
    weights = {(parent(n), t.fan_out) for n, t in zip(names, tags, strict=True) if t is not None and t.fan_in > 1}

    def size(name: str, t: Tag) -> int | None:
        """The fan-out of a leaf read as an input layer of fan-in 1, the fan-in of one read as an output layer whose
        only axis of size > 1 is its width axis ([1, C, 1, 1]; a stack axis aside); None for other leaves."""
        if t.kind == "input" and t.fan_in == 1:
            return t.fan_out
        shape = shapes[name][1][len(shapes[name][1]) - ranks[name]:]
        return t.fan_in if t.kind == "output" and sum(n != 1 for n in shape) == 1 else None

    def bias(name: str, t: Tag) -> bool:
        c = size(name, t)
        if c is None:
            return False
        named = name.rpartition("/")[2] in GAIN_NAMES
        return named or (bool(parent(name)) and (parent(name), c) in weights
                         and (t.kind == "input" or ranks[name] >= 3))

    return [dataclasses.replace(t, kind="vector", fan_in=1, fan_out=size(n, t)) if n in ranks and bias(n, t) else t
            for n, t in zip(names, tags, strict=True)]


def readout_biases(names: Sequence[str], tags: list[Tag | None]) -> list[Tag | None]:
    """`tags` with role "readout_bias" on each scalar beside an output-kind weight (readout/w and readout/b,
    params/head/kernel and params/head/bias, layers/3/weight and layers/3/bias), as zoo's own heads tag it: it acts
    after the width contraction, so it is no parameter before the readout (zoo.param.predict, the audit's d*: its
    gradient does not sum over the width). Leaves at the top of the tree have no module to share: a 'readout' rule."""
    heads = {parent(n) for n, t in zip(names, tags, strict=True) if t is not None and t.kind == "output"} - {""}
    return [dataclasses.replace(t, role="readout_bias")
            if t is not None and t.kind == "scalar" and not t.role and parent(n) in heads else t
            for n, t in zip(names, tags, strict=True)]
