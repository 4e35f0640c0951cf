"""Routing for the optimizer chain (zoo.optim): where each parameter goes (Route: its family, whether it trains, its
stacked layers and the matrices Muon sees in them), Muon's base-shape side, and per-parameter update clipping at a
width-independent level (TP IVb 2.10.2).

Muon's update is O, the Newton-Schulz orthogonalisation of its momentum: its five quintic steps lift a singular value
of the normalised momentum in [0.01, 1] into about [0.68, 1.13], whatever the shape and rank, and leave a smaller one
lower (1e-3 reaches 0.47; a full-rank 40 x 40 Gaussian's O spans 0.48-1.13, median 0.81). Its RMS is about
sqrt(r / (p q)) at rank r (0.87 of it for that Gaussian): 1/sqrt(max(p, q)) at full rank, but a gradient summed over a
batch B < min(p, q) (and the momentum early on) has rank <= B, so
O's RMS depends on the batch as much as on the width. Clipping therefore reads O's singular-value scale s(O) (see
`singular_scale`), which is the same at every width and rank, and caps it at max_rms * sqrt(max(p0, q0)): the
spectral norm of a full-rank O of RMS max_rms at the base shape (p0 x q0).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import optax

from zoo.param import families
from zoo.param.tags import Tag


def base_side(tag: Tag) -> float:
    """sqrt(max(fan_in0, fan_out0)) at the base shape: 1 / the RMS of a full-rank O there (singular values 1)."""
    return math.sqrt(max(tag.base_fan_in, tag.base_fan_out))


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Route:
    """Where the optimizer sends one parameter: its family and, for the spectral family, how to find the matrix
    (fan-in, layout and number of fan-out axes of its tag) after any leading stacked-layer axes. A static pytree
    leaf-free node, so a tree of routes passes through jit and vmap as structure."""

    family: str
    fan_in: int = 1
    layout: str = "in_out"
    base_fraction: float = 1.0  # the parameter's size at the base width and depth over its size: m^-k (L0/L)
    base_side: float = 1.0  # spectral: sqrt(max(p0, q0)), 1 / a full-rank O's RMS at the base shape
    out_axes: int = 1  # Tag.out_axes: the k axes of the fan-out
    layer_size: int = 0  # fan_in * fan_out: the entries of one stacked layer (0: not known, the leaf is one layer)
    trains: bool = True  # False for a kind the plugin freezes

    @classmethod
    def of(cls, tag: Tag, family: str, trains: bool = True) -> Route:
        """The route of a tagged parameter the optimizer puts in `family` (`trains`: the plugin does not freeze it)."""
        return cls(family, tag.fan_in, tag.layout,
                   float(tag.width_mult) ** -families.WIDTH_AXES[tag.kind] / float(tag.depth_ratio),
                   base_side(tag) if family == "spectral" else 1.0, tag.out_axes, tag.fan_in * tag.fan_out, trains)

    def stacked_axes(self, shape: tuple[int, ...]) -> int:
        """How many leading axes of an array of `shape` index stacked layers: the fewest whose removal leaves
        layer_size entries (0 where none does, or layer_size is not known)."""
        return next((i for i in range(len(shape) + 1) if math.prod(shape[i:]) == self.layer_size), 0)

    def matrix_axes(self, shape: tuple[int, ...]) -> optax.contrib.MuonDimensionNumbers:
        """Muon's (reduction, output) axes: the k = out_axes fan-out axes (the last k for in_out, the first k after
        the stacked axes for out_in, the k before the last for spatial_out_in) and the fewest axes next to them (the
        last and those before the fan-out for spatial_out_in) whose sizes multiply to the fan-in; axes before
        them are stacked layers, orthogonalised one by one. Muon sees the matrix [fan_in, prod(fan-out axes)]; the
        output axis is an int when k = 1, a tuple otherwise."""
        k = self.out_axes
        for j in range(1, len(shape) - k + 1):
            if self.layout == "in_out" and math.prod(shape[len(shape) - k - j:len(shape) - k]) == self.fan_in:
                reduction, output = tuple(range(-k - j, -k)), tuple(range(-k, 0))
                break
            if self.layout == "out_in" and math.prod(shape[len(shape) - j:]) == self.fan_in:
                reduction, output = tuple(range(-j, 0)), tuple(range(-k - j, -j))
                break
            if self.layout == "spatial_out_in" and shape[-1] * math.prod(
                    shape[len(shape) - k - j:len(shape) - k - 1]) == self.fan_in:  # [..., out, in]: j axes in
                reduction, output = (*range(-k - j, -k - 1), -1), tuple(range(-k - 1, -1))
                break
        else:
            raise ValueError(f"no axes of a parameter of shape {shape} multiply to its fan-in {self.fan_in} "
                             f"({self.layout}, {k} fan-out axes): Muon cannot find its matrix")
        return optax.contrib.MuonDimensionNumbers(reduction, output[0] if k == 1 else output)


def matrix_dims(shape: tuple[int, ...], route: Route) -> tuple[tuple[int, ...], ...]:
    """The (stacked, fan-in, fan-out) axes of an array of `shape` (Route.matrix_axes), as non-negative indices; the
    stacked axes are the leading ones."""
    dims = route.matrix_axes(shape)
    reduction = tuple(a % len(shape) for a in dims.reduction_axis)
    out = dims.output_axis
    output = tuple(a % len(shape) for a in (out if isinstance(out, tuple) else (out,)))  # several: out_axes > 1
    return tuple(a for a in range(len(shape)) if a not in reduction + output), reduction, output


def as_matrices(x: jax.Array, route: Route) -> jax.Array:
    """x as a stack (layers, fan_in, fan_out) of the matrices Muon sees, in float32."""
    stacked, reduction, output = matrix_dims(x.shape, route)
    fan_in, fan_out = (math.prod(x.shape[a] for a in axes) for axes in (reduction, output))
    return x.transpose(*stacked, *reduction, *output).reshape(-1, fan_in, fan_out).astype(jnp.float32)


def singular_scale(w: jax.Array) -> jax.Array:
    """Per matrix of a stack w [layers, p, q]: s(w) = ||w^T w||_F / ||w||_F = sqrt(sum s_i^4 / sum s_i^2), the mean
    of w's singular values s_i weighted by s_i^2 (between the smallest nonzero one and the largest; their common
    value when they are equal, as Muon's O's are, at any rank). One Gram product of the smaller side."""
    gram = jnp.einsum("lij,lik->ljk", w, w) if w.shape[1] >= w.shape[2] else jnp.einsum("lji,lki->ljk", w, w)
    return jnp.linalg.norm(gram, axis=(1, 2)) / jnp.maximum(jnp.linalg.norm(w, axis=(1, 2)), 1e-30)


def spectral_clip_factor(u: jax.Array, route: Route, max_rms: float) -> jax.Array:
    """min(1, max_rms * sqrt(max(p0, q0)) / s(u)) per stacked matrix of u (singular_scale), shaped to broadcast
    against u."""
    stacked = matrix_dims(u.shape, route)[0]
    scale = singular_scale(as_matrices(u, route))
    factor = jnp.minimum(1.0, max_rms * route.base_side / jnp.maximum(scale, 1e-30))
    return factor.reshape(tuple(u.shape[a] for a in stacked) + (1,) * (u.ndim - len(stacked))).astype(u.dtype)


def clip_by_natural_rms(max_rms: float, route: Any = None) -> optax.GradientTransformation:
    """Per-parameter clipping of the base optimizer's update at a threshold that follows the update's natural size,
    so that the clip factor is width-independent (TP IVb 2.10.2): an RMS of max_rms where the entries are Theta(1)
    (entrywise optimizers, SGD's faithful gradients); on a spectral route, each stacked matrix's singular-value scale
    s(O) at max_rms * sqrt(max(p0, q0)) (module docstring); each stacked layer alone, as the unstacked model's
    parameters would be (Route.stacked_axes; an RMS over the stack let the other layers set one layer's clip). O's
    RMS would not do: it is sqrt(rank / (p q)), so a threshold on it (max_rms * sqrt(max(p0, q0) / max(p, q)), exact
    at full rank) clipped a muP hidden matrix's O at a batch of 32 by 0.26, 0.55, 0.98 at widths 64, 256, 1024 (base
    64, max_rms 0.02), and 0.19, 0.18, 0.18 at full rank."""

    def one(u, r):
        if isinstance(u, optax.MaskedNode):
            return u
        if r is not None and r.family == "spectral":
            return u * spectral_clip_factor(u, r, max_rms)
        layer = tuple(range(0 if r is None else r.stacked_axes(u.shape), u.ndim))
        rms = jnp.sqrt(jnp.mean(jnp.square(u), axis=layer, keepdims=True))
        return u * jnp.minimum(1.0, max_rms / jnp.maximum(rms, 1e-30)).astype(u.dtype)

    def update(updates, state, params=None):
        del params
        if route is None:
            return jax.tree.map(lambda u: one(u, None), updates), state
        return jax.tree.map(one, updates, route, is_leaf=lambda x: isinstance(x, optax.MaskedNode)), state

    return optax.GradientTransformation(lambda p: optax.EmptyState(), update)
