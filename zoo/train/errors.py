"""What a run can fail with, and the one place that turns a failure into one line on stderr and an exit status.

Statuses follow the shell's convention: 1 for errors, 130 after SIGINT and 143 after SIGTERM (128 + signal),
both after a checkpoint was saved."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator


class TrainingDiverged(RuntimeError):
    """The loss or the gradient norm became non-finite, or the loss ran far above its start."""


class CheckpointError(RuntimeError):
    """No checkpoint of a run can be read (or one that must be read cannot)."""


class RunLocked(RuntimeError):
    """Another live process holds the run dir."""


class Stopped(Exception):
    """A signal asked the run to stop; a checkpoint was saved."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def exit_on_error() -> Iterator[None]:
    """Known failures become `error: <one line>` and exit 1; a stop by signal exits 128 + its number."""
    try:
        yield
    except Stopped as e:
        raise SystemExit(128 + e.signum) from None
    except (ValueError, TypeError, OSError, RuntimeError, KeyError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        raise SystemExit(1) from None


def one_line(e: BaseException) -> str:
    """The first line of an exception's message (XLA's and orbax's run over many), or its type's name."""
    if isinstance(e, KeyError):
        return f"missing key {e}"
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0][:400] if lines else type(e).__name__
