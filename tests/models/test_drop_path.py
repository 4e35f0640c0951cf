"""Stochastic depth (drop path) in the residual blocks of ViT and Mixer: timm's per-example DropPath, rates rising
linearly over the stack, off in evaluation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import zoo.models
import zoo.param
from zoo.models.layers import Stack, drop_path

TINY = {"vit": dict(width=32, depth=2, head_dim=16, in_shape=(8, 8, 3), patch=4, num_classes=4),
        "mixer": dict(width=32, depth=2, in_shape=(8, 8, 3), patch=4, token_dim=8, num_classes=4)}


def test_drop_path_keeps_the_expected_activation():
    """E[drop_path(x)] = x: each example is kept whole with probability 1 - r and scaled by 1 / (1 - r). With
    n = 20000 examples the kept fraction's standard error is sqrt(r (1 - r) / n) = 0.0032 at r = 0.3; the mean
    activation is x times that fraction / (1 - r), checked to 4 standard errors (a 1e-4 chance of failing by luck)."""
    n, rate = 20000, 0.3
    x = jnp.broadcast_to(jnp.arange(1.0, 5.0), (n, 2, 4))
    y = np.asarray(jax.jit(drop_path)(x, jnp.asarray(rate), jax.random.key(0)))
    kept = np.all(y == np.asarray(x) / np.float32(1 - rate), axis=(1, 2))
    dropped = np.all(y == 0, axis=(1, 2))
    assert np.all(kept | dropped)  # per example, never per element
    se = np.sqrt(rate * (1 - rate) / n)
    assert abs(kept.mean() - (1 - rate)) < 4 * se
    np.testing.assert_allclose(y.mean(0), np.asarray(x[0]), rtol=4 * se / (1 - rate))
    assert drop_path(x, None, jax.random.key(0)) is x and drop_path(x, jnp.asarray(rate), None) is x


class Probe(nnx.Module):
    """A block that adds its rate and reports it: the stack's schedule made visible."""

    def __init__(self, rngs: nnx.Rngs):
        self.w = nnx.Param(jnp.zeros(()))

    def __call__(self, x, key=None, rate=None):
        return x + rate, {"rate": rate}


@pytest.mark.parametrize("scan", [True, False])
def test_stack_rates_rise_linearly_to_the_last_block(scan):
    """timm's dpr = linspace(0, drop_path_rate, depth): 0 at the first block, the rate at the last."""
    stack = Stack(Probe, 5, nnx.Rngs(0), scan=scan, drop_path=0.2)
    out, inter = stack(jnp.zeros(()), jax.random.key(0))
    np.testing.assert_allclose(inter["rate"], [0.0, 0.05, 0.1, 0.15, 0.2], rtol=1e-6)
    np.testing.assert_allclose(out, 0.5, rtol=1e-6)
    _, part = stack(jnp.zeros(()), jax.random.key(0), start=2, stop=4)
    np.testing.assert_allclose(part["rate"], [0.1, 0.15], rtol=1e-6)


@pytest.mark.parametrize("name", ["vit", "mixer"])
def test_drop_path_trains_and_is_off_in_eval(name):
    """In training (drop_path 0.5 over 2 blocks: rates 0 and 0.5) the output depends on the key; evaluation, and
    training without a key, compute the model without drop path exactly."""
    model = zoo.models.create(name, zoo.models.config(name, **TINY[name], drop_path=0.5), zoo.param.get("sp"),
                              nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    model.stack.drop_path = 0.0  # the same weights without drop path
    plain_graphdef, _ = nnx.split(model)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 8, 8, 3)), jnp.float32)

    @jax.jit
    def outputs(state, k1, k2):
        plain = nnx.merge(plain_graphdef, state)(x)[0]
        model = nnx.merge(graphdef, state)
        return [plain] + [model(x, key=k, train=t)[0] for k, t in ((k1, False), (None, True), (k1, True),
                                                                   (k2, True))]

    plain, evaluated, keyless, a, b = outputs(state, jax.random.key(1), jax.random.key(2))
    np.testing.assert_array_equal(evaluated, plain)
    np.testing.assert_array_equal(keyless, plain)
    assert not np.allclose(a, plain, atol=1e-3) and not np.allclose(a, b, atol=1e-3)
