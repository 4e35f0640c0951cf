"""Random inputs with a model's input shape, for the diagnostics (no data set needed)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def random_inputs(cfg: Any, batch: int, key: jax.Array) -> jax.Array:
    """x ~ N(0, 1) with the model's input shape, or uniform random tokens (B, seq_len) for language models."""
    if hasattr(cfg, "vocab_size"):
        return jax.random.randint(key, (batch, cfg.seq_len), 0, cfg.vocab_size)
    return jax.random.normal(key, (batch, *cfg.in_shape), jnp.float32)


def random_batch(cfg: Any, batch: int, key: jax.Array) -> dict[str, jax.Array]:
    """Inputs and random labels: one class per example, or one next token per position for language models."""
    kx, ky = jax.random.split(key)
    x = random_inputs(cfg, batch, kx)
    if hasattr(cfg, "vocab_size"):
        return {"x": x, "y": jax.random.randint(ky, x.shape, 0, cfg.vocab_size)}
    return {"x": x, "y": jax.random.randint(ky, (batch,), 0, cfg.num_classes)}
