"""The loop's input: the batch of every step, a function of (seed, step), sharded over the mesh's data x fsdp.

Small sets live on the devices whole (replicated) and a step's batch is gathered inside the jitted step from its
indices, so the input pipeline never bounds a small model. Each process passes only its rows of the batch
(`jax.make_array_from_process_local_data`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

from zoo.train.mesh import MeshPlan, process_rows


def replicate(host: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
    """A host array (the same on every process) placed whole on every device of the sharding's mesh."""
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


class MemoryInput:
    def __init__(self, data: Any, plan: MeshPlan, batch_size: int, eval_batch_size: int, seed: int,
                 grad_accum: int = 1):
        plan.check_batch(batch_size)
        if grad_accum > 1:
            plan.check_batch(batch_size // grad_accum, f"the microbatch (--batch-size / --grad-accum {grad_accum})")
        self.data, self.plan, self.batch_size, self.seed = data, plan, batch_size, seed
        self.rows = process_rows(plan.batch, batch_size)
        ways = plan.batch_ways
        self.eval_batch_size = -(-eval_batch_size // ways) * ways  # a multiple of the batch split
        self.arrays = {split: {k: replicate(v, plan.replicated) for k, v in data.splits[split].items()}
                       for split in ("train", data.eval_split)}
        self.shardings = {"arrays": jax.tree.map(lambda _: plan.replicated, self.arrays["train"]), "idx": plan.batch}
        self.eval_shardings = {**self.shardings, "weight": plan.batch}

    def _global(self, host: np.ndarray) -> jax.Array:
        rows = process_rows(self.plan.batch, len(host))
        return jax.make_array_from_process_local_data(self.plan.batch, host[rows], host.shape)

    def train_args(self, step: int) -> dict[str, Any]:
        idx = np.asarray(self.data.indices("train", step, self.batch_size, self.seed), np.int32)
        return {"arrays": self.arrays["train"], "idx": self._global(idx)}

    def batch(self, args: dict[str, Any]) -> dict[str, jax.Array]:
        """Inside the jitted step: the batch {"x", "y"} of `args`."""
        return self.data.gather(args["arrays"], args["idx"])

    def eval_args(self) -> Iterator[dict[str, Any]]:
        """The eval split in batches of one fixed size (one compile), padded rows weighted 0."""
        for idx in self.data.eval_indices(self.eval_batch_size):
            pad = self.eval_batch_size - len(idx)
            weight = np.concatenate([np.ones(len(idx), np.float32), np.zeros(pad, np.float32)])
            idx = np.concatenate([np.asarray(idx, np.int32), np.zeros(pad, np.int32)])
            yield {"arrays": self.arrays[self.data.eval_split], "idx": self._global(idx),
                   "weight": self._global(weight)}
