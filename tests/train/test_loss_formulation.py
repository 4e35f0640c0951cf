"""zoo.train.loss.cross_entropy computes what the previous formulation did (optax's softmax cross-entropy on the
logits cast to float32, the argmax for the accuracy): the same losses, accuracies, gradients, forward-mode
derivatives, to float reassociation, on float32 and bf16 logits; and its gradient has no scatter
(the previous one scattered the label's term into a float32 array of the logits' size). The models' training with
either formulation: tests/test_formulation.py."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from zoo.train.loss import cross_entropy
from zoo.train.step import run_once_options


def previous_cross_entropy(logits, labels):
    """per_example's loss before zoo.train.loss."""
    logits = logits.astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels), logits.argmax(-1) == labels


def everything(f, x, y, w, t):
    """Per-position losses and accuracy, the gradient and a directional derivative of their weighted sum."""

    def weighted(x):
        return jnp.sum(f(x, y)[0] * w)

    return *f(x, y), jax.grad(weighted)(x).astype(jnp.float32), jax.jvp(weighted, (x,), (t,))[1]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_same_values_and_derivatives_as_the_previous_formulation(dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 37)) * 4
    x[0, 0] *= 30  # a row far from 0
    x = jnp.asarray(x, dtype)
    y = jnp.asarray(rng.integers(0, 37, (3, 5)))
    w = jnp.asarray(rng.uniform(size=(3, 5)), jnp.float32)  # a weight per position: distinct cotangents
    t = jnp.asarray(rng.normal(size=x.shape), dtype)
    ours, theirs = (jax.jit(lambda *a, f=f: everything(f, *a)).lower(x, y, w, t).compile(run_once_options())
                    for f in (cross_entropy, previous_cross_entropy))
    ce, correct, grad, jvp = ours(x, y, w, t)
    assert ce.dtype == jnp.float32 and correct.dtype == jnp.bool_ and 0 < int(correct.sum()) < correct.size
    for a, b in zip((ce, correct, grad, jvp), theirs(x, y, w, t), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert jax.eval_shape(jax.grad(lambda x: cross_entropy(x, y)[0].sum()), x).dtype == x.dtype
    assert "scatter" not in ours.as_text()
