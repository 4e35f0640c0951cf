"""Orbax checkpoints of the whole train state that verify themselves.

- Save: async, atomic (orbax writes a temporary directory and renames it when complete), keep-N; old
  checkpoints are first renamed into checkpoints/trash/ (atomic) and only then deleted, so a kill during a
  deletion leaves nothing that looks like a checkpoint.
- Every saved array's checksum goes into the checkpoint's metadata; a restore recomputes and compares them.
  The checksum of an array x with bit patterns u_i (as uint32) is the pair, mod 2^32,

      s1 = sum_i u_i (2i + 1),      s2 = sum_i (u_i xor (i * 0x9E3779B9)) * 0x85EBCA6B,

  integer sums, so they do not depend on how the array is sharded or reduced; any single flipped bit changes s1.
- Restore walks back from the newest checkpoint to the newest one that reads and verifies; the ones that do not
  are reported in one line each and moved to RUN_DIR/corrupt/ (never deleted).
- Only the run's owner writes: a reader (`read_only=True`: sampling, export, a fork's or a finetune's source, the
  audit) never creates, cleans up, moves or deletes anything, so it cannot hurt a run that is still training.
- The metadata carries its format (zoo.train.ckpt_format): what this zoo does not know in it is refused, naming the
  field and the format, before any array is read.
- The metadata names the layout of the Dense kernels (`KERNELS`); a checkpoint from before they were stored (out, in)
  is one line (CheckpointFormat) before any array is read: a square kernel would otherwise load transposed.
- Its folder's name is the step orbax reads it as; the metadata records the step it was saved at, and a checkpoint
  whose two differ (a folder copied under another step) is refused as one that does not read.
- A save that finds too little disk space, or fails for lack of it, is one line (DiskFull); the checkpoints
  already written stay intact and the run resumes from them when space returns.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from zoo.errors import (
    CheckpointError,
    CheckpointFormat,
    DiskFull,
    ZooError,
    naming_full_disk,
    one_line,
    reraise_stop,
)
from zoo.train import ckpt_format
from zoo.train.ckpt_format import FORMAT
from zoo.train.orbax_threads import release_waiting
from zoo.train.step import jit_run_once
from zoo.tree import key_path

TRASH = "trash"
PROBE = ".zoo-write-probe-"  # the writability probe's folder in checkpoints/, by process
HEADROOM = 1.1  # a save needs this times the state's bytes free (orbax writes a temporary copy first)
Check = Callable[[dict[str, Any]], None]  # a test of a checkpoint's metadata, raising where it does not fit
KERNELS = "out_in"  # zoo.models.layers.Dense's kernels are (out, in); checkpoints before 2026-11-26 hold (in, out)


def _bits(x: jax.Array) -> jax.Array:
    """The bit patterns of x as a flat uint32 vector (8-byte types give two words per entry)."""
    if x.dtype == jnp.bool_:
        x = x.astype(jnp.uint8)
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    size = jnp.dtype(x.dtype).itemsize
    if size == 8:
        return jax.lax.bitcast_convert_type(x, jnp.uint32).ravel()
    return jax.lax.bitcast_convert_type(x, {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32}[size]).astype(
        jnp.uint32).ravel()


def _host_bits(x: Any) -> np.ndarray:
    """_bits in numpy, for an array in host memory (the same words in the same order: little-endian views)."""
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    a = np.ascontiguousarray(x).reshape(-1)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint32}[a.dtype.itemsize]).astype(np.uint32)


def _sums(u: Any, xp: Any) -> Any:
    """(s1, s2) of the words u (module docstring), in xp = numpy or jax.numpy: uint32 arithmetic, exact mod 2^32 in
    both, so the two give the same pair."""
    i = xp.arange(u.size, dtype=xp.uint32)
    s1 = xp.sum(u * (2 * i + 1), dtype=xp.uint32)
    s2 = xp.sum((u ^ (i * xp.uint32(0x9E3779B9))) * xp.uint32(0x85EBCA6B), dtype=xp.uint32)
    return xp.stack([s1, s2])


@jit_run_once  # a pass over the state per save: compiled fast, not tuned
def _checksums(leaves: list[jax.Array]) -> jax.Array:
    """(len(leaves), 2) uint32: (s1, s2) per array (module docstring)."""
    out = [_sums(_bits(x), jnp) for x in leaves]
    return jnp.stack(out) if out else jnp.zeros((0, 2), jnp.uint32)


def _in_host_memory(x: jax.Array) -> bool:
    return x.is_fully_addressable and all(d.platform == "cpu" for d in x.sharding.device_set)


def checksums(tree: Any) -> dict[str, list[int]]:
    """{array path: [s1, s2]} of every array in `tree`. Arrays in host memory (the CPU backend, one process) are
    summed in numpy: no program to trace and compile at each run's first save (about a second). The others are
    summed where they live, on any mesh and over processes, by one compiled program."""
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    values = [jnp.asarray(v) for _, v in flat]  # numpy and Python leaves in JAX's dtypes (float64 -> float32 ...)
    if all(_in_host_memory(v) for v in values):
        host = [_sums(_host_bits(v), np) for v in values]
    else:
        host = np.asarray(_checksums(values).addressable_shards[0].data)
    return {key_path(p): [int(a), int(b)] for (p, _), (a, b) in zip(flat, host, strict=True)}


class Checkpoints:
    """The checkpoints of one run directory: the state (params, optimizer, step, RNG) and a JSON of metadata.
    `read_only`: a reader that never writes (module docstring)."""

    def __init__(self, run_dir: str | Path, keep: int = 3, read_only: bool = False):
        self.run_dir = Path(run_dir).absolute()
        self.dir = self.run_dir / "checkpoints"
        self.read_only = read_only
        self._writing: int | None = None  # the step of the async save started last, until it is waited for
        if read_only:
            options = ocp.CheckpointManagerOptions(read_only=True, save_interval_steps=0, create=False,
                                                   enable_async_checkpointing=False)
        else:
            self._empty_trash()
            options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=True, create=True,
                                                   todelete_subdir=TRASH, cleanup_tmp_directories=True)
        handlers = {"state": ocp.StandardCheckpointHandler(), "meta": ocp.JsonCheckpointHandler()}
        with naming_full_disk(self.dir):
            self.manager = ocp.CheckpointManager(self.dir, options=options, item_handlers=handlers)
        if not read_only:
            self._probe()

    def _probe(self) -> None:
        """Before the first step: a folder can be made and removed in checkpoints/, as each save makes one. A folder
        that cannot be written (`chattr +i`, a read-only mount) was found at the first save, 250 steps later."""
        for stale in self.dir.glob(PROBE + "*"):  # a probe of a run killed (or stopped) between its two steps
            with contextlib.suppress(OSError):
                stale.rmdir()
        probe = self.dir / f"{PROBE}{os.getpid()}"
        try:
            with naming_full_disk(self.dir):
                probe.mkdir()
        except OSError as e:
            self.manager.close()
            raise ZooError(f"{self.dir} cannot be written ({e.strerror or e}), so no checkpoint could be saved: make "
                           "it writable (its permissions, chattr -i, a read-write mount) or use another --run-dir"
                           ) from None
        finally:  # removed however the probe ends, a stop signal included
            with contextlib.suppress(OSError):
                probe.rmdir()

    def __enter__(self) -> Checkpoints:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def steps(self) -> list[int]:
        """Steps with a complete checkpoint, newest first."""
        return sorted(self.manager.all_steps(), reverse=True)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        """Start an async save of `state` at `step` (DiskFull when the disk cannot hold it)."""
        needed = int(HEADROOM * sum(np.dtype(x.dtype).itemsize * int(np.prod(x.shape)) for x in jax.tree.leaves(state)))
        self.wait()  # the previous save's own failure names its own step (orbax raised it here, as this step's)
        if shutil.disk_usage(self.dir).free < needed:
            raise DiskFull.writing(self.dir / str(step), needed)
        meta = {**meta, "format": FORMAT, "kernels": KERNELS, "checksums": checksums(state)}
        args = ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        with _released_on_failure(), naming_full_disk(self.dir / str(step), needed):
            self.manager.save(step, args=args, force=True)
        self._writing = step

    def restore(self, step: int, abstract_state: Any | None = None, check: Check | None = None
                ) -> tuple[Any, dict[str, Any]]:
        """The state at `step`, placed as `abstract_state`'s shardings say (default: as saved, on this process's
        first device), verified against its checksums; CheckpointError (one line) when it cannot be. `check`: the
        caller's test of the metadata (its data's tokenizer), which raises before any array is read."""
        where = self.dir / str(step)
        meta = self.meta(step)  # read first: a layout mismatch is refused before any array is
        _same_step(where, step, meta)
        if check is not None:
            check(meta)
        saved = meta.get("checksums")
        if saved is None:
            raise CheckpointError(f"checkpoint {where} has no checksums in its metadata (meta/metadata)")
        kernels = meta.get("kernels")
        if kernels != KERNELS:
            by = "zoo before 2026-11-26" if kernels is None else "another zoo"
            raise CheckpointFormat(f"checkpoint {where} holds Dense kernels {kernels or 'in_out'} ({by}), this zoo "
                                   f"{KERNELS}: train it again, or read it with that zoo")
        if abstract_state is None:
            abstract_state = self._abstract(step)
        try:
            out = self.manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state)))
        except Exception as e:  # orbax and TensorStore raise many types for unreadable or mismatched files
            reraise_stop(e)
            raise CheckpointError(f"checkpoint {where} cannot be read ({one_line(e)})") from None
        for name, sums in checksums(out.state).items():
            if saved.get(name) != sums:
                raise CheckpointError(f"checkpoint {where}: array {name} fails its checksum (saved {saved.get(name)},"
                                      f" read {sums}): its data file is corrupt")
        return out.state, meta

    def restore_latest(self, abstract_state: Any | None = None, report: Callable[[str], None] = print,
                       check: Check | None = None) -> tuple[Any, dict[str, Any], int] | None:
        """The newest checkpoint that reads and verifies, as (state, meta, step); None when there is none at all.

        Each one that fails is reported in one line and (unless read-only) moved to RUN_DIR/corrupt/<step>; when
        every one fails, CheckpointError and nothing is moved. One that is gone once its read failed was removed by
        the live run that owns it (`newest_first`): not a failure, the newest one now is read instead."""
        failed = []
        for step in self.newest_first():
            try:
                state, meta = self.restore(step, abstract_state, check)
            except CheckpointError as e:
                reraise_stop(e)  # a failure while a stop came says nothing about the checkpoint
                if self.gone(step):
                    continue
                report(f"{e}; trying an older checkpoint")
                failed.append(step)
                continue
            if failed:
                self._move_aside(failed, report)
            return state, meta, step
        if failed:
            advice = ("every one is damaged, so a resume cannot continue the run either: restore its checkpoints "
                      "from a copy, or train it again" if self.read_only else
                      "nothing was deleted: move them away or use another run dir")
            raise CheckpointError(f"no checkpoint in {self.dir} can be read (tried {', '.join(map(str, failed))}); "
                                  f"{advice}")
        return None

    def restore_at(self, step: int | None, abstract_state: Any | None = None, report: Callable[[str], None] = print,
                   check: Check | None = None) -> tuple[Any, dict[str, Any], int]:
        """(state, meta, step) at `step`, or at the newest good checkpoint when `step` is None; one line when the
        run has no checkpoint (at that step)."""
        if step is None:
            found = self.restore_latest(abstract_state, report, check)
            if found is None:
                raise FileNotFoundError(f"{self.run_dir}: the run has no checkpoint yet")
            return found
        if step not in self.steps():
            raise FileNotFoundError(f"{self.run_dir} has no checkpoint at step {step} (it has "
                                    f"{', '.join(map(str, self.steps())) or 'none'})")
        try:
            return (*self.restore(step, abstract_state, check), step)
        except CheckpointError:
            if not self.gone(step):
                raise
            raise FileNotFoundError(f"{self.run_dir}: its checkpoint at step {step} was removed as it was read (the "
                                    "run is training and keeps its newest --keep checkpoints); give a newer step, or "
                                    "none for the newest") from None

    def newest_first(self) -> Iterator[int]:
        """The steps, newest first, each listed anew (for a reader, read from disk again) before it is given: a live
        run (--keep N) removes its oldest checkpoint as it saves a new one, so a list taken before the reads named
        checkpoints gone by then (a reader of a --keep 1 run called them unreadable, and advised moving the run's
        checkpoints away) and missed the new ones."""
        tried: set[int] = set()
        while True:
            if self.read_only:
                self.manager.reload()
            step = next((s for s in self.steps() if s not in tried), None)
            if step is None:
                return
            tried.add(step)
            yield step

    def gone(self, step: int) -> bool:
        """Whether checkpoint `step`'s folder is no longer there (a live run rotated it away)."""
        return not (self.dir / str(step)).is_dir()

    def meta(self, step: int) -> dict[str, Any]:
        """The metadata saved with checkpoint `step` (its config, plugin spec, ...), without reading its arrays."""
        try:
            meta = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta
        except Exception as e:  # orbax raises many types for unreadable files
            reraise_stop(e)
            raise CheckpointError(f"checkpoint {self.dir / str(step)} cannot be read ({one_line(e)})") from None
        meta = meta if isinstance(meta, dict) else {}
        ckpt_format.check(meta, self.metadata_file(step))
        return meta

    def metadata_file(self, step: int) -> Path:
        """The file that holds checkpoint `step`'s metadata (orbax's JsonCheckpointHandler's), for lines that blame
        it."""
        return self.dir / str(step) / "meta" / "metadata"

    def _abstract(self, step: int) -> Any:
        """The saved tree as ShapeDtypeStructs on this process's first device (for restores without a model)."""
        try:
            tree = self.manager.item_metadata(step)["state"].tree
        except Exception as e:
            reraise_stop(e)
            raise CheckpointError(f"checkpoint {self.dir / str(step)} cannot be read ({one_line(e)})") from None
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        return jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), tree)

    def _move_aside(self, steps: list[int], report: Callable[[str], None]) -> None:
        if jax.process_index() == 0 and not self.read_only:
            corrupt = self.run_dir / "corrupt"
            corrupt.mkdir(exist_ok=True)
            for step in steps:
                target = corrupt / str(step)
                if target.exists():
                    target = corrupt / f"{step}.{len(list(corrupt.iterdir()))}"
                shutil.move(str(self.dir / str(step)), target)
                report(f"moved the unreadable checkpoint {step} to {target}")
        self.manager.reload()

    def _empty_trash(self) -> None:
        if jax.process_index() == 0 and not self.read_only:
            shutil.rmtree(self.dir / TRASH, ignore_errors=True)

    def wait(self) -> None:
        """Until the async save started last is written; a failure names its step's folder."""
        where = self.dir if self._writing is None else self.dir / str(self._writing)
        with _released_on_failure(), naming_full_disk(where):
            self.manager.wait_until_finished()
        self._writing = None
        self._empty_trash()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.manager.close()


@contextlib.contextmanager
def _released_on_failure() -> Iterator[None]:
    """A save or a wait that fails leaves no orbax thread waiting (zoo.train.orbax_threads)."""
    try:
        yield
    except BaseException:
        release_waiting()
        raise


def _same_step(where: Path, step: int, meta: dict[str, Any]) -> None:
    """A checkpoint's folder names its step, and orbax records no other (its _CHECKPOINT_METADATA holds times and
    handlers): a folder copied or renamed under another step (checkpoints/200 as checkpoints/300) resumed at 300 with
    step 200's state, data position and optimizer count. zoo's metadata records the step the state was saved at;
    a folder whose name differs is refused (CheckpointError: a resume goes on from an older checkpoint)."""
    recorded = meta.get("step")
    if recorded is not None and recorded != step:
        raise CheckpointError(f"checkpoint {where} holds the state of step {recorded} (its metadata says so), not of "
                              f"step {step}: a checkpoint copied or renamed; name its folder {recorded}, or remove it")
