"""The one error boundary every zoo command runs in: an expected failure is one line on stderr and exit status 1
(2 for a bad command line), a stop by signal exits 128 + its number (Ctrl-C: 130, also during a compile), and an
unexpected failure is one line saying where its full traceback was written (the run dir, else a temp file);
never a traceback on the terminal; a reader of its output that went away (`| head`) ends it quietly, status 141.
Library loggers' noise (absl, orbax) and Python warnings stay off the terminal."""

from __future__ import annotations

import errno
import functools
import os
import select
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rich.console

from zoo.errors import (
    DiskFull,
    Stopped,
    ZooError,
    ctrl_c_noted,
    failure_dir,
    forget_stops,
    is_disk_full,
    one_line,
    out_of_memory,
    quiet_libraries,
    reraise_stop,
    sigterm_stops,
    stop_received,
    too_large_file,
)
from zoo.files import abandon_writes, open_regular

EXPECTED = (ZooError, ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
            PermissionError)


def boundary(main: Callable[..., Any] | None = None, *, joins: bool = False, per_core: bool = False,
             computes: bool = True, interrupted: str = "interrupted (Ctrl-C)", failed: int = 1) -> Any:
    """Wraps a command's `main(argv=None)` (see the module docstring). The JAX backend is started first, so a
    JAX_PLATFORMS this machine cannot serve is one line, except for --help and where the command computes nothing with
    JAX (`computes` False: zoo.fit, zoo.data.prepare), which a CPU login node under a cluster's
    JAX_PLATFORMS=cuda could not run; `joins`: the command may join a multi-host run, which must
    come before any backend starts, and checks the backend itself after joining (zoo.train.backend.check);
    `per_core`: the command splits its work over devices, one per CPU core (zoo.train.backend.cpu_cores_as_devices);
    `interrupted`: the line a Ctrl-C the command did not handle itself prints; `failed`: the status of an error line
    (2 for a command whose 1 is its verdict, FAIL, as argparse's for a bad flag)."""
    if main is None:
        return functools.partial(boundary, joins=joins, per_core=per_core, computes=computes, interrupted=interrupted,
                                 failed=failed)

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> Any:
        quiet_libraries()
        rich.console.Console.on_broken_pipe = _pipe_broke
        threading.excepthook = lambda hook_args: _background_failed(hook_args.exc_value)
        sys.excepthook = lambda kind, value, tb: _background_failed(value)  # raised in threads C++ code runs
        sys.unraisablehook = lambda hook_args: _background_failed(hook_args.exc_value)
        try:
            if sys.stdout is None:  # started with stdout closed (>&-): a command that prints nothing runs on
                sys.stdout = _ClosedStdout()
            if not joins and computes and not _asks_for_help(args, kwargs):
                from zoo.train import backend

                if per_core:
                    backend.cpu_cores_as_devices()
                backend.check()
            forget_stops()
            with sigterm_stops("stopped by SIGTERM"), ctrl_c_noted():  # a stop, never an error (Stopped)
                result = main(*args, **kwargs)
            if (lost := stop_received()) is not None:  # a stop some library swallowed where it landed
                raise lost
            return result
        except SystemExit:  # the command's own status, unless a stop landed where a library swallowed it
            if isinstance(lost := stop_received(), Stopped):
                _stopped(lost)
            elif lost is not None:
                _interrupted(interrupted)
            raise
        except Stopped as e:
            _stopped(e)
        except KeyboardInterrupt:
            _interrupted(interrupted)
        except BaseException as e:
            if isinstance(e, BrokenPipeError) and _output_gone():
                _exit(128 + signal.SIGPIPE)
            try:
                reraise_stop(e)  # a stop a library wrapped in its own error
            except Stopped as stop:
                _stopped(stop)
            except KeyboardInterrupt:
                _interrupted(interrupted)
            if (why := _unprintable(e)) is not None:
                e = ValueError(why)
            if is_disk_full(e):  # a write that names no file, outside any run dir: stdout's
                where = getattr(e, "filename", None) or failure_dir()
                e = DiskFull.writing(where, too_large=too_large_file(e)) if where is not None else ValueError(
                    f"{os.strerror(e.errno or errno.ENOSPC)} writing the output (stdout, sent to a file or device that "
                    "is full)")
            if isinstance(e, EXPECTED) or (isinstance(e, OSError) and e.filename is not None):  # a path's error
                print(f"error: {one_line(e, whole=True)}", file=sys.stderr)
            elif (size := out_of_memory(e)) is not None:
                print(f"error: out of memory: this machine could not allocate {size}; use smaller sizes (widths, "
                      "depths, batch) or fewer members", file=sys.stderr)
            else:
                print(f"error: unexpected {type(e).__name__}: {one_line(e)} (full traceback in {_write_trace(e)})",
                      file=sys.stderr)
            if _computing():
                _exit(failed)
            raise SystemExit(failed) from None

    return run


class _ClosedStdout:
    """sys.stdout when the command started with it closed (Python makes it None, and a print failed as an
    'unexpected AttributeError'): the first write is one line."""

    def write(self, text: str) -> int:
        raise ValueError("stdout is closed (>&-), so nothing could be printed; send it to a file, a pipe or /dev/null")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _asks_for_help(args: tuple, kwargs: dict[str, Any]) -> bool:
    """Whether the command line (`main`'s argv, else sys.argv) asks for -h or --help before any `--`."""
    argv = kwargs.get("argv", args[0] if args else None)
    words = list(sys.argv[1:] if argv is None else argv)
    words = words[:words.index("--")] if "--" in words else words
    return "-h" in words or "--help" in words


def _stopped(e: Stopped) -> None:
    if e.line is not None:
        print(e.line, file=sys.stderr)
    _exit(128 + e.signum)


def _interrupted(line: str) -> None:
    print(line, file=sys.stderr)
    _exit(130)


def _background_failed(e: BaseException | None) -> None:
    """A library's background failure (a thread, a callback C++ code runs, an unraisable error) leaves its traceback
    in the failure file, not on the terminal; what the command itself does is unaffected. Except a stop (`_stop_again`)
    and the echoes of reads orbax abandoned once one read of a corrupt checkpoint failed, which is reported already: a
    coroutine failing as it is closed (its __cause__ a GeneratorExit) and TensorStore's callbacks finding asyncio's
    loop closed. Those come at no fixed time (garbage collection, thread timing), so writing them would leave a file
    behind, or not, by chance."""
    if _stop_again(e) or (isinstance(e, BrokenPipeError) and _output_gone(redirect=False)):  # a progress bar's
        return  # refresh: the command's next line ends it
    abandoned = isinstance(e, RuntimeError) and str(e) == "Event loop is closed"
    if e is not None and not abandoned and not isinstance(e.__cause__, GeneratorExit):
        _write_trace(e)


def interruptible(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs) in a worker thread while the main thread waits in short joins, where Python runs signal
    handlers: an XLA computation holds the thread that waits on it until it ends (a coordinate check of 20000 steps
    or an APJN over 50000 inputs heard SIGTERM minutes late, a million steps never), so a stop is raised here at once,
    and the boundary leaves with os._exit (the computation ends with the process; files are written atomically)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the main thread, which raises it as the command's own
            outcome["error"] = e

    worker = threading.Thread(target=run, daemon=True, name="zoo-compute")
    worker.start()
    while worker.is_alive():
        worker.join(0.05)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _stop_again(e: BaseException | None) -> bool:
    """Whether `e` is a stop by signal (Ctrl-C's KeyboardInterrupt, SIGTERM's Stopped) that landed where Python
    cannot raise it: in a finalizer or a GC callback (JAX's `_xla_gc_callback` runs often during a compile and a
    restore), or in Python code a C++ library called back. It would be lost and the command run on, so its signal is
    sent again from another thread, shortly, to land in the command's own code (sent from here, it would land in this
    hook)."""
    signum = e.signum if isinstance(e, Stopped) else signal.SIGINT if isinstance(e, KeyboardInterrupt) else None
    if signum is None:
        return False
    threading.Timer(0.01, os.kill, (os.getpid(), signum)).start()
    return True


def _computing() -> bool:
    """Whether a thread of zoo's still compiles or computes (a sweep's next shape compiling ahead, `interruptible`'s
    worker): the interpreter's teardown would stop it inside XLA, which crashed a failed sweep after its error line
    (a segfault, or 'FATAL: exception not rethrown') in 2 of 5 runs."""
    return any(t.is_alive() and t.name.startswith(("zoo-compile", "zoo-compute")) for t in threading.enumerate())


def _unprintable(e: BaseException) -> str | None:
    """The line for text the terminal's encoding cannot print (PYTHONIOENCODING=ascii, a C locale): the codec's own
    ('ascii' codec can't encode characters in position 0-3) said neither what nor how to fix it."""
    streams = {getattr(s, "encoding", None) or "": name for name, s in (("stderr", sys.stderr), ("stdout", sys.stdout))}
    if not isinstance(e, UnicodeEncodeError) or e.encoding not in streams:
        return None
    return (f"{streams[e.encoding]}'s encoding, {e.encoding}, cannot print {e.object[e.start:e.end]!r}: run with "
            "PYTHONIOENCODING=utf-8, or in a UTF-8 locale")


def _pipe_broke(console: rich.console.Console) -> None:
    """rich's Console.on_broken_pipe (its documented hook): its own sends stdout to /dev/null and exits 1, which
    hid a closed pipe from the boundary (`train.py ... 2>&1 | head` ended 1, not 141)."""
    raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def _output_gone(redirect: bool = True) -> bool:
    """Whether the reader of stdout or stderr has gone (`| head`: poll finds an error on the pipe's end); those are
    then (`redirect`) written to /dev/null, so that nothing written after fails again. The command ends quietly, as
    a closed pipe ends `yes` (status 141, SIGPIPE's): its files are written atomically, and a run resumes from its
    checkpoint."""
    gone = False
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor (a test's capture)
            continue
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        if any(events & select.POLLERR for _, events in poll.poll(0)):
            if redirect:
                os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
            gone = True
    return gone


def _exit(status: int) -> None:
    """Leave at once after a signal, or a failure while zoo's threads compute: everything worth keeping is saved, and
    interpreter teardown with JAX's and orbax's threads still running can crash (a segfault at exit after Ctrl-C during
    a compile)."""
    abandon_writes()  # a worker thread's file half-written: the old one stays, the temporary goes
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _write_trace(e: BaseException) -> Path:
    where = failure_dir()
    name = f"error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    for folder in ([where] if where is not None else []) + [Path(tempfile.gettempdir())]:
        try:
            path = folder / name
            with open_regular(path, "a") as f:
                f.write("".join(traceback.format_exception(e)))
            return path
        except OSError:
            continue
    return Path("(nowhere: no folder could be written)")
