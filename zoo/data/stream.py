"""Host batches of a data set, step after step, through grain: the batch of step t is read (and its images
decoded) by `workers` processes, and is a function of (seed, t) only, so a resumed run continues with the same
data and the data position is just the step.

    stream(data, "train", batch_size=B, seed=s, start_step=t0) -> (t0, batch), (t0 + 1, batch), ...

Each batch is `data.read(split, data.indices(split, t, B, seed)[rows])`: on many hosts each process passes its
`rows` of the global batch and reads only those.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import numpy as np

from zoo.data.view import Batch, DataView
from zoo.errors import ZooError, reraise_stop
from zoo.parent_watch import watch_parent

# Steps a stream can run: an end far beyond any run (grain's datasets have a length).
HORIZON = 1 << 62
_WATCHING: list[int] = []  # in a worker process: the parent its watch thread watches (one thread a process)
TRACKER_QUIET = "ignore:resource_tracker:UserWarning"  # its "leaked shared_memory objects" (see _tracker_quiet)


class DataError(ZooError, RuntimeError):
    """Reading a batch failed (a corrupt file, a worker process that died): one line naming the step (a ZooError:
    the boundary said 'unexpected DataError' and wrote a traceback file for a corrupt image)."""


def read_failed(err: Exception, what: str, split: str) -> DataError:
    """The one line for a failed read of `what` (step 7, eval batch 2) of `split` (a stop it wraps raised instead)."""
    reraise_stop(err)
    why = (str(err).strip() or type(err).__name__).splitlines()[0]
    return DataError(f"reading {what} of split {split!r} failed: {why}")


class _ReadStep:
    """step -> (step, batch); pickled into each worker process, which it ends when the process that started the
    stream is gone (grain's workers outlived a SIGKILLed run)."""

    def __init__(self, data: DataView, split: str, batch_size: int, seed: int, rows: slice):
        self.data, self.split, self.batch_size, self.seed, self.rows = data, split, batch_size, seed, rows
        self.parent = os.getpid()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if os.getpid() != self.parent and not _WATCHING:
            _WATCHING.append(self.parent)
            watch_parent(self.parent)

    def __call__(self, step: int) -> tuple[int, Batch]:
        idx = self.data.indices(self.split, step, self.batch_size, self.seed)[self.rows]
        return step, self.data.read(self.split, idx)


def stream(data: DataView, split: str, *, batch_size: int, seed: int, start_step: int = 0,
           rows: slice = slice(None), workers: int = 0, buffer: int = 4) -> Iterator[tuple[int, Batch]]:
    """(step, host batch) for step = start_step, start_step + 1, ... (endless; stop when done).

    workers: processes that read and decode (0: threads of this process); buffer: batches each process reads
    ahead, in as many threads, so at most (workers + 1) * buffer batches are in memory at once.
    A failure (a corrupt image, a worker that died) raises DataError with one line naming the step."""
    import grain  # imports JAX and orbax: only when a set streams

    if workers < 0 or buffer < 1:
        raise ValueError(f"need workers >= 0 and buffer >= 1, got {workers} and {buffer}")
    data.indices(split, start_step, batch_size, seed)  # a bad split or batch size fails here, in one line
    ds = grain.MapDataset.range(start_step, HORIZON).map(_ReadStep(data, split, batch_size, seed, rows))
    it = ds.to_iter_dataset(grain.ReadOptions(num_threads=buffer, prefetch_buffer_size=buffer))
    if workers:
        _absl_flags_parsed()
        _tracker_quiet()
        it = it.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=buffer))
    return _checked(iter(it), start_step, split)


def _absl_flags_parsed() -> None:
    """grain 0.2.18's worker processes read an absl flag, which fails unless flags were parsed (as absl.app
    does); zoo parses none, so their defaults stand."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()


def _tracker_quiet() -> None:
    """The resource tracker that grain's worker processes share frees the shared memory of the batches a failed
    stream left unread (grain 0.2.18 unlinks none of them on close), and warned of each at exit, after zoo's one line;
    it inherits this process's warning options when the first worker starts it."""
    if TRACKER_QUIET not in sys.warnoptions:
        sys.warnoptions.append(TRACKER_QUIET)


def _checked(it: Iterator[tuple[int, Batch]], step: int, split: str) -> Iterator[tuple[int, Batch]]:
    """`it` with its failures turned into one-line DataErrors; its worker processes end with the generator."""
    try:
        while True:
            try:
                at, batch = next(it)
            except Exception as err:  # whatever a reader or grain raises, as one line
                raise read_failed(err, f"step {step}", split) from None
            # worker batches arrive in grain's shared memory: copied out, so it is freed now
            yield at, {k: v if type(v) is np.ndarray else np.array(v) for k, v in batch.items()}
            step += 1
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
