"""Sizes of one array, as the audit reads them: RMS, the spectral norm of each stacked layer's matrix (power
iteration), a decoupled shrink, and the power with which a forward pass applies a multiplier. Pure jnp: they run
inside the probe's jitted program, on sharded arrays too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from optax.contrib._muon import orthogonalize_via_newton_schulz  # not re-exported by optax.contrib

from zoo.models.transformer import jvp
from zoo.muon import Route, as_matrices

POWER_ITERATIONS = 100
NS_COEFFS = (3.4445, -4.7750, 2.0315)  # optax.contrib.scale_by_muon's default, which zoo's chain uses


def rms(x: jax.Array) -> jax.Array:
    """sqrt(mean(x^2)) over every entry."""
    return jnp.sqrt(jnp.mean(jnp.square(x.astype(jnp.float32))))


def spectral_norm(x: jax.Array, route: Route, key: jax.Array) -> jax.Array:
    """The mean over stacked layers of each layer's largest singular value, by power iteration on W^T W from a
    random start (POWER_ITERATIONS steps: the relative error falls like (s2/s1)^(2k))."""
    w = as_matrices(x, route)
    v = jax.random.normal(key, (w.shape[0], w.shape[2]), jnp.float32)

    def step(v, _):
        v = jnp.einsum("lij,lj->li", w, v)
        v = jnp.einsum("lij,li->lj", w, v)
        return v / (jnp.linalg.norm(v, axis=-1, keepdims=True) + 1e-30), None

    v = jax.lax.scan(step, v, length=POWER_ITERATIONS)[0]
    return jnp.mean(jnp.linalg.norm(jnp.einsum("lij,lj->li", w, v), axis=-1))


def spectral_step(update: jax.Array, grad: jax.Array, route: Route, ns_steps: int) -> jax.Array:
    """The step size s of an update -s O, O the Newton-Schulz orthogonalisation of the gradient that Muon computes
    (optax's coefficients, each stacked layer alone; at the first step Muon's momentum is a multiple of the gradient
    and the iteration is scale-invariant): -<u, O> / <O, O>. The top singular value of O lands anywhere in about
    [0.7, 1.2] by the spectrum's shape, so the update's spectral norm wanders with the gradient; this does not."""
    o = orthogonalize_via_newton_schulz(grad.astype(jnp.float32), jnp.asarray(NS_COEFFS), ns_steps,
                                        dimension_numbers=route.matrix_axes(grad.shape))
    return -jnp.sum(update.astype(jnp.float32) * o) / jnp.maximum(jnp.sum(o * o), 1e-30)


def shrink(update: jax.Array, w: jax.Array) -> jax.Array:
    """The per-step decoupled shrink lambda of an update -lambda w (least squares: -<u, w> / <w, w>)."""
    w32 = w.astype(jnp.float32)
    return -jnp.sum(update.astype(jnp.float32) * w32) / jnp.maximum(jnp.sum(w32 * w32), 1e-30)


def multiplier_power(f: Callable[[Any, Any], jax.Array], w: Any, c: Any, w_tangent: Any, c_tangent: Any) -> jax.Array:
    """p with f depending on (w, c) through c^p w near here: the directional derivatives of f along w itself and
    along c itself satisfy d_c f . c = p d_w f . w (Euler), so p = <J_c c, J_w w> / |J_w w|^2 (1 when the
    multiplier is applied once). `w_tangent`/`c_tangent` are the tangent trees: w (or c) at the leaf, zeros
    elsewhere."""
    _, along_w = jvp(lambda p: f(p, c), (w,), (w_tangent,))
    _, along_c = jvp(lambda m: f(w, m), (c,), (c_tangent,))
    along_w, along_c = along_w.astype(jnp.float32), along_c.astype(jnp.float32)
    return jnp.sum(along_c * along_w) / jnp.maximum(jnp.sum(along_w * along_w), 1e-30)


def output_power(f: Callable[[Any], jax.Array], c: Any, c_tangent: Any) -> jax.Array:
    """p with f = c^p g, a multiplier c applied at the output (a tied readout's): the directional derivative along c
    itself is p f (Euler), so p = <J_c c, f> / |f|^2."""
    out, along_c = jvp(f, (c,), (c_tangent,))
    out, along_c = out.astype(jnp.float32), along_c.astype(jnp.float32)
    return jnp.sum(along_c * out) / jnp.maximum(jnp.sum(out * out), 1e-30)
