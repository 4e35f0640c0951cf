"""The JAX backend a command runs on: started once up front, so a JAX_PLATFORMS this machine cannot serve is one
line naming the platforms asked for and those available (JAX itself ends in a bare AssertionError for a
`cuda` without a GPU, or a RuntimeError deep inside the first computation).

Multi-host: call it after `zoo.train.distributed.initialize`, which must come before any backend starts.
"""

from __future__ import annotations

import ctypes
import os
import platform

import jax
import jax.extend.backend


def check() -> None:
    """Start JAX's backend; ValueError (one line) when the platforms JAX_PLATFORMS asks for cannot start."""
    try:
        jax.devices()
        return
    except (AssertionError, RuntimeError) as err:
        asked = jax.config.jax_platforms
        why = _reason(err)
    raise ValueError(f"JAX_PLATFORMS={asked} asks for a backend this machine cannot start{why}; available here: "
                     f"{', '.join(available()) or 'none'} (unset JAX_PLATFORMS or set it to one of them)")


# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8


def reuse_host_memory() -> None:
    """Keep the host memory a step frees for the next step (Linux with glibc; elsewhere nothing). XLA:CPU allocates
    a program's temporaries as one block per run (282 MB for ViT's default train step); glibc serves a block that
    large with fresh pages of its own (mmap, and always so from a thread's own arena) and unmaps it on free, so
    every step page-faults its whole working set in again: 76,000 faults, about a sixth of the step's time
    (bench/vs_torch.py, docs/results.md). One arena, no mmap and no trimming keep the block in the heap for the
    next run. Call before a backend starts its threads; the process then keeps its peak heap until it exits."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    libc = ctypes.CDLL(None)
    for option, value in ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, 2**31 - 1)):
        libc.mallopt(option, value)


def cpu_cores_as_devices() -> None:
    """One CPU device per core this process may use, for commands whose work splits over devices (the sweeps: a
    small member's step on XLA:CPU runs on one core, so members on both cores of a 2-core machine train twice as
    many per second). Only before any backend starts; a device count already asked for (XLA_FLAGS'
    --xla_force_host_platform_device_count, jax_num_cpu_devices) is kept."""
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "") or jax.config.jax_num_cpu_devices > 0:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        jax.config.update("jax_num_cpu_devices", cores)
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
