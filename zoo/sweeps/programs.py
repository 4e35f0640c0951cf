"""A sweep's compiled programs: each compiled ahead of time once per argument shapes, with where its compile went.

`Programs.compile` traces and lowers a jitted function on its arguments (arrays or `jax.ShapeDtypeStruct`s: a
program can be compiled from shapes alone, before its arguments exist) and compiles it, timing the three stages
apart (`Compile`) and noting whether XLA ran or JAX's persistent cache (zoo.train.compile_cache) had the program.
`compile_all` compiles several side by side: XLA compiles outside Python's lock, so a sweep's init, train and eval
programs cost about the longest one's time on a machine with cores to spare, not their sum. Random bits are lowered
to JAX's GPU kernel where there is one (`jax_threefry_gpu_kernel_lowering`; the same threefry2x32 bits): measured on
an H200, a 9-member GPT sweep's init program compiled in 0.70 s instead of 3.37 s and its train program in 22 s
instead of 30 s."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax._src import config as jax_config

from zoo.sweeps.ahead import wait
from zoo.train import memory

HITS = "/jax/compilation_cache/cache_hits"
# Compiler options, or a function of the lowered program that gives them
Options = dict[str, Any] | Callable[[jax.stages.Lowered], dict[str, Any] | None] | None
# The thread-local switch of the threefry GPU kernel (JAX has no public one; without it, the default lowering).
THREEFRY_KERNEL = getattr(jax_config, "threefry_gpu_kernel_lowering", lambda _: contextlib.nullcontext())


@dataclasses.dataclass(frozen=True)
class Compile:
    """One program's compile: seconds tracing (Python), lowering (to StableHLO) and compiling (XLA, or a load from
    the persistent cache: `cached`); the lowered text's bytes where measured (`Programs(text_sizes=True)`), else 0."""

    name: str
    trace_s: float
    lower_s: float
    compile_s: float
    cached: bool
    text_bytes: int = 0

    @property
    def total_s(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s


class _CacheHits(threading.local):
    count = 0


_hits = _CacheHits()


def _count_hit(event: str, **_: Any) -> None:
    if event == HITS:
        _hits.count += 1


jax.monitoring.register_event_listener(_count_hit)


def key_of(name: str, args: Sequence[Any]) -> tuple:
    """A program's key: its name and its arguments' tree and shapes."""
    return name, jax.tree.structure(tuple(args)), tuple(np.shape(a) for a in jax.tree.leaves(tuple(args)))


class Programs:
    """Compiled programs by `key_of`: `lower` traces and lowers one (Python, one after another), `compile` compiles
    every lowered one side by side, one thread each. `log` holds every compile in order, `compile_s` the wall-clock
    seconds spent in both (programs compiled side by side count once). text_sizes: also measure each lowered
    program's text (bench/sweep_compile.py; printing it costs time)."""

    def __init__(self, advice: str, text_sizes: bool = False):
        self.advice, self.text_sizes = advice, text_sizes
        self.log: list[Compile] = []
        self.compile_s = 0.0
        self._compiled: dict[tuple, Any] = {}
        self._lowered: dict[tuple, tuple] = {}
        self._checked: set[tuple] = set()

    def lower(self, key: tuple, fn: Any, args: Sequence[Any], options: Options = None) -> Any:
        """`fn` (a jax.jit) traced and lowered on `args` (arrays or ShapeDtypeStructs) under `key`, to be compiled
        with `options` by `compile` (or with `options(lowered)`, asked in the order the programs were lowered); its
        outputs' shapes (None when `key` is compiled or lowered already)."""
        if key in self._compiled or key in self._lowered:
            return None
        t0 = time.perf_counter()
        with THREEFRY_KERNEL(True):
            traced = fn.trace(*args)
            t1 = time.perf_counter()
            low = traced.lower()
        t2 = time.perf_counter()
        self._lowered[key] = (low, options, t1 - t0, t2 - t1, len(low.as_text()) if self.text_sizes else 0)
        self.compile_s += time.perf_counter() - t0
        return traced.out_info

    def compile(self) -> None:
        """Every lowered program compiled, side by side (a failure is raised here, the first one's)."""
        start, jobs = time.perf_counter(), [(key, (low, options(low) if callable(options) else options, *rest))
                                            for key, (low, options, *rest) in self._lowered.items()]
        self._lowered = {}
        results: list[Any] = [None] * len(jobs)

        def run(i: int) -> None:
            key, (low, options, trace_s, lower_s, size) = jobs[i]
            try:
                before, t0 = _hits.count, time.perf_counter()
                compiled = low.compile(compiler_options=options)
                results[i] = (compiled, Compile(key[0], trace_s, lower_s, time.perf_counter() - t0,
                                                _hits.count > before, size))
            except BaseException as e:  # noqa: BLE001 -- raised again in the calling thread
                results[i] = e

        threads = [threading.Thread(target=run, args=(i,), daemon=True, name=f"zoo-compile {key[0]}")
                   for i, (key, _) in enumerate(jobs)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                wait(t)
        finally:
            self.compile_s += time.perf_counter() - start
        for (key, _), result in zip(jobs, results, strict=True):
            if isinstance(result, BaseException):
                raise result
            self._compiled[key] = result[0]
            self.log.append(result[1])

    def get(self, key: tuple, name: str, args: Sequence[Any]) -> Callable:
        """The program under `key`; at its first call, its memory checked against the device's (the arguments
        already on the device count as free for it: they are its own)."""
        compiled = self._compiled[key]
        if key not in self._checked:
            free = memory.free_memory()
            resident = sum(a.nbytes for a in jax.tree.leaves(tuple(args)) if isinstance(a, jax.Array))
            memory.check_compiled(compiled, f"sweep's {name} program", self.advice, free and free + resident)
            self._checked.add(key)
        return compiled
