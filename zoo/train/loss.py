"""Softmax cross-entropy over a vocabulary, written for the bytes XLA moves (issue 44, item 5).

    ce = log s + m - x_y,   m = max_j x_j,   s = sum_j exp(x_j - m);   d ce / d x_j = exp(x_j - m) / s - [j = y]

optax's `softmax_cross_entropy_with_integer_labels` on the logits cast to float32 computes these numbers (the same
expressions, jax.nn.logsumexp's), but for a language model's logits, (tokens, vocabulary) and the largest arrays of
its step (GPT-2 at batch 12 x 1024: 12288 x 50304, 1.24 GB in bf16), XLA compiles its gradient as a float32 array
of zeros the logits' size into which the label's term is scattered (take_along_axis's transpose), and its passes
read float32 logits where XLA folds the cast into the bf16 product that makes them, which then writes float32
(XLA:CPU does; nothing in the program stops it). Here:

- the logits are read in their own dtype, each pass upcasting element by element (a bf16 model's bf16 logits, as
  nanoGPT's autocast hands them to its loss: half the bytes of float32);
- the forward pass reads them twice: an argmax, whose value is m and whose index is the accuracy's, and the sum s;
- the backward pass once: `exp(x - m) g / s - g [j = y]` in one elementwise pass, the label's term a comparison
  with the position (no scatter), its m passed through an optimization barrier (a vector: free) so that XLA cannot
  merge these exponentials with the forward's, which would keep a float32 array of them from one pass to the other.

A custom_jvp (not a custom_vjp): forward mode, jax.hessian and vmap apply as to optax's. The losses and gradients
are optax's of the same logits up to float reassociation (tests/train/test_loss_formulation.py). Of a bf16 model's
logits that is the loss of the bf16 logits the model returns, as nanoGPT's; where XLA had folded the cast into the
product, the previous formulation saw the product unrounded: one bf16 rounding (2^-9 relative) per logit apart.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def cross_entropy(logits: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-position cross-entropy (float32) and whether the label is the first argmax, for logits (..., V) of any
    float dtype and integer labels (...)."""
    best = jnp.argmax(logits, axis=-1)
    return _cross_entropy(logits, labels, best), best == labels


def _pick(x: jax.Array, index: jax.Array) -> jax.Array:
    return jnp.take_along_axis(x, index[..., None], axis=-1)[..., 0].astype(jnp.float32)


def _stats(x: jax.Array, labels: jax.Array, best: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """m (0 where not finite, as jax.nn.logsumexp), s and x_y, float32."""
    m = _pick(x, best)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    s = jnp.sum(jnp.exp(x.astype(jnp.float32) - m[..., None]), axis=-1)
    return m, s, _pick(x, labels)


@jax.custom_jvp
def _cross_entropy(x: jax.Array, labels: jax.Array, best: jax.Array) -> jax.Array:
    m, s, label = _stats(x, labels, best)
    return jnp.log(s) + m - label


@_cross_entropy.defjvp
def _cross_entropy_jvp(primals: tuple, tangents: tuple) -> tuple[jax.Array, jax.Array]:
    """d ce = sum_j exp(x_j - m) dx_j / s - dx_y, both sums over j linear in dx, so that the transpose is one
    elementwise pass over x (the label's term a select, not a gather's scatter)."""
    x, labels, best = primals
    dx = tangents[0].astype(jnp.float32)
    m, s, label = _stats(x, labels, best)
    e = jnp.exp(x.astype(jnp.float32) - jax.lax.optimization_barrier(m)[..., None])
    is_label = jnp.arange(x.shape[-1]) == labels[..., None]
    return jnp.log(s) + m - label, jnp.sum(e * dx, axis=-1) / s - jnp.sum(jnp.where(is_label, dx, 0.0), axis=-1)


def soft_cross_entropy(logits: jax.Array, labels: jax.Array, target: jax.Array | None = None,
                       smoothing: float = 0.0) -> tuple[jax.Array, jax.Array]:
    """-sum_k t_k log p_k (float32) against the labels, or the mixed label distributions `target` where augmentation
    mixed them (zoo.data.mix), with label smoothing e (Szegedy et al. 2016): t <- (1 - e) t + e / K, which is
    (1 - e) CE(t) + e mean_k(-log p_k); and whether the label (each image's own) is the first argmax."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32))
    if target is not None:
        ce = -(target * logp).sum(-1)
    else:
        ce = -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
    if smoothing:
        ce = (1.0 - smoothing) * ce - smoothing * logp.mean(-1)
    return ce, jnp.argmax(logits, axis=-1) == labels
