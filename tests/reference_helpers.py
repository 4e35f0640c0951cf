"""Shared pieces of the reference-parity tests (tests/models/test_vit_reference.py, test_mixer_reference.py): the
bench's module, a batch, zoo's logits, loss and gradients in the reference's names, the reference's from a
functional forward pass, and zoo's logits at another model option with the same weights."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from cli_utils import ROOT
from flax import nnx

import zoo.models
import zoo.param
from zoo.train.step import loss_and_metrics, run_once_options

BATCH, IMAGE, CLASSES = 8, 16, 10


def parity_bench() -> Any:
    """bench/reference_parity.py as a module."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import reference_parity
    finally:
        sys.path.pop(0)
    return reference_parity


def batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return (rng.uniform(-1, 1, (BATCH, IMAGE, IMAGE, 3)).astype(np.float32),
            rng.integers(0, CLASSES, BATCH).astype(np.int64))


def zoo_side(model: Any, to_reference: Callable[[Any], dict]) -> tuple[np.ndarray, float, dict]:
    """zoo's logits, loss and gradients (in the reference's names, by `to_reference`) on the batch."""
    x, y = batch()
    data = {"x": jnp.asarray(x), "y": jnp.asarray(y, jnp.int32)}
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss(p):
        m = nnx.merge(graphdef, p, rest)
        return loss_and_metrics(m, data, None, False)[0], m(data["x"])[0]

    (value, logits), grads = jax.jit(jax.value_and_grad(loss, has_aux=True)).lower(params).compile(
        compiler_options=run_once_options())(params)  # runs once: XLA's backend optimisation off
    return np.asarray(logits), float(value), to_reference(nnx.merge(graphdef, grads, rest))


def reference_side(sd: dict, logits_of: Callable[[dict, Any], Any]) -> tuple[np.ndarray, float, dict]:
    """The reference's logits, loss and gradients on the batch: `logits_of(state_dict, x (B, C, H, W))` in torch."""
    import torch
    import torch.nn.functional as F

    x, y = batch()
    sd = {k: torch.tensor(np.array(v), requires_grad=True) for k, v in sd.items()}
    logits = logits_of(sd, torch.from_numpy(x.transpose(0, 3, 1, 2)))
    loss = F.cross_entropy(logits, torch.from_numpy(y))
    loss.backward()
    return logits.detach().numpy(), loss.item(), {k: v.grad.numpy() for k, v in sd.items()}


def logit_gap(logits: np.ndarray, ref_logits: np.ndarray) -> float:
    return float(np.abs(logits - ref_logits).max() / np.abs(ref_logits).max())


def logits_at(model: Any, option: tuple[str, Any], to_reference: Callable[[Any], dict]) -> np.ndarray:
    """zoo's logits on the batch with `model`'s weights but one model option changed (asserted: the same weights)."""
    name = type(model).__name__.lower()
    other = zoo.models.create(name, dataclasses.replace(model.cfg, **dict([option])), zoo.param.get("sp"),
                              nnx.Rngs(0))
    sd = to_reference(model)
    assert all(np.array_equal(v, sd[k]) for k, v in to_reference(other).items())
    x = jnp.asarray(batch()[0])
    graphdef, state = nnx.split(other)
    return np.asarray(jax.jit(lambda s, x: nnx.merge(graphdef, s)(x)[0]).lower(state, x).compile(
        compiler_options=run_once_options())(state, x))
