"""A sweep compiles its next shape in a thread while the current one trains (zoo.sweeps.ahead); a Ctrl-C still
stops it at once. (That the sweep says so and trains every shape: tests/sweeps/test_lr_transfer.py.)"""

from __future__ import annotations

import signal
import threading
import time

import pytest
from cli_utils import ROOT  # noqa: F401 -- restores Python's SIGINT handler where the runner ignores SIGINT

from zoo.sweeps.ahead import Ahead


def test_a_signal_the_compile_thread_receives_interrupts_the_wait():
    """The kernel hands a process's signal to any of its threads; sent to the compiling one, the main thread's
    wait on it (a plain join) ran Python's handler only once the compile ended. Now the wait wakes every 0.1 s:
    the Ctrl-C is raised within a second, while the thread is still busy."""
    release, busy = threading.Event(), []
    ahead = Ahead(lambda: busy.append(threading.get_ident()) or release.wait(20))
    while not busy:
        time.sleep(0.01)
    threading.Timer(0.2, signal.pthread_kill, (busy[0], signal.SIGINT)).start()
    start = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            ahead.result()
        assert time.perf_counter() - start < 5
    finally:
        release.set()
