"""Tags for any model's parameters, from their shapes at two widths (microsoft/mup's base shapes; the kinds of
TP IVb Defs 2.9.11/2.9.12) and regex rules for what shapes cannot tell.

    tags = infer_tags(params_at_64, params_at_256, base_width=64, width=256,
                      rules={r"block_\\d+/": "branch", r"/query/": "query", r"/(attn_out|mlp_out)/": "branch_output"},
                      depth=8, base_depth=2)

An axis is a *width axis* when its size changes between the two widths, by exactly m = width / base_width (a
width n, 4n in an MLP, the head count at a fixed head dim, the head dim at a fixed head count). With k width axes:

    k = 0: scalar      k = 2: hidden (one width axis in the fan-in, one in the fan-out); no kind has k > 2
    k = 1: vector (a 1-D leaf); otherwise input when the width axis is the fan-out, output when it is in the fan-in

The fan-out is the last axis and the fan-in the product of the others under `layout="in_out"` (Flax, Haiku and
jax kernels [fan_in, fan_out]; embedding tables [vocab, width]); under "out_in" (Equinox and PyTorch Linear
weights [fan_out, fan_in]) the first axis is the fan-out. A kernel whose fan-out spans k > 1 axes needs the rule
"out_axes=k" (the last k axes, the first k under out_in): shapes cannot tell the query/key/value kernel
[n, heads, head_dim] of Flax's DenseGeneral and MultiHeadDotProductAttention (fan_in n, fan_out heads * head_dim)
from its output kernel [heads, head_dim, n] (fan_in heads * head_dim, fan_out n). Without the rule the first reads
fan_in n * heads and fan_out head_dim: a fan-in init std 1/sqrt(fan_in) off by sqrt(heads), which shrinks like
m^-1, not m^-1/2, when the head count grows with width; Muon's constant sqrt(max(fan_in0, fan_out0)) growing with the
head count; Muon orthogonalising [n * heads, head_dim]. When the head count is a width axis the shapes show it (both
width axes in the fan-in: no kind) and the leaf is an error naming the rule; at a growing head dim they cannot. A
bias of k >= 2 axes shows it (DenseGeneral's [heads, head_dim] is the end of its kernel), and so do Flax's attention
module names (query/kernel, key/kernel, value/kernel of 3 axes, biased or not): there the k is taken without a rule.
Elsewhere, for such a kernel without a bias:

    rules={r"/(query|key|value)/": "out_axes=2"}   # its bias [heads, head_dim] is then all fan-out: a vector

A leaf with no more than k axes is all fan-out (fan_in 1): a vector when one axis grows, a scalar when none does;
so is a bias or gain stored over size-1 axes beside its layer's weight (Equinox's Conv2d bias [out, 1, 1]) or
named as one (scale, offset, bias, b: Haiku's BatchNorm [1, C, 1, 1]).

`rules` maps a regex (re.search on the leaf's path, keys joined by "/") to a role or a tuple of roles:
    stacked        the leading axis stacks layers (nnx.vmap, hk.layer_stack, nn.scan): not part of any fan. A
                   stack without it is an error naming the rule when the shapes show one (a bias or gain [L, n] and a
                   kernel [L, a, n] in a module all led by L; given depth=, a module all led by the depth's size,
                   its leaf [L, n] or [L, a, b]: a conv kernel [3, 3, c, n] or a 2-axis kernel, w, embedding or
                   table is one layer; a stack of 1 whose kernel fits no layer but without its axis, [1, n, n]
                   under out_in)
    branch         the leaf sits in a residual branch (Depth-muP's depth rules; needs depth and base_depth)
    branch_output  the matrix (and its bias) that ends a branch: the branch multiplier folds into it
    in_out, out_in, spatial_out_in
                   the leaf's layout where it differs from `layout` (zoo's own models: Dense kernels out_in, tables
                   [vocab, width] in_out; a kernel [..., out, in]: spatial_out_in, which the kernels of Haiku's
                   ConvTranspose modules get without a rule by their module's name, conv2_d_transpose/w)
    out_axes=k     the fan-out spans k axes (default 1): multi-head query/key/value kernels [n, heads, head_dim]
    query          the attention query (and its bias): the attention-logit scale folds into it
    readout        the output layer (and its bias): its weight is output kind, its bias (no width axis) scalar with
                   role "readout_bias", which a scalar beside an output-kind weight (readout/w, readout/b) gets
                   without a rule
    input, hidden, output, vector, scalar: the kind itself, where the shapes leave it open (an axis growing by
                   another ratio, [n, heads, head_dim] without out_axes) or to call a fan-out width axis input
                   rather than vector; a kind the shapes contradict is an error (a rule's regex matching too much)
A leaf whose kind the shapes leave open, or that fits no kind, is one ValueError naming it and the rule to add; so
is a leaf with an axis of size 0 (no entry to scale) and a weight whose bias [out] has the size of another
layout's fan-out axis than its own: an Equinox Linear [out, in] read in_out, a renamed Haiku ConvTranspose
[..., out, in] (which needs 'spatial_out_in').
Leaves that are not arrays (an Equinox module's functions) are not parameters: their tag is None.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from zoo.param.biases import BIAS_NAMES, broadcast_biases, check_bias_sizes, readout_biases
from zoo.param.fans import fans_and_kind
from zoo.param.stacks import check_unmarked_stack, exact, parent
from zoo.param.tags import KINDS, LAYOUTS, Tag
from zoo.tree import key_path

STRUCTURE_ROLES = ("stacked", "branch")
NAMED_ROLES = ("branch_output", "query", "readout")  # at most one per leaf: it becomes Tag.role
ROLES = STRUCTURE_ROLES + NAMED_ROLES + KINDS + LAYOUTS  # a layout role overrides `layout` for its leaves
OUT_AXES = re.compile(r"out_axes=([1-9][0-9]*)")  # the role "out_axes=k" sets Tag.out_axes
UNSTACKED_BY = {"stacked", "readout", *KINDS}  # rules that settle whether a leaf is a stack of layers
FLAX_QKV = re.compile(r"(^|/)(query|key|value)/kernel$")  # Flax's attention: [n, heads, head_dim] (2 fan-out axes)
# the kernel of Haiku's Conv1DTranspose, Conv2DTranspose, Conv3DTranspose and ConvNDTranspose by their default module
# names (a second one in a transform is conv2_d_transpose_1): stored [..., out, in]
HAIKU_TRANSPOSED = re.compile(r"(^|/)conv(\d_d|_nd)_transpose(_\d+)?/w$")


def is_array(x: Any) -> bool:
    """Arrays and abstract arrays (jax.ShapeDtypeStruct) are parameters; anything else in a pytree is not."""
    return hasattr(x, "shape") and hasattr(x, "dtype")


def infer_tags(params_base: Any, params: Any, *, base_width: int, width: int,
               rules: Mapping[str, str | Sequence[str]] | None = None, depth: int | None = None,
               base_depth: int | None = None, layout: str = "in_out") -> Any:
    """A pytree shaped like `params` with a Tag per array leaf (None elsewhere): kind, fan-in/out and width
    multiplier m = width / base_width from the shapes of `params_base` (the same model at base_width) and
    `params`; branch, depth and role from `rules`. Arrays may be abstract (jax.eval_shape)."""
    _check_sizes(base_width=base_width, width=width, depth=depth, base_depth=base_depth)
    if width == base_width:
        raise ValueError(f"infer_tags needs two different widths to see which axes grow; both are {width} (at the "
                         "base width use zoo.param.infer_tags_from(lambda w: the parameters' shapes at width w, ...))")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    compiled = _compile(rules or {})
    base_flat = {key_path(p): x for p, x in jax.tree_util.tree_flatten_with_path(params_base)[0]}
    flat, treedef = jax.tree_util.tree_flatten_with_path(params)
    names = [key_path(p) for p, _ in flat]
    _distinct_names(names, [jax.tree_util.keystr(p) for p, _ in flat])
    _same_leaves(set(base_flat), set(names))
    arrays = {name: x for name, (_, x) in zip(names, flat, strict=True) if is_array(x)}
    roles = {name: _roles_of(name, compiled) for name in arrays}
    used = {pattern for name in arrays for pattern, (regex, _) in compiled.items() if regex.search(name)}
    unused = [p for p in compiled if p not in used]
    if unused:
        like = f"paths look like {names[0]!r}" if names else "the tree has no parameters"
        raise ValueError(f"rule {unused[0]!r} matches no parameter; {like}")
    shapes = {name: (tuple(base_flat[name].shape), tuple(x.shape)) for name, x in arrays.items()}
    _refuse_empty(shapes)
    for name, k in _inferred_out_axes(shapes, roles, layout).items():
        roles[name].add(f"out_axes={k}")
    check_unmarked_stack(shapes, {n for n in shapes if not roles[n] & UNSTACKED_BY}, depth,
                         {n: _layout_of(n, roles[n], layout) for n in shapes})
    tags = [_tag(name, *shapes[name], roles[name], width / base_width, layout, depth, base_depth)
            if name in arrays else None for name in names]
    check_bias_sizes(names, tags, shapes, roles)
    ranks = {name: len(shape) - ("stacked" in roles[name]) for name, (_, shape) in shapes.items()
             if not roles[name] & set(KINDS)}
    return jax.tree_util.tree_unflatten(treedef, readout_biases(names, broadcast_biases(names, tags, ranks, shapes)))


def _refuse_empty(shapes: Mapping[str, tuple[tuple, tuple]]) -> None:
    """A leaf with an axis of size 0 (a Linear to 0 features, a table of 0 rows) has no entry to scale, and its fans
    would be 0: fan-in (size / fan-out) divided by zero, a base fan-in 0 an init std 0^-1/2. One line naming it."""
    for name, (base_shape, shape) in shapes.items():
        if 0 in base_shape or 0 in shape:
            raise ValueError(f"parameter {name!r} ({base_shape} -> {shape}) has an axis of size 0: it holds no "
                             "entry to scale; leave it out of the parameters (or give that axis a size)")


def _inferred_out_axes(shapes: Mapping[str, tuple[tuple, tuple]], roles: Mapping[str, set[str]],
                       layout: str) -> dict[str, int]:
    """The fan-out axes a bias or a Flax name shows, where no rule gives out_axes. A bias (named b or bias) of
    k >= 2 axes beside its module's one weight of more axes whose fan-out end (the last k in_out, the first k out_in,
    a stack axis aside) has its shape: a kernel of k fan-out axes and its bias all fan-out, as Flax's DenseGeneral
    and attention query/key/value kernels [n, heads, head_dim] with their bias [heads, head_dim] (Linen and NNX's
    LinearGeneral). A 3-axis kernel of a module named query, key or value read in_out whose first axis grows (Flax's
    attention, Linen and NNX, with use_bias=False too; not a conv [k, n, n] so named, nor keys from a context of
    fixed width, which need the rule): 2 fan-out axes [n, heads, head_dim]. Read with one fan-out axis, such a
    kernel's fan-in is n * heads (an init std off by sqrt(heads); Muon orthogonalising [n * heads, head_dim]) and its
    bias an input layer of fan-in heads. Name -> k."""
    def core(name: str, at: int = 1) -> tuple:
        return shapes[name][at][1:] if "stacked" in roles[name] else shapes[name][at]

    out = {n: 2 for n in shapes if FLAX_QKV.search(n) and len(core(n)) == 3 and core(n)[0] != core(n, 0)[0]
           and _layout_of(n, roles[n], layout) == "in_out"}
    for bias in (n for n in shapes if n.rpartition("/")[2] in BIAS_NAMES and len(core(n)) >= 2):
        k = len(core(bias))
        weights = [n for n in shapes if parent(n) == parent(bias) and len(core(n)) > k]
        if len(weights) != 1:
            continue
        weight, given = weights[0], _layout_of(weights[0], roles[weights[0]], layout)
        ends = {"in_out": core(weight)[-k:], "out_in": core(weight)[:k]}
        if ends.get(given) == core(bias):
            out[weight] = out[bias] = k
    return {n: k for n, k in out.items() if not any(OUT_AXES.fullmatch(r) for r in roles[n])}


def _roles_of(name: str, compiled: Mapping[str, tuple[re.Pattern, set[str]]]) -> set[str]:
    """The union of the roles of every rule whose regex matches the leaf's path."""
    return set().union(*(given for regex, given in compiled.values() if regex.search(name)))


def infer_tags_from(shapes_at: Callable[[int], Any], *, base_width: int, width: int, **kwargs: Any) -> Any:
    """infer_tags(shapes_at(base_width), shapes_at(width), ...) from a function width -> the model's parameters
    (abstract: jax.eval_shape), which also serves the base width itself, where the plugin is SP and its LR is tuned:
    there no axis changes, so the kinds and fans come from the model at 2 * width read against width, and every width
    multiplier is m = 1. Keyword arguments as infer_tags."""
    _check_sizes(base_width=base_width, width=width)  # before the model is built at either
    if width != base_width:
        return infer_tags(shapes_at(base_width), shapes_at(width), base_width=base_width, width=width, **kwargs)
    tags = infer_tags(shapes_at(2 * width), shapes_at(width), base_width=2 * width, width=width, **kwargs)
    return jax.tree.map(lambda t: dataclasses.replace(t, width_mult=1.0), tags, is_leaf=lambda x: isinstance(x, Tag))


def _check_sizes(**sizes: Any) -> None:
    """Widths must be positive numbers, depths (where given) positive integers."""
    for key, v in sizes.items():
        whole = key.endswith("depth")
        if v is None and whole:
            continue
        kind = numbers.Integral if whole else numbers.Real
        if isinstance(v, bool) or not isinstance(v, kind) or not 0 < v < math.inf:
            raise ValueError(f"{key} must be a positive {'integer' if whole else 'number'}, got {v!r}")


def _compile(rules: Mapping[str, str | Sequence[str]]) -> dict[str, tuple[re.Pattern, set[str]]]:
    """Each rule's compiled regex and its set of roles."""
    if not isinstance(rules, Mapping):
        raise TypeError(f"rules must map a regex to a role or a tuple of roles, got {type(rules).__name__}")
    out = {}
    for pattern, roles in rules.items():
        roles = [roles] if isinstance(roles, str) else roles
        if not isinstance(roles, (list, tuple, set, frozenset)) or not all(isinstance(r, str) for r in roles):
            raise TypeError(f"rule {pattern!r}: roles must be a string or a tuple of strings, got {roles!r}")
        roles = set(roles)
        bad = sorted(r for r in roles if r not in ROLES and not OUT_AXES.fullmatch(r))
        if bad:
            raise ValueError(f"rule {pattern!r}: unknown role {bad[0]!r}; roles are {', '.join(ROLES)}, out_axes=k")
        try:
            out[pattern] = (re.compile(pattern), roles)
        except re.error as e:
            raise ValueError(f"rule {pattern!r} is not a regular expression ({e})") from None
    return out


def _distinct_names(names: Sequence[str], paths: Sequence[str]) -> None:
    """Every leaf has a name of its own: keys joined by "/" may coincide (Haiku allows "/" in a parameter's name:
    {'blk': {'a/w': ...}} and {'blk/a': {'w': ...}} are both blk/a/w), and then one took the other's shapes and tag,
    without a word (rules could not tell them apart either). One line naming both."""
    first: dict[str, str] = {}
    for name, path in zip(names, paths, strict=True):
        if name in first:
            raise ValueError(f"parameters {first[name]} and {path} both go by the name {name!r} (keys joined by '/'): "
                             "rename one so that each parameter has a name of its own")
        first[name] = path


def _same_leaves(base: set[str], names: set[str]) -> None:
    for missing, there, here in ((names - base, "width", "base width"), (base - names, "base width", "width")):
        if missing:
            raise ValueError(f"parameter {sorted(missing)[0]!r} exists at the {there} but not at the {here}: "
                             "the two parameter trees must come from the same model")


def _tag(name: str, base_shape: tuple, shape: tuple, roles: set[str], m: float, layout: str,
         depth: int | None, base_depth: int | None) -> Tag:
    if len(base_shape) != len(shape):
        raise ValueError(f"parameter {name!r} has shape {base_shape} at the base width and {shape} at the width: "
                         "the number of axes must not change")
    given, named, layouts = roles & set(KINDS), roles & set(NAMED_ROLES), roles & set(LAYOUTS)
    outs = {r for r in roles if OUT_AXES.fullmatch(r)}
    readout = "readout" in roles
    if len(given | ({"output"} if readout else set())) > 1 or len(named) > 1 or len(layouts) > 1 or len(outs) > 1:
        raise ValueError(f"parameter {name!r} matches rules with conflicting roles "
                         f"{sorted(given | named | layouts | outs)}")
    ruled = bool(given) or readout
    layout = _layout_of(name, roles, layout)
    out_axes = int(OUT_AXES.fullmatch(outs.pop()).group(1)) if outs else 1
    if "stacked" in roles:
        if not shape or shape[0] != base_shape[0]:
            raise ValueError(f"parameter {name!r} ({base_shape} -> {shape}): a 'stacked' rule needs a leading "
                             "axis that does not change with width")
        base_shape, shape = base_shape[1:], shape[1:]
    grows = [b != n for b, n in zip(base_shape, shape, strict=True)]
    odd = [a for a, (b, n) in enumerate(zip(base_shape, shape, strict=True)) if b != n and not math.isclose(n, b * m)]
    if odd and not given:
        a = odd[0]
        guess = fans_and_kind(shape, grows, layout, out_axes)[2] or "hidden"
        raise ValueError(f"parameter {name!r}: axis {a} changes from {base_shape[a]} to {shape[a]}, not by the width "
                         f"ratio {m:g}; no kind has that. Give its kind with a rule, e.g. rules={{{exact(name)!r}: "
                         f"{guess!r}}}")
    fan_in, fan_out, kind = fans_and_kind(shape, grows, layout, out_axes)
    if kind is None and not ruled and sum(grows) == 2:
        raise ValueError(f"parameter {name!r} ({base_shape} -> {shape}): its two width axes are not one in the fan-in "
                         f"and one in the fan-out ({out_axes} fan-out axes, {layout}), as a hidden matrix's are. A "
                         "kernel whose fan-out spans several axes (Flax DenseGeneral, attention query/key/value "
                         f"[n, heads, head_dim]) needs rules={{{exact(name)!r}: 'out_axes=2'}}; else give its kind")
    if kind is None and not ruled:
        raise ValueError(f"parameter {name!r} ({base_shape} -> {shape}) has {sum(grows)} width axes; no kind has "
                         "more than 2 (1 where all axes are fan-out). Give its kind with a rule, e.g. "
                         f"rules={{{exact(name)!r}: 'hidden'}}")
    if ruled:
        seen, kind = kind, _ruled_kind(name, base_shape, shape, kind, given.pop() if given else None,
                                       (fan_in, fan_out, layout))
        if {seen, kind} == {"output", "vector"}:  # a gain [1, C, 1, 1]: all fan-out; a readout [n]: all fan-in
            fan_in, fan_out = (1, fan_in * fan_out) if kind == "vector" else (fan_in * fan_out, 1)
    branch = "branch" in roles or "branch_output" in roles
    if branch and (depth is None or base_depth is None):
        raise ValueError(f"parameter {name!r} is in a residual branch: infer_tags needs depth and base_depth")
    role = named.pop() if named else ""
    return Tag(kind=kind, fan_in=fan_in, fan_out=fan_out, width_mult=m, branch=branch,
               depth=depth if branch else 1, base_depth=base_depth if branch else 1,
               role="readout_bias" if role == "readout" and kind == "scalar" else role, layout=layout,
               out_axes=out_axes)


def _layout_of(name: str, roles: set[str], layout: str) -> str:
    """A leaf's layout: its rule's (the first by name where rules conflict, which _tag refuses), else spatial_out_in
    for the kernel of a Haiku ConvTranspose by its module's name (HAIKU_TRANSPOSED: w [kh, kw, out, in], which no
    shape tells from [kh, kw, in, out] without a bias), else `layout`."""
    return min(roles & set(LAYOUTS), default="spatial_out_in" if HAIKU_TRANSPOSED.search(name) else layout)


def _ruled_kind(name: str, base_shape: tuple, shape: tuple, seen: str | None, given: str | None,
                fans: tuple[int, int, str]) -> str:
    """The kind of a leaf a rule names (`given`) or marks as the readout (given None): a rule settles what the shapes
    leave open (`seen` None), or calls a fan-out width axis input rather than vector (an embedding row, a cls token),
    or a leaf whose axes but the width one have size 1 a vector (Haiku's NCHW BatchNorm scale [1, C, 1, 1], which
    in_out reads as an output layer of fan-in C) or an output (a readout to one output stored [n], h . v, which
    reads as a vector: fan-in n, fan-out 1);
    the readout role makes the readout's weight output and leaves its bias, with no width axis, a scalar. A kind the
    shapes contradict (a readout rule whose regex also matches the bias, a layout read the wrong way) would change
    the leaf's init and LR exponents silently: an error."""
    kind = given or ("scalar" if seen == "scalar" else "output")
    broadcast = sum(n != 1 for n in shape) == 1  # one axis, the width one, beside size-1 axes: [1, C, 1, 1]
    if seen is None or kind == seen or {kind, seen} == {"input", "vector"} or (kind == "vector" and broadcast) or (
            (seen, kind) == ("vector", "output")):
        return kind
    fan_in, fan_out, layout = fans
    tied = ("; if it is a table tied to the readout (logits h E^T) keep it input and apply the readout multiplier "
            "in the forward pass: h E^T * free.tied_multiplier(zoo.param.infer.tied_readout(tag), tag)"
            if (seen, kind) == ("input", "output") else "")
    raise ValueError(f"parameter {name!r} ({base_shape} -> {shape}) is {seen} by its shapes (fan-in {fan_in}, "
                     f"fan-out {fan_out}, {layout}), but a rule makes it {kind}: narrow the rule's regex to the "
                     f"leaves it means, or give the layout ('in_out' or 'out_in') if it is read the wrong way "
                     f"round{tied}")


def tied_readout(embedding: Tag) -> Tag:
    """The Tag of a readout tied to the input table E (logits = h E^T, one array for both): E's transpose, output
    kind with fan-in E's fan-out (the width) and fan-out E's fan-in (the vocabulary). infer_tags tags E as the input
    layer it also is, and no parameter of its own can carry the readout's multiplier (zoo.param.gauge): the model
    applies it in its forward pass, logits = h E^T * free.tied_multiplier(tied_readout(tag), tag) (muP's m^-1; the
    plugin's own tied_multiplier is the same number: it is the same in every gauge)."""
    if embedding.kind != "input":
        raise ValueError(f"a tied readout shares an input table (kind input), got a {embedding.kind} parameter")
    return dataclasses.replace(embedding, kind="output", fan_in=embedding.fan_out, fan_out=embedding.fan_in,
                               role="readout")
