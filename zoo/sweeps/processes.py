"""A sweep's members split over worker processes, each pinned to its own share of the CPU cores with one device.

One program over a CPU's cores (`MemberTrainer`, one device per core) leaves the devices sharing one process's
XLA:CPU thread pool, which costs a sweep of small members 5-15% against the same groups trained in processes that
share nothing (docs/results/). A `MemberPool` starts `processes` workers (spawned: JAX's threads do not survive a
fork), deals each a contiguous block of the members, as the one program's `members` mesh deals them to its devices,
so each trains the same groups, and gathers the per-step losses and evals in member order. Workers keep their
trainers (compiled programs, data on the device) for the pool's life: a second call with the same recipe runs
warm.

    with MemberPool(2) as pool:
        result = pool.run(functools.partial(make_trainer, cfg), lrs, seeds, steps)
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import pickle
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

from zoo.errors import ZooError, quiet_libraries
from zoo.parent_watch import watch_parent
from zoo.train import compile_cache

Options = dict[str, np.ndarray]  # a program family's member options: name -> one value per member

# The JAX settings a worker takes from the process that starts it (spawned processes start from the defaults).
INHERITED = ("jax_enable_compilation_cache", "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes", "jax_enable_x64", "jax_default_matmul_precision")
POLL_S = 0.5  # how often a waiting parent looks whether a worker died


@dataclasses.dataclass
class Result:
    """losses [steps, members]; evals {metric: [members]} (empty when not asked); the seconds spent compiling, running
    the init and running the train steps and eval, the slowest worker's of each (the workers run side by side)."""

    losses: np.ndarray
    evals: dict[str, np.ndarray]
    compile_s: float
    init_s: float
    run_s: float


def usable_core_ids() -> list[int]:
    """The cores this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def check_processes(processes: int) -> None:
    """Worker processes split a CPU's cores: at most one per core, and only on the CPU backend."""
    cores = len(usable_core_ids())
    if processes > cores:
        raise ValueError(f"--processes {processes} asks for more worker processes than the {cores} CPU cores this "
                         f"process may use; give at most {cores}")
    if processes > 1 and jax.default_backend() != "cpu":
        raise ValueError(f"--processes splits a CPU's cores over worker processes; on {jax.default_backend()} one "
                         "program trains every member (leave --processes out)")


@contextlib.contextmanager
def workers(processes: int) -> Iterator[MemberPool | None]:
    """A started pool of `processes` workers, or None for one (the members train in this process)."""
    if processes <= 1:
        yield None
        return
    with MemberPool(processes) as pool:
        yield pool


class MemberPool:
    """`processes` worker processes, worker i pinned to the i-th contiguous share of the usable cores (Linux)."""

    def __init__(self, processes: int):
        check_processes(processes)
        self.processes = processes
        self._workers: list[tuple[Any, Any]] = []

    def __enter__(self) -> MemberPool:
        ctx = multiprocessing.get_context("spawn")
        settings = {name: getattr(jax.config, name) for name in INHERITED}
        for cores in np.array_split(np.asarray(usable_core_ids()), self.processes):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=serve, args=(there, [int(c) for c in cores], settings, os.getpid()),
                               daemon=True)
            proc.start()
            there.close()
            self._workers.append((proc, here))
        return self

    def __exit__(self, *exc: object) -> None:
        for _, conn in self._workers:
            try:
                conn.send(None)  # stop
            except OSError:
                pass
        for proc, conn in self._workers:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join()
            conn.close()
        self._workers = []

    def run(self, make_trainer: Callable[[], Any], lrs: np.ndarray, seeds: np.ndarray, steps: int, *,
            options: Options | None = None, evaluate: bool = True, eval_limit: int | None = None) -> Result:
        """Each worker's block of the members (`lrs[i]`, `seeds[i]`, and `options[k][i]` for a program family) from
        fresh states through `steps` train steps of the vmapped `MemberTrainer` that `make_trainer()` (picklable: a
        module-level function or a partial of one) builds in the worker, and an eval when asked (of `eval_limit`
        examples: `MemberTrainer.evaluate`)."""
        recipe = pickle.dumps(make_trainer)
        blocks = [b for b in np.array_split(np.arange(len(lrs)), len(self._workers)) if len(b)]
        for (_, conn), block in zip(self._workers, blocks, strict=False):
            part = None if options is None else {k: np.asarray(v)[block] for k, v in options.items()}
            conn.send((recipe, np.asarray(lrs)[block], np.asarray(seeds)[block], part, steps, evaluate, eval_limit))
        parts = [Result(**self._receive(proc, conn)) for (proc, conn), _ in zip(self._workers, blocks, strict=False)]
        evals = {k: np.concatenate([p.evals[k] for p in parts]) for k in parts[0].evals}
        return Result(np.concatenate([p.losses for p in parts], axis=1), evals,
                      *(max(getattr(p, f) for p in parts) for f in ("compile_s", "init_s", "run_s")))

    @staticmethod
    def _receive(proc: Any, conn: Any) -> dict[str, Any]:
        """A worker's answer; its failure raised here: an expected one as its own line, a crash with the worker's
        traceback, a worker killed (out of memory, a signal) as one line with its exit code."""
        while not conn.poll(POLL_S):
            if not proc.is_alive():
                raise ZooError(f"a sweep worker process died (exit code {proc.exitcode}): out of memory, or killed; "
                               "run with fewer --processes or members")
        try:
            kind, payload, damaged = conn.recv()
        except EOFError:
            proc.join()
            raise ZooError(f"a sweep worker process died (exit code {proc.exitcode}): out of memory, or killed; "
                           "run with fewer --processes or members") from None
        for name in damaged:  # the workers' damaged cache entries, said once by this command
            compile_cache.damaged(name)
        if kind == "expected":
            raise ValueError(payload)
        if kind == "crash":
            raise RuntimeError(f"a sweep worker process failed:\n{payload}")
        return payload


def serve(conn: Any, cores: list[int], settings: dict[str, Any], parent: int) -> None:
    """A worker's loop: pinned to `cores`, one CPU device, the parent's JAX settings; answers each
    (recipe, lrs, seeds, options, steps, evaluate, eval_limit) until told to stop (None) or the parent (pid) is gone."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    watch_parent(parent)
    jax.config.update("jax_num_cpu_devices", 1)
    for name, value in settings.items():
        jax.config.update(name, value)
    quiet_libraries()  # as the parent's command keeps them; its damaged cache entries go to the command to say
    damaged: list[str] = []
    if settings.get("jax_enable_compilation_cache") and settings.get("jax_compilation_cache_dir"):
        compile_cache.say_damaged_entries(Path(settings["jax_compilation_cache_dir"]), relay=damaged.append)
    trainers: dict[bytes, Any] = {}  # the last recipe's (a sweep's shapes come one after another)
    while True:
        try:
            job = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if job is None:
            return
        try:
            answer = ("ok", train(trainers, *job))
        except KeyboardInterrupt:
            return
        except (ZooError, ValueError) as e:
            answer = ("expected", str(e))
        except Exception:  # noqa: BLE001 -- the parent raises it with this traceback
            answer = ("crash", traceback.format_exc())
        try:
            conn.send((*answer, damaged[:]))
            damaged.clear()
        except OSError:  # the parent is gone
            return


def train(trainers: dict[bytes, Any], recipe: bytes, lrs: np.ndarray, seeds: np.ndarray, options: Options | None,
          steps: int, evaluate: bool, eval_limit: int | None) -> dict[str, Any]:
    """One block of members; the trainer of a recipe built once and kept until another recipe comes."""
    if recipe not in trainers:
        trainers.clear()
        trainers[recipe] = pickle.loads(recipe)()
    return dataclasses.asdict(train_members(trainers[recipe], lrs, seeds, steps, options=options, evaluate=evaluate,
                                            eval_limit=eval_limit))


def train_members(trainer: Any, lrs: np.ndarray, seeds: np.ndarray, steps: int, *, options: Options | None = None,
                  evaluate: bool = True, eval_limit: int | None = None) -> Result:
    """The members (`lrs[i]`, `seeds[i]`, `options[k][i]` for a program family) from fresh states through `steps` train
    steps of a `MemberTrainer`, and an eval when asked (of `eval_limit` examples); the seconds this took."""
    compile_s, start = trainer.compile_s, trainer.run_s
    trainer.prepare(lrs, seeds, steps, options, evaluate, eval_limit)  # its programs compiled side by side
    states = trainer.init(lrs, seeds, options)
    init_s = trainer.run_s - start
    states, losses = trainer.train(states, steps)
    evals = trainer.evaluate(states, eval_limit) if evaluate else {}
    return Result(losses, evals, trainer.compile_s - compile_s, init_s, trainer.run_s - start - init_s)
