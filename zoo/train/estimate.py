"""nanoGPT's loss estimate (its train.py's estimate_loss): each split's loss as the mean over N random batches of the
training batch size, the model without dropout. Noisier than zoo's eval (each eval window once, over the whole split
thinned evenly to at most 1024 windows: zoo.data.view.DataView.eval_indices), it is reported beside it (`--eval-iters
N`: sampled_loss, train_sampled_loss) so that a run compares with nanoGPT's numbers on nanoGPT's terms; the batches
are a function of (seed, step), as the training batches are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

STREAM = 0x5A4D  # the estimate's random stream, apart from the training batches' (seed, step)


def sampled_losses(compiled: Any, state: Any, step: int, iters: int, seed: int,
                   stop: Callable[[], bool] = lambda: False) -> dict[str, float] | None:
    """{"sampled_loss": eval split, "train_sampled_loss": train split}, each the mean loss of `iters` batches of
    uniformly drawn examples (text: window starts), the batch size the training's; None where `stop()` turned true
    before the end. The sum is kept on the device, one scalar, whatever `iters`."""
    batches = compiled.batches
    data, size = batches.data, batches.batch_size
    out = {}
    for i, (split, name) in enumerate(((data.eval_split, "sampled_loss"), ("train", "train_sampled_loss"))):
        rng = np.random.default_rng([seed, step, STREAM, i])
        n = data.size(split)
        total = jnp.float32(0)
        for _ in range(iters):
            if stop():
                return None
            total += compiled.batch_loss(state, batches.sample_args(split, rng.integers(0, n, size)))["loss"]
        out[name] = float(jax.device_get(total)) / iters
    return out
