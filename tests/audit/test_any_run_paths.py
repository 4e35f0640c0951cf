"""The audit of a model zoo does not build names each parameter by its path in the model's own pytree (the audit's
own run of such a model, Haiku convs beside a Linen attention, is test_referee_byom5's)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx

import zoo.param as P
from zoo.audit import AnyRun
from zoo.audit.probe import paths
from zoo.optim import OptimConfig
from zoo.tree import key_path


class MLP(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(3, name="readout")(nn.relu(nn.Dense(self.width, name="embed")(x)))


def init(key: jax.Array, width: int, depth: int) -> dict:
    return MLP(width).init(key, jnp.zeros((1, 4)))


def apply(params: dict, x: jax.Array, width: int, depth: int) -> tuple[jax.Array, dict]:
    return MLP(width).apply(params, x), {}


def test_a_linen_models_parameters_read_as_linen_users_write_them():
    """A Linen model's variables are {"params": {...}}, and the audit's wrapper keeps them under its own "params"
    attribute, so every name read "params/params/embed/kernel"; a Linen user writes params["params"]["embed"]["kernel"],
    "params/embed/kernel": the names the audit gives are the model's own paths."""
    batch = {"x": jnp.zeros((2, 4)), "y": jnp.zeros((2,), jnp.int32)}
    run = AnyRun(init, apply, P.get("mup"), OptimConfig("adam"), batch)
    prog, _ = run.program(16, 1, 8, 1)
    state = nnx.state(nnx.eval_shape(lambda: prog.make_model(nnx.Rngs(0))), nnx.Param)
    shapes = jax.eval_shape(lambda k: init(k, 16, 1), jax.random.key(0))
    own = {key_path(p) for p, _ in jax.tree_util.tree_flatten_with_path(shapes)[0]}
    assert {run.param_path(p) for p in paths(state)} == own == {
        "params/embed/bias", "params/embed/kernel", "params/readout/bias", "params/readout/kernel"}
