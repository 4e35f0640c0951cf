"""The JAX backend a command runs on: started once up front, so a JAX_PLATFORMS this machine cannot serve is one
line naming the platforms asked for and those available (JAX itself ends in a bare AssertionError for a
`cuda` without a GPU, or a RuntimeError deep inside the first computation).

Multi-host: call it after `zoo.train.distributed.initialize`, which must come before any backend starts.
"""

from __future__ import annotations

import os

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
