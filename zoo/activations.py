"""The pointwise nonlinearities phi the models use, by name (a leaf module: the models apply them, the
mean-field theory in zoo.param integrates them)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu,
    "abs": jnp.abs,
    "gelu": jax.nn.gelu,  # the tanh approximation (JAX's default; PyTorch's GELU(approximate="tanh"))
    "gelu_exact": functools.partial(jax.nn.gelu, approximate=False),  # x Phi(x) with erf (PyTorch's nn.GELU())
    "tanh": jnp.tanh,
    "erf": jax.scipy.special.erf,
    "identity": lambda x: x,
}


def activation(name: str) -> Callable[[jax.Array], jax.Array]:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose from {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


# phi(c u) = c phi(u) for every c > 0 ("positive") or every c ("any"): what a multiplier after phi may move before it
HOMOGENEOUS = {"relu": "positive", "abs": "positive", "identity": "any"}
