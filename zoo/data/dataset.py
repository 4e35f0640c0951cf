"""The in-memory data set: host numpy splits put on the device whole, batches gathered inside the jitted step."""

from __future__ import annotations

import dataclasses
import hashlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from zoo.data.tokenizer import Tokenizer
from zoo.data.view import DataView, ImageArrays, Reader, TokenWindows


@dataclasses.dataclass
class Dataset(DataView):
    """Images: splits[s] = {"x": uint8 (N,H,W,C), "y": int32 (N,)}; text: splits[s] = {"tokens": int32 (N,)}.

    `num_classes` is the vocabulary size for text, whose `tokenizer` encodes and decodes.
    """

    kind: str
    splits: dict[str, dict[str, np.ndarray]]
    num_classes: int
    in_shape: tuple[int, ...]
    eval_split: str
    seq_len: int | None = None
    tokenizer: Tokenizer | None = None

    def reader(self, split: str) -> Reader:
        """The split as a host Reader (`read` is a host gather: the same batches as `gather` on the device)."""
        if split not in self.splits:
            raise ValueError(f"no split {split!r}; this data set has {', '.join(sorted(self.splits))}")
        arrays = self.splits[split]
        if self.kind == "text":
            return TokenWindows(arrays["tokens"], self.seq_len)
        return ImageArrays(arrays["x"], arrays["y"])

    def gather(self, arrays: dict[str, jax.Array], idx: jax.Array) -> dict[str, jax.Array]:
        """The batch {"x", "y"} at `idx` from `device_arrays`; pure jnp, so it runs inside the jitted step."""
        if self.kind == "text":
            pos = idx[:, None] + jnp.arange(self.seq_len)
            return {"x": arrays["tokens"][pos], "y": arrays["tokens"][pos + 1]}
        return {"x": arrays["x"][idx], "y": arrays["y"][idx]}

    def device_arrays(self, split: str, sharding: jax.sharding.Sharding | None = None) -> dict[str, jax.Array]:
        """The split put on device once, replicated over all devices unless `sharding` says otherwise."""
        if sharding is None:
            sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec())
        self.reader(split)  # the error for an unknown split
        return {k: jax.device_put(v, sharding) for k, v in self.splits[split].items()}

    def digest(self, split: str) -> str:
        """SHA-1 over the split's arrays in key order (about 0.1 s for CIFAR-10's train split), kept."""
        done = self.__dict__.setdefault("_digests", {})
        if split not in done:
            self.reader(split)  # the error for an unknown split
            sha = hashlib.sha1()
            for key, array in sorted(self.splits[split].items()):
                sha.update(f"{key}{array.dtype}{array.shape}".encode())
                sha.update(memoryview(np.ascontiguousarray(array)).cast("B"))
            done[split] = sha.hexdigest()
        return done[split]

    def nbytes(self) -> int:
        """Host (and device) bytes of all splits."""
        return sum(a.nbytes for arrays in self.splits.values() for a in arrays.values())
