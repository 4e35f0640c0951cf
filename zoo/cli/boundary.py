"""The one error boundary every zoo command runs in: an expected failure is one line on stderr and exit status 1
(2 for a bad command line), a stop by signal exits 128 + its number (Ctrl-C: 130, also during a compile), and an
unexpected failure is one line saying where its full traceback was written (the run dir, else a temp file);
never a traceback on the terminal. Library loggers' noise (absl, orbax) stays off the terminal."""

from __future__ import annotations

import functools
import logging
import os
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo.errors import DiskFull, Stopped, ZooError, failure_dir, is_disk_full, one_line, out_of_memory

EXPECTED = (ZooError, ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)
QUIET = ("absl", "orbax", "jax._src.distributed", "tensorstore", "grain", "asyncio", "concurrent.futures")


def boundary(main: Callable[..., Any] | None = None, *, joins: bool = False, per_core: bool = False) -> Any:
    """Wraps a command's `main(argv=None)` (see the module docstring). The JAX backend is started first, so a
    JAX_PLATFORMS this machine cannot serve is one line; `joins`: the command may join a multi-host run, which must
    come before any backend starts, and checks the backend itself after joining (zoo.train.backend.check);
    `per_core`: the command splits its work over devices, one per CPU core (zoo.train.backend.cpu_cores_as_devices)."""
    if main is None:
        return functools.partial(boundary, joins=joins, per_core=per_core)

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> Any:
        for name in QUIET:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        threading.excepthook = _thread_failed
        sys.excepthook = lambda kind, value, tb: _write_trace(value)  # raised in threads C++ code runs
        sys.unraisablehook = _unraisable
        try:
            if not joins:
                from zoo.train import backend

                if per_core:
                    backend.cpu_cores_as_devices()
                backend.check()
            return main(*args, **kwargs)
        except SystemExit:
            raise
        except Stopped as e:
            _exit(128 + e.signum)
        except KeyboardInterrupt:
            print("interrupted (Ctrl-C) before training started; nothing was saved", file=sys.stderr)
            _exit(130)
        except BaseException as e:
            if is_disk_full(e):
                e = DiskFull.writing(getattr(e, "filename", None) or failure_dir() or ".")
            if isinstance(e, EXPECTED):
                print(f"error: {one_line(e)}", file=sys.stderr)
            elif (size := out_of_memory(e)) is not None:
                print(f"error: out of memory: this machine could not allocate {size}; use smaller sizes (widths, "
                      "depths, batch) or fewer members", file=sys.stderr)
            else:
                print(f"error: unexpected {type(e).__name__}: {one_line(e)} (full traceback in {_write_trace(e)})",
                      file=sys.stderr)
            raise SystemExit(1) from None

    return run


def _thread_failed(args: threading.ExceptHookArgs) -> None:
    """A library's background thread that fails (orbax's async machinery after a corrupt checkpoint, say) leaves its
    traceback in the failure file, not on the terminal; what the command itself does is unaffected. The same for
    errors raised in threads that C++ code runs (TensorStore's callbacks) and for unraisable ones."""
    if args.exc_value is not None:
        _write_trace(args.exc_value)


def _unraisable(args: Any) -> None:
    """An unraisable error goes to the failure file, except one raised while a coroutine was being closed (its
    __cause__ a GeneratorExit): orbax's sibling reads, abandoned once one read of a corrupt checkpoint failed, which
    is reported already; garbage collection finds them at no fixed time, so writing them would make a run that
    refuses to start leave a file behind, or not, by chance."""
    if args.exc_value is not None and not isinstance(args.exc_value.__cause__, GeneratorExit):
        _write_trace(args.exc_value)


def _exit(status: int) -> None:
    """Leave at once after a signal: everything worth keeping is saved, and interpreter teardown with JAX's and
    orbax's threads still running can crash (a segfault at exit after Ctrl-C during a compile)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _write_trace(e: BaseException) -> Path:
    where = failure_dir()
    name = f"error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    for folder in ([where] if where is not None else []) + [Path(tempfile.gettempdir())]:
        try:
            path = folder / name
            with path.open("a") as f:
                f.write("".join(traceback.format_exception(e)))
            return path
        except OSError:
            continue
    return Path("(nowhere: no folder could be written)")
