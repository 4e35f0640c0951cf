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

from zoo.errors import RunLocked, naming_full_disk
from zoo.files import check_no_dangling_link, regular_fd
from zoo.schema import not_utf8, utf8

LOCK = ".lock"  # the lock file's name in the directory it locks


class RunLock:
    """Held from construction until `release()` (or the end of a `with` block).

    what: this owner's kind ("run", "sweep", "transfer"), written in the lock and named to a process refused;
    flag: the option that names another directory."""

    def __init__(self, run_dir: Path, report: Callable[[str], None] = print, *, what: str = "run",
                 flag: str = "--run-dir"):
        self.path = run_dir / LOCK
        self.fd = self._take(run_dir, what, flag)
        owner = _owner(self.fd)
        if owner:
            report(f"took over the lock of {run_dir} from pid {owner.get('pid')} on host {owner.get('host')}, "
                   "which is gone")
        with naming_full_disk(self.path):
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "what": what}).encode(), 0)

    def _take(self, run_dir: Path, what: str, flag: str) -> int:
        """The lock file opened and locked. An owner may remove the file as it releases the lock (a prepare leaves
        no lock in its token directory): a lock then taken on the removed file would exclude no one, so it is taken
        again on the file now at the path."""
        while True:
            fd = regular_fd(self.path, os.O_RDWR | os.O_CREAT)  # never a link's target, truncated below
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _owner(fd)
                os.close(fd)
                holder = f"{owner.get('what', what)} (pid {owner.get('pid', '?')} on host {owner.get('host', '?')})"
                raise RunLocked(f"{run_dir} is in use by another {holder}; wait for it to finish or pass another "
                                f"{flag}") from None
            try:
                if os.path.samestat(os.fstat(fd), os.lstat(self.path)):
                    return fd
            except FileNotFoundError:
                pass
            os.close(fd)

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


def _owner(fd: int) -> dict:
    """The owner a lock file names ({} when it names none)."""
    try:
        owner = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return {}
    return owner if isinstance(owner, dict) else {}


def claim(directory: Path, report: Callable[[str], None] = print, *, what: str = "run", flag: str = "--run-dir"
          ) -> RunLock:
    """Create `directory` if needed and take its lock; one line when it is a file, cannot be created or written,
    or another live process holds it."""
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{flag} {directory} is a file, not a directory")
    check_no_dangling_link(directory, f"{flag} {directory}")
    if not utf8(where := os.path.abspath(directory)):  # a relative one below a folder named in another encoding:
        raise ValueError(f"{flag} {directory}: its full path {not_utf8(where)}")  # orbax failed at the first save
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create {flag} {directory}: {e.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {directory} is not writable")
    return RunLock(directory, report, what=what, flag=flag)
