"""What zoo fails with. A `ZooError` is an expected failure whose message is the one line a user sees; the
command-line boundary (zoo.cli.boundary) turns every failure into one line and an exit status.

Statuses follow the shell's convention: 1 for errors, 2 for bad command lines, 130 after SIGINT and 143 after
SIGTERM (128 + signal), both after a checkpoint was saved when there was a state worth saving.
"""

from __future__ import annotations

import contextlib
import errno
import re
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class ZooError(Exception):
    """An expected failure, said in one line."""


class TrainingDiverged(ZooError):
    """The loss or the gradient norm became non-finite, or the loss ran far above its start."""


class CheckpointError(ZooError):
    """No checkpoint of a run can be read (or one that must be read cannot)."""


class CheckpointFormat(ZooError):
    """A checkpoint written by a zoo that stored its parameters in another layout: it reads, but means other weights."""


class RunLocked(ZooError):
    """Another live process holds the run dir (or sweep dir)."""


class DiskFull(ZooError):
    """A file could not be written for lack of space; what was written before is intact."""

    @classmethod
    def writing(cls, path: str | Path, needed: int | None = None) -> DiskFull:
        """The one line: which file, how much it needed (when known) and how much is free."""
        where = Path(path)
        probe = next((p for p in (where, *where.parents) if p.exists()), Path("."))
        free = shutil.disk_usage(probe).free
        need = f" (it needs about {_mb(needed)}, {_mb(free)} are free)" if needed else f" ({_mb(free)} free)"
        return cls(f"no space left on the device writing {where}{need}; older files are intact: free some space "
                   "and rerun the same command to resume")


@contextlib.contextmanager
def naming_full_disk(path: str | Path, needed: int | None = None) -> Iterator[None]:
    """A full disk while the block writes `path` is one DiskFull line naming `path` and its disk's free space: a
    write error names no file (the boundary's line said 'writing .' with the working folder's free space), and
    orbax's writer thread raises ENOSPC wrapped (in the cause or context, or only in the text)."""
    try:
        yield
    except DiskFull:
        raise
    except Exception as e:
        chain = [e, e.__cause__, e.__context__]
        if any(c is not None and is_disk_full(c) for c in chain) or "No space left on device" in str(e):
            raise DiskFull.writing(path, needed) from None
        raise


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def is_disk_full(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)


def out_of_memory(e: BaseException) -> str | None:
    """The allocation XLA or the host refused, where `e` is an out-of-memory error (a size no memory check foresaw: a
    diagnostic at a huge width, a million seeds); None otherwise."""
    text = str(e)
    if isinstance(e, MemoryError):  # numpy's says "Unable to allocate 7.45 GiB for an array with shape ..."
        found = re.search(r"allocate (\S+ \w?i?B)", text)
        return found.group(1) if found else "memory"
    if type(e).__name__ != "JaxRuntimeError" or ("RESOURCE_EXHAUSTED" not in text and "Out of memory" not in text):
        return None
    found = re.search(r"allocating (\d+) bytes", text)
    return f"{int(found.group(1)) / 1e9:,.1f} GB" if found else "memory"


class Stopped(Exception):
    """A signal asked the run to stop (after a checkpoint, when there was a state worth saving); `line`: what the
    boundary says as it exits (None: it was said already)."""

    def __init__(self, signum: int, line: str | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.line = signum, line


@contextlib.contextmanager
def sigterm_stops(line: str = "stopped by SIGTERM; nothing half-written was left") -> Iterator[None]:
    """In the block, SIGTERM raises Stopped (as Ctrl-C raises KeyboardInterrupt), so a command's clean-up runs (a
    prepare's or an export's half-written files removed, a run dir made for a run that had not started) and the
    boundary says `line` and exits 143; Python's default ends the process at once, leaving them. Main thread only,
    as every signal handler."""
    def stop(signum: int, frame: Any) -> None:
        raise Stopped(signum, line)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def one_line(e: BaseException) -> str:
    """The first line of an exception's message (XLA's and orbax's run over many), or its type's name."""
    if isinstance(e, KeyError):
        return f"missing key {e}"
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.strerror}: {e.filename}"  # not "[Errno 17] File exists: '...'"
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    line = lines[0]
    for noise in (" [tensorstore_spec", " [source locations", " See full TensorStore details"):  # TensorStore
        line = line.split(noise)[0]  # appends its full spec, or a pybind11 repr of a method that prints it
    return line[:400]


_log_dir: list[Path] = []


def log_failures_in(path: str | Path | None) -> None:
    """Where the boundary writes the traceback of an unexpected failure (the run dir, a sweep's --out)."""
    _log_dir[:] = [Path(path)] if path is not None else []


def failure_dir() -> Path | None:
    return _log_dir[0] if _log_dir else None
