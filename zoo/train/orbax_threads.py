"""Orbax's background threads after a failed save: released, so that none outlives the command.

An async save runs its steps in orbax's `_SignalingThread`s (non-daemon), each waiting for the signals of the steps
before it (the step's temporary folder made, ...) for up to its timeout. When a step fails (a checkpoints folder that
became unwritable: `chattr +i`, a read-only mount) its signal never comes, and the threads after it waited out their
timeout (300 s) after the command's last line, holding the process. Each is cancelled and given the signals it
waits for, so it returns at once without running its step.
"""

from __future__ import annotations

import threading


def release_waiting() -> None:
    """Every orbax signaling thread still alive cancelled and its awaited signals set (module docstring); nothing
    where this orbax has no such threads."""
    try:
        from orbax.checkpoint._src.futures import future
    except ImportError:
        return
    kind = getattr(future, "_SignalingThread", None)
    if kind is None:
        return
    for thread in threading.enumerate():
        if isinstance(thread, kind) and thread.is_alive():
            thread.cancel()
            future.set_signals(getattr(thread, "_receive_signals", None) or [],
                               operation_id=getattr(thread, "_operation_id", None))
