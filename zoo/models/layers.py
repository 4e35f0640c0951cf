"""The few parametrized layers every model shares. They tag their parameters and ask the plugin; no scaling
rule lives here (the plugin gives init std, forward multiplier, and through the tags, the optimizer rules)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from zoo.activations import activation
from zoo.param.base import Parametrization
from zoo.param.sp_init import sp_std
from zoo.param.tags import Kind, Tag

COMPUTE_DTYPES = ("float32", "bfloat16", "float16")  # the floating types a model may compute in


@dataclasses.dataclass
class ModelConfig:
    """What every model's config holds (each model's config extends it with its own options and defaults): its
    size, the base size its plugin scales from, and how it computes."""

    width: int = 256
    depth: int = 8
    base_width: int | None = None  # None: the width itself
    base_depth: int | None = None  # None: the depth itself
    scan: bool = True  # scan the blocks (compile time flat in depth) or unroll them
    remat: bool = False  # recompute each block in the backward pass (less activation memory)
    dtype: str = "float32"  # compute dtype (one of COMPUTE_DTYPES); parameters stay float32

    # options checked on construction (a ValueError naming the option): sizes (ints, or each int of a shape) >= 1,
    # rates in [0, 1), scales >= 0, None allowed, and an `activation` zoo.activations knows. Each model adds its own.
    sizes: ClassVar[tuple[str, ...]] = ("width", "depth", "base_width", "base_depth")
    rates: ClassVar[tuple[str, ...]] = ()
    scales: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        for name in self.sizes:
            value = getattr(self, name)
            if value is not None and min(value if isinstance(value, tuple) else (value,), default=1) < 1:
                raise ValueError(f"model option {name} must be at least 1, got {value}")
        if self.dtype not in COMPUTE_DTYPES:  # 'float17' failed in the first call, 'int32' in a scan's carry types
            raise ValueError(f"model option dtype must be one of {', '.join(COMPUTE_DTYPES)}, got {self.dtype!r}")
        if hasattr(self, "activation"):
            activation(self.activation)  # an unknown name refused with the config (--print-config), not at a call
        ranges = ((self.rates, lambda v: 0 <= v < 1, "in [0, 1)"), (self.scales, lambda v: v >= 0, ">= 0"))
        for names, ok, bound in ranges:
            for name in names:
                if getattr(self, name) is not None and not ok(getattr(self, name)):
                    raise ValueError(f"model option {name} must be {bound}, got {getattr(self, name)}")


class Multiplier(nnx.Variable):
    """A forward multiplier chosen by the plugin; state (not a parameter), so sweeps can vmap over it."""


class Scale:
    """Where a layer sits in the scaling: width multiplier m = n/n0 and, for residual branches, L and L0."""

    def __init__(self, plugin: Parametrization, width: int, base_width: int, depth: int = 1,
                 base_depth: int = 1, init_std: float | None = None, branches: int = 0):
        self.plugin, self.m, self.depth, self.base_depth = plugin, width / base_width, depth, base_depth
        self.init_std, self.branches = init_std, branches

    def std0(self, tag: Tag) -> float:
        """The SP init std of a weight at the base shape (zoo.param.sp_init): the model's init_std (None: LeCun's),
        GPT-2's 1/sqrt(branches L0) on a residual branch's last matrix where the model counts its branches."""
        return sp_std(tag, self.init_std, self.branches)

    def tag(self, kind: Kind, fan_in: int, fan_out: int, *, branch: bool = False, role: str = "",
            layout: str = "in_out") -> Tag:
        return Tag(kind=kind, fan_in=fan_in, fan_out=fan_out, width_mult=self.m, branch=branch,
                   depth=self.depth, base_depth=self.base_depth, role=role, layout=layout)

    def branch_multiplier(self) -> Multiplier:
        """The plugin's a (L / L0)^-alpha, with its rule for zoo.audit."""
        return Multiplier(jnp.asarray(self.plugin.branch_multiplier(self.depth, self.base_depth), jnp.float32),
                          rule="branch", depth=self.depth, base_depth=self.base_depth)

    def skip_multiplier(self) -> Multiplier:
        return Multiplier(jnp.asarray(self.plugin.skip_multiplier(), jnp.float32))


def scales(cfg: Any, plugin: Parametrization, init_std: float | None = None,
           branches: int = 0) -> tuple[Scale, Scale, int]:
    """From a model config (width, depth, base_width, base_depth; a base of None is the size itself): the Scale of
    layers outside the residual blocks (width only), of those inside them (width and depth), and the base width.
    `init_std`: the weights' SP std at the base shape (None: 1/sqrt(fan_in)); `branches`: residual branches per
    block, for GPT-2's init of their last matrices (0: none; zoo.param.sp_init)."""
    if cfg.width < 1 or cfg.depth < 1:
        raise ValueError(f"width and depth must be positive, got {cfg.width} and {cfg.depth}")
    base_width, base_depth = cfg.base_width or cfg.width, cfg.base_depth or cfg.depth
    return (Scale(plugin, cfg.width, base_width, init_std=init_std),
            Scale(plugin, cfg.width, base_width, cfg.depth, base_depth, init_std, branches), base_width)


def tagged_param(key: jax.Array, plugin: Parametrization, tag: Tag, shape: tuple[int, ...],
                 std0: float | None = None, const: float = 0.0, axes: tuple[str | None, ...] = ()) -> nnx.Param:
    """N(const, (plugin std)^2) with std0 (the SP std at the base width) defaulting to 1/sqrt(base fan_in)
    (zoo.param.sp_init).

    `axes` names each dimension for sharding ("embed", "heads", "mlp", "vocab", ...; zoo.train.mesh maps names
    to mesh axes)."""
    if std0 is None:
        std0 = sp_std(tag)
    std = plugin.init_std(tag, std0)
    zero = isinstance(std, (int, float)) and std == 0  # a plugin may give a std where std0 is 0 (critical biases)
    value = jnp.full(shape, const) if zero else const + std * jax.random.normal(key, shape, jnp.float32)
    return nnx.Param(jnp.asarray(value, jnp.float32), tag=tag, axes=tuple(axes))


DENSE_AXES: dict[str, tuple[str | None, str | None]] = {
    "input": (None, "embed"), "hidden": ("embed", "embed"), "output": ("embed", None), "scalar": (None, None)}


class Dense(nnx.Module):
    """y = m^-a (x W^T) + b, with W tagged `kind` and the bias a vector (or, on fixed-size outputs, a scalar).

    W is stored (out, in), PyTorch's order: JAX's product rule gives the weight gradient as g^T x, (out, in), so
    it lands in W's own order, also when a sweep vmaps members that share the batch (their gradients stack as one
    (members * out, in) product; in (in, out) order XLA:CPU copies a transpose of it every step, bench/sweep.py).
    `axes` names W's (input, output) dimensions for sharding; by default from the kind (DENSE_AXES)."""

    def __init__(self, fan_in: int, fan_out: int, *, kind: Kind, scale: Scale, rngs: nnx.Rngs,
                 bias: bool = False, branch: bool = False, role: str = "", std0: float | None = None,
                 axes: tuple[str | None, str | None] | None = None):
        tag = scale.tag(kind, fan_in, fan_out, branch=branch, role=role, layout="out_in")
        axes = axes or DENSE_AXES[kind]
        # drawn (in, out) and stored transposed: a seed gives the same network as when W was stored (in, out)
        kernel = tagged_param(rngs.params(), scale.plugin, tag, (fan_in, fan_out),
                              scale.std0(tag) if std0 is None else std0)
        self.kernel = nnx.Param(kernel[...].T, tag=tag, axes=axes[::-1])
        self.mult = Multiplier(jnp.asarray(scale.plugin.multiplier(tag), jnp.float32))
        bias_kind = "scalar" if kind in ("output", "scalar") else "vector"
        btag = scale.tag(bias_kind, 1, fan_out, branch=branch, role=role + "_bias")
        self.bias = tagged_param(rngs.params(), scale.plugin, btag, (fan_out,), std0=0.0,
                                 axes=axes[1:]) if bias else None

    def folds(self) -> list[tuple[str, jax.Array]]:
        """y = m (x W) + b: m folds into W (zoo.export)."""
        return [("kernel", self.mult[...])]

    def __call__(self, x: jax.Array, axis: int = -1) -> jax.Array:
        """Contracts x's last axis; axis=1 contracts axis 1 of a (B, S, C) input instead (token mixing), y (B, out, C).

        XLA:CPU differentiates a product over several leading axes with transposes of the activations: the last
        axis is contracted as one 2-D product of the flattened rows, axis 1 as B products W x_b (no transposes).
        The multiplier m^-a scales the smaller of W and the product (the input may be shared by the members of a
        vmapped sweep, whose multipliers differ)."""
        w, mult = self.kernel[...].astype(x.dtype), self.mult[...].astype(x.dtype)
        b = None if self.bias is None else self.bias[...].astype(x.dtype)
        if axis == 1 and x.ndim == 3:
            w = jnp.broadcast_to(w * mult, (x.shape[0], *w.shape))
            y = jax.lax.dot_general(w, x, (((2,), (1,)), ((0,), (0,))))
            return y if b is None else y + b[:, None]
        if axis not in (-1, x.ndim - 1):
            raise ValueError(f"Dense contracts the last axis or axis 1 of a rank-3 input, not axis {axis} of {x.shape}")
        rows = x.reshape(-1, x.shape[-1])
        y = rows_times_transpose(rows, w * mult) if w.size <= rows.shape[0] * w.shape[0] else \
            rows_times_transpose(rows, w) * mult
        y = y if b is None else y + b
        return y.reshape(*x.shape[:-1], y.shape[-1])


def rows_times_transpose(rows: jax.Array, w: jax.Array) -> jax.Array:
    """x W^T for rows x (R, in) and W (out, in), as a product over W's `in` axis in whichever operand order copies
    less when a sweep vmaps it. XLA:CPU brings a batched product to the form (non-contracting, contracting) x
    (contracting, non-contracting) with copies: x W^T copies each member's W transposed (out * in floats), (W x^T)^T
    copies x transposed (R * in) and the result back (R * out). The sweep bench's input layer (R = 32, in = 3072,
    out = 64, 8 members sharing x) spent 0.63 ms of a 3.75 ms step copying W^T. One member's product compiles to the
    same program in either order."""
    r, (out, inp) = rows.shape[0], w.shape
    if r * (out + inp) < out * inp:
        return jax.lax.dot_general(w, rows, (((1,), (1,)), ((), ()))).T
    return rows @ w.T


def residual(x: jax.Array, y: jax.Array, skip: Multiplier, branch: Multiplier) -> jax.Array:
    """mu x + b y in the compute dtype of x."""
    return skip[...].astype(x.dtype) * x + branch[...].astype(x.dtype) * y


def branch_folds(skip: Multiplier, branch: Multiplier, *ends: str) -> list[tuple[str, jax.Array]]:
    """x <- mu x + beta branch(x), the branch ending in the Dense layers at `ends`: beta folds into their kernel and
    bias (zoo.export); mu scales the residual stream itself, which no parameter can absorb (ValueError unless 1)."""
    mu = np.asarray(skip[...])
    if np.any(mu != 1.0):
        raise ValueError(f"the skip multiplier mu = {float(mu.ravel()[0]):g} scales the residual stream, which no "
                         "parameter can absorb: this run has no SP form")
    return [(f"{end}/{name}", branch[...]) for end in ends for name in ("kernel", "bias")]


class LayerNorm(nnx.Module):
    """LayerNorm over the last axis, computed in f32, with a gain and (`bias`) a bias, both vector-kind parameters.
    The result is in `dtype` (None: the input's): a model whose residual stream stays f32 under bf16 compute gives
    its branches bf16 inputs here, as PyTorch's autocast does (layer_norm in f32, the next matrix product in bf16)."""

    def __init__(self, dim: int, *, scale: Scale, rngs: nnx.Rngs, branch: bool = False, eps: float = 1e-6,
                 bias: bool = True, dtype: str | None = None):
        self.eps, self.dtype = eps, dtype
        gtag = scale.tag("vector", 1, dim, branch=branch, role="norm_gain")
        btag = scale.tag("vector", 1, dim, branch=branch, role="norm_bias")
        self.gain = tagged_param(rngs.params(), scale.plugin, gtag, (dim,), std0=0.0, const=1.0, axes=("embed",))
        self.bias = tagged_param(rngs.params(), scale.plugin, btag, (dim,), std0=0.0, axes=("embed",)) if bias \
            else None

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        mean = x32.mean(-1, keepdims=True)
        var = jnp.square(x32 - mean).mean(-1, keepdims=True)
        y = (x32 - mean) * jax.lax.rsqrt(var + self.eps) * self.gain[...]
        y = y if self.bias is None else y + self.bias[...]
        return y.astype(self.dtype or x.dtype)


def drop_path(x: jax.Array, rate: jax.Array | None, key: jax.Array | None) -> jax.Array:
    """Stochastic depth (Huang et al. 2016) on a residual branch's output, as timm's DropPath: each example's
    branch is kept with probability 1 - rate and scaled by 1 / (1 - rate), so E[drop_path(x)] = x; the identity
    without a rate or a key (evaluation)."""
    if rate is None or key is None:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, (x.shape[0],) + (1,) * (x.ndim - 1))
    return jnp.where(keep, x / jnp.asarray(1.0 - rate, x.dtype), 0).astype(x.dtype)


class Stack(nnx.Module):
    """`depth` copies of a block made by `make(rngs)`, stored stacked (leading axis = depth).

    Applied with `jax.lax.scan` (`scan=True`: compile time flat in depth) or an unrolled loop. A block is
    called as `block(x, key) -> (x, intermediates)`; the stack returns x and the intermediates stacked. With
    `remat`, each block's activations are recomputed in the backward pass instead of stored (`jax.checkpoint`);
    the blocks are then scanned, so only each block's input is kept (an unrolled loop lets XLA's CPU scheduler
    undo the saving). With `drop_path` > 0 a block is called in training as `block(x, key, rate)` with its
    stochastic-depth rate, rising linearly from 0 at the first block to `drop_path` at the last (timm's
    linspace(0, drop_path_rate, depth)).
    """

    def __init__(self, make: Callable[[nnx.Rngs], nnx.Module], depth: int, rngs: nnx.Rngs, scan: bool = True,
                 remat: bool = False, drop_path: float = 0.0):
        self.depth, self.scan, self.remat, self.drop_path = depth, scan, remat, drop_path

        @nnx.split_rngs(splits=depth)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def create(r):
            return make(r)

        self.blocks = create(rngs)

    def __call__(self, x: jax.Array, key: jax.Array | None = None, start: int = 0,
                 stop: int | None = None) -> tuple[jax.Array, dict]:
        """Blocks start..stop-1 (all by default; partial Jacobians apply a slice of the stack)."""
        stop = self.depth if stop is None else stop
        keys = jax.random.split(key, self.depth)[start:stop] if key is not None else None
        rates = jnp.linspace(0.0, self.drop_path, self.depth)[start:stop] if key is not None and self.drop_path \
            else None
        graphdef, state = nnx.split(self.blocks)
        if (start, stop) != (0, self.depth):
            state = jax.tree.map(lambda a: a[start:stop], state)

        def apply(h, block_state, k, rate=None):
            block = nnx.merge(graphdef, block_state)
            return block(h, k) if rate is None else block(h, k, rate)

        if self.remat:
            apply = jax.checkpoint(apply)

        if self.scan or self.remat:
            return jax.lax.scan(lambda h, sk: apply(h, *sk), x, (state, keys, rates))
        # unstacked at once, whose gradient is one concatenate (indexing each layer's slice transposes to a pad of
        # the whole stack per layer, then their sum: 2-3x the block parameters' memory traffic again)
        leaves, treedef = jax.tree.flatten(state)
        layers = [jnp.unstack(a) for a in leaves]
        inters = []
        for i in range(stop - start):
            x, inter = apply(x, treedef.unflatten([a[i] for a in layers]), None if keys is None else keys[i],
                             None if rates is None else rates[i])
            inters.append(inter)
        return x, jax.tree.map(lambda *a: jnp.stack(a), *inters)
