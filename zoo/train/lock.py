"""One run per run dir: an exclusive lock on RUN_DIR/.lock that holds the owner's pid and host.

The lock is an `fcntl.flock` on the file, which the kernel drops when the owning process dies (even by
SIGKILL); a lock file left by a process that is gone is therefore taken over, with a line saying whose it was.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

from zoo.errors import RunLocked


class RunLock:
    def __init__(self, run_dir: Path, report: Callable[[str], None] = print):
        self.path = run_dir / ".lock"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = self._owner()
            os.close(self.fd)
            raise RunLocked(f"{run_dir} is in use by another run (pid {owner.get('pid', '?')} on host "
                            f"{owner.get('host', '?')}); wait for it to finish or pass another --run-dir") from None
        owner = self._owner()
        if owner:
            report(f"took over the lock of {run_dir} from pid {owner.get('pid')} on host {owner.get('host')}, "
                   "which is gone")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode(), 0)

    def _owner(self) -> dict:
        try:
            return json.loads(os.pread(self.fd, 4096, 0) or b"{}")
        except (json.JSONDecodeError, OSError):
            return {}

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)  # a clean exit leaves no owner behind
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
