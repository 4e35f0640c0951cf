"""Will the train step fit? Two checks, so a run that cannot fit says so in one line instead of an XLA
out-of-memory error:

- before compiling: the activations the forward pass must keep for the backward pass are at least the bytes of
  the model's intermediates and logits (shapes from `jax.eval_shape`, nothing allocated or compiled), per
  device: divided by the ways the batch is split and by --grad-accum;
- after compiling: XLA's own account, `compiled.memory_analysis()` (arguments + outputs + temporaries - aliased).

Both are compared with the device's memory (the allocator's limit on GPU, the host's RAM shared by its
devices on CPU).
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np

from zoo.data.streamed import host_available

GB = 1e9
ADVICE = "lower --batch-size or --seq-len, or use --grad-accum K, --remat block, or more devices in --mesh"


def device_memory() -> int | None:
    """Bytes one local device can hold, or None when unknown."""
    device = jax.local_devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // jax.local_device_count()
    except (ValueError, OSError):
        return None


def free_memory() -> int | None:
    """Bytes one local device can still take now: on CPU the host's available memory (MemAvailable, which a
    machine shared with other jobs needs) shared by its devices; elsewhere `device_memory()`."""
    available = host_available() if jax.default_backend() == "cpu" else None
    return available // jax.local_device_count() if available is not None else device_memory()


def activation_bytes(program: Any, abstract_state: Any, batch: dict[str, jax.ShapeDtypeStruct],
                     flash_attention: bool) -> int:
    """Bytes of the forward pass's intermediates and logits on `batch` (a lower bound of what backprop keeps);
    with `flash_attention` (a GPU in half precision), attention logits are left out where every attention layer
    trains with a flash kernel, which never materialises them (`Attention.trains_flash`)."""
    from flax import nnx

    from zoo.models.transformer import Attention
    from zoo.train.step import prepare_inputs

    layers: list[Attention] = []

    def forward(state, x):
        model = program.model(state)
        layers.extend(m for _, m in nnx.iter_graph(model) if isinstance(m, Attention))
        return model(prepare_inputs(x, program.dtype))

    logits, inter = jax.eval_shape(forward, abstract_state, batch["x"])

    def flash(path: Any, v: jax.ShapeDtypeStruct) -> bool:
        return (flash_attention and "attn_logits" in jax.tree_util.keystr(path)
                and all(a.trains_flash(program.dtype, v.shape[-1]) for a in layers))

    kept = [v for p, v in jax.tree_util.tree_flatten_with_path(inter)[0] if not flash(p, v)]
    return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in [logits, *kept])


def forward_bytes(program: Any, batch: dict[str, jax.ShapeDtypeStruct]) -> int:
    """`activation_bytes` at the program's init (no flash kernel), traced abstractly: nothing is allocated and no
    backend starts, so a run can choose how its backend starts from it (zoo.train.backend.start)."""
    state = jax.eval_shape(lambda: program.init(jax.random.PRNGKey(0)))
    return activation_bytes(program, state, batch, flash_attention=False)


def per_device(needed: int, ways: int, accum: int, remat_depth: int = 1) -> float:
    """The activations one device keeps at a time: `needed` split over the batch's ways, the --grad-accum
    microbatches, and (--remat block) the blocks."""
    return needed / max(ways, 1) / max(accum, 1) / max(remat_depth, 1)


def check_activations(per_device: float) -> None:
    """Refuse before compiling when the per-device activations alone exceed the device."""
    limit = device_memory()
    if limit and per_device > limit:
        raise ValueError(f"the train step needs at least {per_device / GB:,.1f} GB of activations per device, more "
                         f"than the {limit / GB:,.1f} GB it has: {ADVICE}")


def compiled_bytes(compiled: Any) -> int | None:
    """XLA's per-device memory of a compiled program, or None where the backend gives no analysis."""
    try:
        m = compiled.memory_analysis()
    except Exception:  # not every backend implements it
        return None
    if m is None:
        return None
    return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)


def check_compiled(compiled: Any, what: str = "train step", advice: str = ADVICE, limit: int | None = None
                   ) -> int | None:
    """Refuse a compiled program that cannot fit in `limit` bytes (default: the device's); returns its bytes for the
    run's log."""
    needed, limit = compiled_bytes(compiled), limit or device_memory()
    if needed and limit and needed > limit:
        raise ValueError(f"the compiled {what} needs {needed / GB:,.1f} GB per device (XLA's estimate), more "
                         f"than the {limit / GB:,.1f} GB it has: {advice}")
    return needed
