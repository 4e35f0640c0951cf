"""Worker processes that end with the process that started them: killed without a chance to stop them (SIGKILL, the
OOM killer), a parent leaves its workers to init, where they would hold their memory, and the pipes of the dead
command's output (a `train.py | tee log` never ends), for good."""

from __future__ import annotations

import os
import threading
import time

POLL_S = 0.5  # how often a worker looks whether its parent is gone


def exit_with_parent(parent: int) -> None:
    """End this process when the process that started it (pid `parent`) is gone (the worker is then handed to another
    parent, perhaps before it got here)."""
    while os.getppid() == parent:
        time.sleep(POLL_S)
    os._exit(1)


def watch_parent(parent: int) -> None:
    """In a worker: a daemon thread that ends it within POLL_S of its parent's (pid `parent`) death."""
    threading.Thread(target=exit_with_parent, args=(parent,), daemon=True, name="zoo-parent-watch").start()
