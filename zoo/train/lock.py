"""One owner per directory (a run dir, a sweep's or a transfer's --out): an exclusive lock on DIR/.lock that
holds the owner's pid, host and kind ("run", "sweep", "transfer").

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
    """Held from construction until `release()` (or the end of a `with` block).

    what: this owner's kind ("run", "sweep", "transfer"), written in the lock and named to a process refused;
    flag: the option that names another directory."""

    def __init__(self, run_dir: Path, report: Callable[[str], None] = print, *, what: str = "run",
                 flag: str = "--run-dir"):
        self.path = run_dir / ".lock"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = self._owner()
            os.close(self.fd)
            holder = f"{owner.get('what', what)} (pid {owner.get('pid', '?')} on host {owner.get('host', '?')})"
            raise RunLocked(f"{run_dir} is in use by another {holder}; wait for it to finish or pass another "
                            f"{flag}") from None
        owner = self._owner()
        if owner:
            report(f"took over the lock of {run_dir} from pid {owner.get('pid')} on host {owner.get('host')}, "
                   "which is gone")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "what": what}).encode(), 0)

    def _owner(self) -> dict:
        try:
            owner = json.loads(os.pread(self.fd, 4096, 0) or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            return {}
        return owner if isinstance(owner, dict) else {}

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)  # a clean exit leaves no owner behind
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def claim(directory: Path, report: Callable[[str], None] = print, *, what: str = "run", flag: str = "--run-dir"
          ) -> RunLock:
    """Create `directory` if needed and take its lock; one line when it is a file, cannot be created or written,
    or another live process holds it."""
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{flag} {directory} is a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create {flag} {directory}: {e.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {directory} is not writable")
    return RunLock(directory, report, what=what, flag=flag)
