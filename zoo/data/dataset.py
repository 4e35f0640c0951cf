"""The in-memory data set every consumer sees: host numpy splits, deterministic batch indices, on-device gather."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


@dataclasses.dataclass
class Dataset:
    """Images: splits[s] = {"x": uint8 (N,H,W,C), "y": int32 (N,)}; text: splits[s] = {"tokens": int32 (N,)}.

    `num_classes` is the vocabulary size for text. `vocab` maps token ids to characters (None for byte-level
    text, whose ids are raw bytes).
    """

    kind: str
    splits: dict[str, dict[str, np.ndarray]]
    num_classes: int
    in_shape: tuple[int, ...]
    eval_split: str
    seq_len: int | None = None
    vocab: list[str] | None = None
    _perm: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    def _split(self, split: str) -> dict[str, np.ndarray]:
        if split not in self.splits:
            raise ValueError(f"no split {split!r}; this data set has {', '.join(sorted(self.splits))}")
        return self.splits[split]

    def size(self, split: str) -> int:
        """Examples (images) or window starts (text: len(tokens) - seq_len)."""
        arrays = self._split(split)
        if self.kind == "text":
            return len(arrays["tokens"]) - self.seq_len
        return len(arrays["y"])

    def indices(self, split: str, step: int, batch_size: int, seed: int) -> np.ndarray:
        """The batch of `step`, int32 (B,): a function of (seed, step) only, so a resumed run sees the same data.

        Images walk a fresh permutation each epoch (seeded by seed and epoch, remainder dropped); text draws
        uniformly random window starts.
        """
        n = self.size(split)
        if not 1 <= batch_size <= n:
            raise ValueError(f"batch size {batch_size} must be between 1 and the {n} examples of split {split!r}")
        if self.kind == "text":
            return np.random.default_rng([seed, step]).integers(0, n, batch_size).astype(np.int32)
        per_epoch = n // batch_size
        epoch, pos = divmod(step, per_epoch)
        key = (split, seed, epoch)
        if key not in self._perm:
            self._perm.clear()
            self._perm[key] = np.random.default_rng([seed, epoch]).permutation(n).astype(np.int32)
        return self._perm[key][pos * batch_size:(pos + 1) * batch_size]

    def eval_indices(self, batch_size: int, max_eval_windows: int = 1024) -> list[np.ndarray]:
        """Batches over the eval split, each example once (the last batch may be smaller).

        Text uses non-overlapping windows (each eval token predicted once), thinned evenly to at most
        `max_eval_windows`.
        """
        n = self.size(self.eval_split)
        if self.kind == "text":
            starts = np.arange(0, n, self.seq_len)
            if len(starts) > max_eval_windows:
                starts = starts[np.linspace(0, len(starts) - 1, max_eval_windows).astype(np.int64)]
        else:
            starts = np.arange(n)
        starts = starts.astype(np.int32)
        return [starts[i:i + batch_size] for i in range(0, len(starts), batch_size)]

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
        return {k: jax.device_put(v, sharding) for k, v in self._split(split).items()}

    def encode(self, text: str) -> np.ndarray:
        """Text -> int32 token ids (characters must be in the vocabulary)."""
        if self.kind != "text":
            raise ValueError("encode needs a text data set")
        if self.vocab is None:
            return np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int32)
        table = {c: i for i, c in enumerate(self.vocab)}
        missing = sorted(set(text) - set(table))
        if missing:
            raise ValueError(f"characters not in the vocabulary: {''.join(missing)!r}")
        return np.array([table[c] for c in text], np.int32)

    def decode(self, ids: np.ndarray | list[int]) -> str:
        """Token ids -> text (byte-level ids are decoded as UTF-8, invalid bytes replaced)."""
        if self.kind != "text":
            raise ValueError("decode needs a text data set")
        ids = np.asarray(ids).astype(np.int64).ravel()
        if self.vocab is None:
            return bytes(ids.astype(np.uint8).tolist()).decode("utf-8", errors="replace")
        return "".join(self.vocab[i] for i in ids)
