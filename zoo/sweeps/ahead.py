"""A sweep's next shape compiled while the current one trains.

On a GPU a small shape's compile costs many times its training; `Ahead` builds the next shape's trainer and compiles
its programs (MemberTrainer.prepare: ahead of time, from shapes alone, nothing allocated for its states) in a
background thread, so the shapes' compiles overlap each other and the training. The thread is a daemon: a Ctrl-C or a
SIGTERM ends the command at once (the boundary's one line and exit: 130 or 143), and a compile still running dies
with the process; a failure in the thread is raised where the shape's turn comes (`result`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Ahead:
    """`make()` run in a background thread from construction; `result()` waits for it and returns it (or raises what
    it raised)."""

    def __init__(self, make: Callable[[], Any]):
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(make,), daemon=True, name="zoo-compile-ahead")
        self._thread.start()

    def _run(self, make: Callable[[], Any]) -> None:
        try:
            self._value = make()
        except BaseException as e:  # noqa: BLE001 -- raised again by result(), in the thread that asks
            self._error = e

    def result(self) -> Any:
        wait(self._thread)
        if self._error is not None:
            raise self._error
        return self._value


def wait(thread: threading.Thread) -> None:
    """Until `thread` ends, waking every 0.1 s: a signal the kernel hands to another thread does not interrupt the
    main thread's wait, so Python would run its handler (a Ctrl-C) only once the thread ended."""
    while thread.is_alive():
        thread.join(0.1)
