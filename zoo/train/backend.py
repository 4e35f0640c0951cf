"""The JAX backend a command runs on: started once up front, so a JAX_PLATFORMS this machine cannot serve is one
line naming the platforms asked for and those available (JAX itself ends in a bare AssertionError for a
`cuda` without a GPU, or a RuntimeError deep inside the first computation).

Multi-host: call it after `zoo.train.distributed.initialize`, which must come before any backend starts.
"""

from __future__ import annotations

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
