"""Stacks of layers in a parameter tree that no rule marks 'stacked' (nn.scan, hk.layer_stack, a vmapped Equinox
module): their leading axis would be read as a fan, so `zoo.param.infer.infer_tags` refuses them in one line naming
the rule to add."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from zoo.param.fans import fans_and_kind

# weights' names in Flax, Haiku and zoo's Embed (table); Equinox's "weight" is also a gain's
WEIGHT_NAMES = ("kernel", "w", "embedding", "embeddings", "table")


def parent(name: str) -> str:
    """The module path of a leaf path ("blocks/mlp/w" -> "blocks/mlp"; "" at the top)."""
    return name.rpartition("/")[0]


def _leads_stack(base_shape: tuple, shape: tuple) -> bool:
    """Whether the leaf could be a stack of layers by its shapes: at least 2 axes, the leading one fixed in width and
    longer than 1 (an axis of size 1 changes no fan: a stack of one layer reads as that layer, and a cls token
    [1, 1, n] or a position table [1, seq, n] is no stack)."""
    return len(shape) == len(base_shape) >= 2 and shape[0] == base_shape[0] > 1  # other ranks: _tag's error


def _stacked_vector(base_shape: tuple, shape: tuple) -> bool:
    """[L, n] (or [L, n, 1, 1]): a fixed leading axis, then one width axis and axes of size 1: the shape of a stacked
    bias or norm gain, which unmarked reads as an input layer of fan-in L."""
    rest = list(zip(base_shape[1:], shape[1:], strict=True))
    return (_leads_stack(base_shape, shape) and sum(b != n for b, n in rest) == 1
            and all(b != n or n == 1 for b, n in rest))


def _stacked_matrix(base_shape: tuple, shape: tuple) -> bool:
    """[L, a, n] or more axes, with a width axis after the fixed leading one: the shape of a stacked kernel."""
    return len(shape) >= 3 and any(b != n for b, n in zip(base_shape[1:], shape[1:], strict=True))


def check_unmarked_stack(shapes: Mapping[str, tuple[tuple, tuple]], unruled: set[str], depth: int | None,
                          layouts: Mapping[str, str]) -> None:
    """Refuse a stack of layers (nn.scan, hk.layer_stack, a vmapped Equinox module) no rule marks 'stacked': its
    leading axis L would be read as a fan (a stacked kernel [L, n, n] as hidden with fan-in L * n, its bias [L, n] as
    an input layer of fan-in L), which changes every init and LR exponent silently. Shapes alone cannot tell [L, n, n]
    from a conv kernel [k, n, n], nor [L, n] from an embedding [vocab, n]; a stack has both a stacked bias or gain
    [L, n] and a kernel [L, a, n] (3+ axes, one growing), and every leaf of the module holding them both leads with L
    (a conv's bias [n] does not, nor a model's other layers beside an embedding [L, n]). Given the depth, a leaf of
    the depth's size that may stack layers (_may_stack_layers) is refused when every leaf of its module leads with
    it (a bias-free stacked kernel [L, n, n], which a bias-free conv kernel [k, n, n] at depth k also is: the line
    names both rules, 'stacked' and the kind its shapes give); not a conv kernel [3, 3, n, n] at depth 3, beside its
    bias [n] or bias-free, nor a readout [classes, n] beside its bias [classes].
    `shapes`: (base shape, shape) of every leaf; only the `unruled` ones (no kind, 'stacked' or 'readout' rule) are
    suspects, but their kernel may have a rule (a 'stacked' rule on the kernels alone left the biases [L, n] read as
    input layers of fan-in L). `layouts`: each leaf's layout (its rule's, else infer_tags' `layout`), which the kind a
    line suggests is read under."""
    lead = {name: shapes[name][1][0] for name in shapes if _leads_stack(*shapes[name])}
    suspects = sorted(n for n in lead if n in unruled)
    for vector in (n for n in suspects if _stacked_vector(*shapes[n])):
        size = lead[vector]
        for kernel in (n for n in sorted(lead) if n != vector and lead[n] == size and _stacked_matrix(*shapes[n])):
            module = _common_module([vector, kernel])
            if _all_lead(module, size, lead, shapes):
                rule = _stack_rule([n for n in suspects if _inside(n, _stack_module(module, size, lead, shapes))])
                raise ValueError(f"parameters {vector!r} {shapes[vector][1]} and {kernel!r} {shapes[kernel][1]} both "
                                 f"lead with an axis of size {size} that does not change with width: a stack of "
                                 f"{size} layers? Its axis would be read as a fan; add rules={{{rule!r}: 'stacked'}} "
                                 f"(if they are no stack, their kinds, e.g. {exact(vector)!r}: 'input')")
    _check_stack_of_one(shapes, unruled, layouts)
    for name in (n for n in suspects if lead[n] == depth and _may_stack_layers(n, shapes[n][1])):
        if all(lead.get(n) == depth for n in shapes if parent(n) == parent(name)):
            base_shape, shape = shapes[name]
            kind = fans_and_kind(shape, [b != n for b, n in zip(base_shape, shape, strict=True)], layouts[name])[2]
            one = f"; if it is one layer, its kind: rules={{{exact(name)!r}: {kind!r}}}" if kind else ""
            raise ValueError(f"parameter {name!r} {shape}: its leading axis has the depth's size {depth}; is it a "
                             f"stack of layers? add rules={{{exact(name)!r}: 'stacked'}}{one}")


def _check_stack_of_one(shapes: Mapping[str, tuple[tuple, tuple]], unruled: set[str],
                        layouts: Mapping[str, str]) -> None:
    """Refuse a stack of one layer no rule marks 'stacked' where its axis of size 1 shows: a kernel that fits no
    layer ([1, n, n] under out_in: both width axes in the fan-in) but would without its leading fixed axis. Its line
    said 'out_axes=2'; it names the stack's module (the widest above it whose leaves all lead with 1), whose gains
    [1, n] (an Equinox LayerNorm weight reads as an output layer of fan-in n under out_in) need the rule too."""
    ones = {n: 1 for n, (b, x) in shapes.items() if len(x) == len(b) >= 2 and x[0] == b[0] == 1}
    for name in sorted(n for n in ones if n in unruled):
        base_shape, shape = shapes[name]
        grows = [b != n for b, n in zip(base_shape, shape, strict=True)]
        layout = layouts[name]
        if fans_and_kind(shape, grows, layout)[2] is None and fans_and_kind(shape[1:], grows[1:], layout)[2]:
            module = _stack_module(parent(name), 1, ones, shapes)
            rule = _stack_rule([n for n in ones if n in unruled and _inside(n, module)]) if _all_lead(
                module, 1, ones, shapes) else exact(name)
            raise ValueError(f"parameter {name!r} ({base_shape} -> {shape}) fits no layer ({layout}) but would without "
                             f"its leading axis of size 1: a stack of 1 layer? add rules={{{rule!r}: 'stacked'}}")


def _stack_module(module: str, size: int, lead: Mapping[str, int], shapes: Mapping[str, Any]) -> str:
    """The widest module above `module` (itself included) whose every leaf leads with `size`: a stack's blocks' every
    module, not a readout [L classes, n] beside them; `module` itself where its leaves do not all lead with it."""
    while module and _all_lead(parent(module), size, lead, shapes):
        module = parent(module)
    return module


def _may_stack_layers(name: str, shape: tuple) -> bool:
    """Whether a leaf led by a fixed axis may be a stack of layers by its rank and name: a stack of Dense kernels
    [L, a, b] or of biases and gains [L, n], not a conv kernel [k, k, c, n] (4+ axes; a stacked conv's bias [L, n]
    shows its stack) nor a 2-axis leaf named as a Flax, Haiku or zoo weight (kernel, w, embedding, table: a Dense from
    L features, an L-row table; a stacked weight has 3+ axes)."""
    return len(shape) <= 3 and not (len(shape) == 2 and name.rpartition("/")[2] in WEIGHT_NAMES)


def _inside(name: str, module: str) -> bool:
    return not module or name.startswith(module + "/")


def _all_lead(module: str, size: int, lead: Mapping[str, int], shapes: Mapping[str, Any]) -> bool:
    """Whether every leaf of `module` ('' the tree's top) leads with a fixed axis of `size`."""
    return all(lead.get(n) == size for n in shapes if _inside(n, module))


def _common_module(names: Sequence[str]) -> str:
    """The module path (whole segments) above all the leaves `names`; '' for the tree's top."""
    common = []
    for segments in zip(*(name.split("/")[:-1] for name in names), strict=False):
        if len(set(segments)) > 1:
            break
        common.append(segments[0])
    return "/".join(common)


def _stack_rule(members: Sequence[str]) -> str:
    """A regex for the leaves of a stack: the module above them all, or their exact paths at the tree's top."""
    module = _common_module(members)
    if module:
        return "^" + re.escape(module) + "/"
    return "^(" + "|".join(re.escape(name) for name in members) + ")$"


def exact(name: str) -> str:
    """A rule's regex for exactly one leaf path."""
    return "^" + re.escape(name) + "$"
