"""What zoo fails with. A `ZooError` is an expected failure whose message is the one line a user sees; the
command-line boundary (zoo.cli.boundary) turns every failure into one line and an exit status.

Statuses follow the shell's convention: 1 for errors, 2 for bad command lines, 130 after SIGINT and 143 after
SIGTERM (128 + signal), both after a checkpoint was saved when there was a state worth saving.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import re
import resource
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
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
    def writing(cls, path: str | Path, needed: int | None = None, too_large: bool = False) -> DiskFull:
        """The one line: which file, how much it needed (when known) and how much is free; `too_large`: the file
        size limit (ulimit -f, EFBIG) stopped it, with space to spare."""
        where = Path(path)
        if too_large:
            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            size = "" if limit == resource.RLIM_INFINITY else f" ({limit // 1024:,} KB)"
            return cls(f"the file size limit{size} (ulimit -f) stopped writing {where}; older files are intact: raise "
                       "it and rerun the same command (a run resumes where it stopped)")
        probe = next((p for p in (where, *where.parents) if p.exists()), Path("."))
        free = shutil.disk_usage(probe).free
        need = f" (it needs about {_mb(needed)}, {_mb(free)} are free)" if needed else f" ({_mb(free)} free)"
        return cls(f"no space left on the device writing {where}{need}; older files are intact: free some space "
                   "and rerun the same command (a run resumes where it stopped)")


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
        reraise_stop(e)  # an async write interrupted by a stop
        chain = [e, e.__cause__, e.__context__]
        too_large = any(too_large_file(c) for c in chain if c is not None) or "File too large" in str(e)
        if too_large or any(c is not None and is_disk_full(c) for c in chain) or "No space left on device" in str(e):
            raise DiskFull.writing(path, needed, too_large) from None
        raise


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def is_disk_full(e: BaseException) -> bool:
    """A write refused for space: the disk's (ENOSPC), a quota's (EDQUOT) or the file size limit's (EFBIG)."""
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def too_large_file(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno == errno.EFBIG


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


class Stopped(KeyboardInterrupt):
    """A signal asked the run to stop (after a checkpoint, when there was a state worth saving); `line`: what the
    boundary says as it exits (None: it was said already). A KeyboardInterrupt, as Ctrl-C's is: no reader's `except
    Exception` takes it for a file that cannot be read (a checkpoint's reader moved the good newest one to corrupt/),
    and the libraries that run zoo's code let it through where they keep any other error (asyncio's callbacks, which
    orbax's reads run in, log a BaseException and go on)."""

    def __init__(self, signum: int, line: str | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.line = signum, line


_received: list[KeyboardInterrupt] = []  # the stops the handlers below raised, not yet delivered; newest last


def stop_received() -> KeyboardInterrupt | None:
    """The newest stop the handlers below raised that has not left their block yet, or None. A stop is raised where
    the signal lands, and code that swallows it there (a library's `except BaseException`, a C++ callback that drops
    the error) loses it: the command ran on (a Ctrl-C during the compile trained on). It is still known here, for
    the readers (`reraise_stop`), the training loop (zoo.train.guard.StopSignals) and the boundary to stop with."""
    return _received[-1] if _received else None


def reraise_stop(e: BaseException) -> None:
    """Raise the stop `e` is or wraps, or one received while it was raised (`stop_received`); nothing otherwise. A
    reader's failure then says nothing about its file: orbax turns whatever interrupts an array's read, a stop
    included, into an Exception ('Encountered error while reading array index') raised from it, which a checkpoint
    reader took for a corrupt checkpoint (moved to corrupt/, an older step used)."""
    seen: BaseException | None = e
    for _ in range(64):  # the chain of causes and contexts
        if seen is None:
            break
        if isinstance(seen, KeyboardInterrupt):
            raise seen
        seen = seen.__cause__ or seen.__context__
    if (stop := stop_received()) is not None:
        raise stop


def forget_stops() -> None:
    """A new command starts with no stop received."""
    _received.clear()


def ctrl_c_noted() -> contextlib.AbstractContextManager[None]:
    """In the block, Ctrl-C raises KeyboardInterrupt as Python's default handler does, and is noted
    (`stop_received`); where SIGINT is ignored (a command started in the background) or handled otherwise it stays
    so. Main thread only, as `sigterm_stops`."""
    return _stopping(signal.SIGINT, KeyboardInterrupt, over=signal.default_int_handler)


NOTHING_LEFT = "stopped by SIGTERM; nothing half-written was left"


def sigterm_stops(line: str = NOTHING_LEFT) -> contextlib.AbstractContextManager[None]:
    """In the block, SIGTERM raises Stopped (as Ctrl-C raises KeyboardInterrupt), so a command's clean-up runs (a
    prepare's or an export's half-written files removed, a run dir made for a run that had not started) and the
    boundary says `line` and exits 143; Python's default ends the process at once, leaving them. In the main thread
    only, where Python runs every signal handler (elsewhere the block runs as it is)."""
    return _stopping(signal.SIGTERM, lambda: Stopped(signal.SIGTERM, line))


@contextlib.contextmanager
def stops_held() -> Iterator[list[KeyboardInterrupt]]:
    """In the block SIGTERM and Ctrl-C are noted, not raised, so a write that must end whole ends (a stop raised
    while orbax's threads wrote an export left them writing into the folder its clean-up removed); the list holds
    the stops received, for the caller to undo the write and raise the first. Ctrl-C only where Python's handler
    has it; main thread only (elsewhere the block runs as it is)."""
    held: list[KeyboardInterrupt] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, frame: Any) -> None:
        held.append(Stopped(signum, NOTHING_LEFT) if signum == signal.SIGTERM else KeyboardInterrupt())

    signums = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is signal.default_int_handler
                                  else [])
    previous = {signum: signal.signal(signum, hold) for signum in signums}
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def _stopping(signum: int, stop: Callable[[], KeyboardInterrupt], over: Any = None) -> Iterator[None]:
    """In the block, signal `signum` raises `stop()`, noted (`stop_received`) until it leaves the block (then it was
    not swallowed: its raiser's caller handles it). Only in the main thread, and only over the handler `over` where
    one is given."""
    def handle(signum: int, frame: Any) -> None:
        _received.append(stop())
        raise _received[-1]

    if threading.current_thread() is not threading.main_thread() or (
            over is not None and signal.getsignal(signum) is not over):
        yield
        return
    previous = signal.signal(signum, handle)
    try:
        yield
    except KeyboardInterrupt:  # Stopped too
        forget_stops()
        raise
    finally:
        signal.signal(signum, previous)


LONG_WORD, LONG_LINE = 160, 1200  # characters: a word (a path) and a line of zoo's longer are shortened in the middle
QUIET = ("absl", "orbax", "jax._src.distributed", "tensorstore", "grain", "asyncio", "concurrent.futures", "matplotlib",
         "py.warnings")  # Python warnings (matplotlib's layout notes, ...), through logging.captureWarnings


def quiet_libraries() -> None:
    """Library loggers' noise and Python warnings off the terminal: a command's own process, and the worker processes
    it starts (a sweep's)."""
    logging.captureWarnings(True)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.CRITICAL)


LIBRARY_LINE = 400  # characters of a library's line kept (its start says what failed; its end is often a repr)


def one_line(e: BaseException, whole: bool = False) -> str:
    """An exception's message as one line (`readable`), or its type's name. `whole`: the message is zoo's own line
    (a ZooError, or a ValueError or OSError of a check), whose every line is kept: a path with a newline in it split
    it, and its first line alone lost the reason. Else only its first line (XLA's and orbax's run over many)."""
    if isinstance(e, KeyError):
        return f"missing key {readable(str(e))}"
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return readable(f"{e.strerror}: {e.filename}")  # not "[Errno 17] File exists: '...'"
    text = str(e).strip()
    if not whole:
        text = next((line.strip() for line in text.splitlines() if line.strip()), "")
        for noise in (" [tensorstore_spec", " [source locations", " See full TensorStore details"):  # TensorStore
            text = text.split(noise)[0]  # appends its full spec, or a pybind11 repr of a method that prints it
        return readable(text)[:LIBRARY_LINE] or type(e).__name__
    return readable(text) or type(e).__name__


def readable(text: str) -> str:
    """`text` as one line for a terminal: control characters escaped (a newline in a path is \\n), each word
    longer than LONG_WORD shortened in its middle (a path of 390 characters pushed the reason past the line's cut),
    and a line longer than LONG_LINE cut in its middle, never at its end, which says why and what to do."""
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    half = LONG_WORD // 2
    text = re.sub(rf"\S{{{LONG_WORD + 1},}}", lambda m: f"{m[0][:half]}...{m[0][-half:]}", text)
    if len(text) > LONG_LINE:
        text = f"{text[:LONG_LINE // 2]} ... {text[-LONG_LINE // 2:]}"
    return text


_log_dir: list[Path] = []


def log_failures_in(path: str | Path | None) -> None:
    """Where the boundary writes the traceback of an unexpected failure (the run dir, a sweep's --out)."""
    _log_dir[:] = [Path(path)] if path is not None else []


def failure_dir() -> Path | None:
    return _log_dir[0] if _log_dir else None
