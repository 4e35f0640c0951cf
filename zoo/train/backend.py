"""The JAX backend a command runs on: started once up front, so a JAX_PLATFORMS this machine cannot serve is one
line naming the platforms asked for and those available (JAX itself ends in a bare AssertionError for a
`cuda` without a GPU, or a RuntimeError deep inside the first computation); and, for a training run, how a CPU
runs its steps (`start`).

Multi-host: call it after `zoo.train.distributed.initialize`, which must come before any backend starts.
"""

from __future__ import annotations

import os
import re

import jax
import jax.extend.backend

from zoo.train import distributed, heap

# A step whose forward pass keeps this many bytes of activations at a time (per microbatch, per remat block) runs
# inline on CPU (`start`): XLA's temporaries measure 2.3-7.1x that over zoo's models (docs/results/cpu-speed.md), so
# such a step's block passes glibc's 32 MiB mmap ceiling.
INLINE_FROM = 8 * 2**20


def check() -> None:
    """Start JAX's backend; ValueError (one line) when the platforms JAX_PLATFORMS asks for cannot start, or when the
    processes of a multi-host run have unequal numbers of devices."""
    try:
        jax.devices()
    except (AssertionError, RuntimeError) as err:
        asked = jax.config.jax_platforms
        why = _reason(err)
        if not asked:  # JAX's own choice failed: XLA_FLAGS is what the user set (a device count of 0, ...)
            flags = os.environ.get("XLA_FLAGS", "").strip()
            raise ValueError(f"JAX could not start a backend{why}" + (f"; XLA_FLAGS is {flags!r}" if flags else "")
                             ) from None
        raise ValueError(f"JAX_PLATFORMS={asked} asks for a backend this machine cannot start{why}; available "
                         f"here: {', '.join(available()) or 'none'} (unset JAX_PLATFORMS or set it to one of "
                         "them)") from None
    if jax.process_count() > 1:
        distributed.check_same_devices()


def start(step_activations: float) -> bool:
    """`check()`, for a run whose train step keeps `step_activations` bytes at a time. On a CPU, one device in one
    process, a step of at least INLINE_FROM runs on the calling thread (JAX's CPU async dispatch off) with glibc's
    heap kept (zoo.train.heap): its temporaries are then allocated from the main arena and reused, not mapped and
    page-faulted afresh by a worker thread every step (ViT's default step 350 -> 260 ms, the GPT's 1090 -> 920 ms
    on a 2-core Zen 4). Smaller steps keep async dispatch, which overlaps the loop's Python with the step. Only
    before any backend starts, and not where JAX_CPU_ENABLE_ASYNC_DISPATCH is set; returns whether steps run
    inline."""
    inline = (step_activations >= INLINE_FROM and "JAX_CPU_ENABLE_ASYNC_DISPATCH" not in os.environ
              and heap.is_glibc() and _one_cpu_device()
              and not jax.distributed.is_initialized() and not _started())
    if inline:
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    check()
    if inline and jax.default_backend() == "cpu":
        return heap.keep()
    return False


def _one_cpu_device() -> bool:
    """The CPU backend, once started, has one device (several run in parallel only when dispatched async)."""
    return jax.config.jax_num_cpu_devices <= 1 and (_forced_cpu_devices() or 1) <= 1


def _forced_cpu_devices() -> int | None:
    """The CPU device count XLA_FLAGS asks for (--xla_force_host_platform_device_count), if any."""
    forced = re.search(r"xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return int(forced.group(1)) if forced else None


def _started() -> bool:
    """Whether a backend has started (JAX has no public query that does not start one)."""
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def cpu_cores_as_devices() -> None:
    """One CPU device per core this process may use, for commands whose work splits over devices (the sweeps: a
    small member's step on XLA:CPU runs on one core, so members on both cores of a 2-core machine train twice as
    many per second). Only before any backend starts; a device count already asked for (XLA_FLAGS'
    --xla_force_host_platform_device_count, jax_num_cpu_devices) is kept."""
    if _forced_cpu_devices() is not None or jax.config.jax_num_cpu_devices > 0:
        return
    from zoo.data.streamed import usable_cores

    try:
        jax.config.update("jax_num_cpu_devices", usable_cores())
    except RuntimeError:  # a backend has started: its devices stay as they are
        pass


def available() -> list[str]:
    """The platforms JAX can start here when it chooses for itself (JAX_PLATFORMS unset); the setting is put
    back afterwards, and no backend is left started."""
    asked = jax.config.jax_platforms
    try:
        jax.config.update("jax_platforms", "")
        jax.extend.backend.clear_backends()
        return sorted(jax.extend.backend.backends())
    except (AssertionError, RuntimeError):
        return []
    finally:
        jax.config.update("jax_platforms", asked)
        jax.extend.backend.clear_backends()


def _reason(err: BaseException) -> str:
    """JAX's reason without its advice: ' (Failed to open libtpu.so ...)'; JAX skips `cuda` when no NVIDIA GPU is
    visible and then asserts without a message."""
    if isinstance(err, AssertionError) and not str(err).strip():
        return " (no NVIDIA GPU is visible)"
    text = str(err).splitlines()[0] if str(err).strip() else ""
    text = text.split(" (set JAX_PLATFORMS", 1)[0].split(" (you may need", 1)[0]
    if "': " in text:
        text = text.split("': ", 1)[1]
    return f" ({text.strip()[:200]})" if text.strip() else ""
