"""The loop's input: the batch of every step, a function of (seed, step), sharded over the mesh's data x fsdp.

Two paths with the same batches (`zoo.data` shares the index function):
- MemoryInput: small sets live on the devices whole (replicated) and a step's batch is gathered inside the
  jitted step from its indices, so the input pipeline never bounds a small model;
- StreamInput: sets that do not fit are read on the host, batch after batch, by grain (`zoo.data.stream`,
  decoding in worker processes), and each host batch is placed on the devices.
Each process passes only its rows of the batch (`jax.make_array_from_process_local_data`); with streaming it
also reads only those.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

from zoo.config import RunConfig
from zoo.data.streamed import usable_cores
from zoo.train.mesh import MeshPlan, process_rows


def open_input(data: Any, plan: MeshPlan, cfg: RunConfig, start: int) -> MemoryInput | StreamInput:
    """The input of a run: streamed when the data set streams (zoo.data's size rule or --stream)."""
    loop = cfg.loop
    if data.streamed:
        return StreamInput(data, plan, loop.batch_size, loop.eval_batch_size, loop.seed, start, cfg.data.workers)
    return MemoryInput(data, plan, loop.batch_size, loop.eval_batch_size, loop.seed)


def check_workers(workers: int, data: Any, name: str) -> None:
    """--workers decode a streamed set's batches, each in a Python process of its own on a core of its own: a set
    held on the device has nothing for them to do, and more than the cores this process may use only compete for
    them (300 spawned for minutes and took 10 GB before the first step)."""
    if not workers:
        return
    if not data.streamed:
        raise ValueError(f"--workers {workers} decode streamed batches, but {name} is held in memory (it is small); "
                         "leave --workers out, or stream it with --stream true")
    cores = usable_cores()
    if workers > cores:
        raise ValueError(f"--workers {workers} is more than the {cores} CPU cores this process may use (each worker "
                         f"is a process decoding on a core of its own); use at most {cores}")


def replicate(host: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
    """A host array (the same on every process) placed whole on every device of the sharding's mesh."""
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


class _Input:
    """What both paths share: this process's rows, and fixed-size padded eval batches (the batch's split over the
    mesh is checked before, zoo.train.compiled.check_fits)."""

    def __init__(self, data: Any, plan: MeshPlan, batch_size: int, eval_batch_size: int, seed: int):
        self.data, self.plan, self.batch_size, self.seed = data, plan, batch_size, seed
        self.rows = process_rows(plan.batch, batch_size)
        ways, examples = plan.batch_ways, sum(map(len, data.eval_indices(eval_batch_size)))
        size = min(eval_batch_size, examples)  # no bigger than the eval set: padding rows cost memory, not accuracy
        self.eval_batch_size = -(-size // ways) * ways  # a multiple of the batch split

    def _global(self, local: np.ndarray, rows: int) -> jax.Array:
        """This process's part of a global batch of `rows` rows, as one array sharded over the mesh."""
        return jax.make_array_from_process_local_data(self.plan.batch, local, (rows, *local.shape[1:]))

    def _eval_batches(self) -> Iterator[tuple[np.ndarray, np.ndarray, slice]]:
        """(indices, weights, this process's rows) of each eval batch, padded to one size (one compile)."""
        rows = process_rows(self.plan.batch, self.eval_batch_size)
        for idx in self.data.eval_indices(self.eval_batch_size):
            pad = self.eval_batch_size - len(idx)
            weight = np.concatenate([np.ones(len(idx), np.float32), np.zeros(pad, np.float32)])
            yield np.concatenate([np.asarray(idx, np.int32), np.zeros(pad, np.int32)]), weight, rows

    def close(self) -> None:
        """Nothing to release (streams stop their workers here)."""


class MemoryInput(_Input):
    def __init__(self, data: Any, plan: MeshPlan, batch_size: int, eval_batch_size: int, seed: int):
        super().__init__(data, plan, batch_size, eval_batch_size, seed)
        self.arrays = {split: {k: replicate(v, plan.replicated) for k, v in data.splits[split].items()}
                       for split in ("train", data.eval_split)}
        self.shardings = {"arrays": jax.tree.map(lambda _: plan.replicated, self.arrays["train"]), "idx": plan.batch}
        self.eval_shardings = {**self.shardings, "weight": plan.batch}

    def args_at(self, step: int) -> dict[str, Any]:
        idx = np.asarray(self.data.indices("train", step, self.batch_size, self.seed), np.int32)
        return {"arrays": self.arrays["train"], "idx": self._global(idx[self.rows], self.batch_size)}

    train_args = args_at  # step by step, or any step: the same

    def sample_args(self, split: str, idx: np.ndarray) -> dict[str, Any]:
        """A batch of `split` at the examples `idx` (the train split or the eval split), as args_at gives one."""
        return {"arrays": self.arrays[split], "idx": self._global(np.asarray(idx, np.int32)[self.rows], len(idx))}

    def batch(self, args: dict[str, Any]) -> dict[str, jax.Array]:
        """Inside the jitted step: the batch {"x", "y"} of `args`."""
        return self.data.gather(args["arrays"], args["idx"])

    def eval_args(self) -> Iterator[dict[str, Any]]:
        for idx, weight, rows in self._eval_batches():
            n = len(idx)
            yield {"arrays": self.arrays[self.data.eval_split], "idx": self._global(idx[rows], n),
                   "weight": self._global(weight[rows], n)}


class StreamInput(_Input):
    def __init__(self, data: Any, plan: MeshPlan, batch_size: int, eval_batch_size: int, seed: int, start: int,
                 workers: int):
        from zoo.data.stream import stream

        super().__init__(data, plan, batch_size, eval_batch_size, seed)
        self.shardings = {"x": plan.batch, "y": plan.batch}
        self.eval_shardings = {**self.shardings, "weight": plan.batch}
        self._stream = stream(data, "train", batch_size=batch_size, seed=seed, start_step=start, rows=self.rows,
                              workers=workers)

    def _place(self, host: dict[str, np.ndarray], rows: int) -> dict[str, jax.Array]:
        return {k: self._global(host[k], rows) for k in ("x", "y")}

    def _read(self, split: str, idx: np.ndarray, what: str) -> dict[str, np.ndarray]:
        """A batch read directly, not through the stream; its failure one line naming `what` and the split, as the
        stream's are (a corrupt image named only its file)."""
        from zoo.data.stream import read_failed

        try:
            return self.data.read(split, idx)
        except Exception as err:  # whatever a reader raises, as one line
            raise read_failed(err, what, split) from None

    def args_at(self, step: int) -> dict[str, Any]:
        """Any step's batch, read directly (for the compile and the check before a save)."""
        idx = self.data.indices("train", step, self.batch_size, self.seed)[self.rows]
        return self._place(self._read("train", idx, f"step {step}"), self.batch_size)

    def sample_args(self, split: str, idx: np.ndarray) -> dict[str, Any]:
        """A batch of `split` at the examples `idx`, read directly."""
        return self._place(self._read(split, np.asarray(idx)[self.rows], "a sampled batch"), len(idx))

    def train_args(self, step: int) -> dict[str, Any]:
        """The next batch of the stream, which must be step `step`'s."""
        at, host = next(self._stream)
        if at != step:
            raise RuntimeError(f"the data stream is at step {at}, the loop at {step}")
        return self._place(host, self.batch_size)

    def batch(self, args: dict[str, Any]) -> dict[str, jax.Array]:
        return {"x": args["x"], "y": args["y"]}

    def eval_args(self) -> Iterator[dict[str, Any]]:
        for i, (idx, weight, rows) in enumerate(self._eval_batches()):
            n = len(idx)
            yield {**self._place(self._read(self.data.eval_split, idx[rows], f"eval batch {i}"), n),
                   "weight": self._global(weight[rows], n)}

    def close(self) -> None:
        self._stream.close()
