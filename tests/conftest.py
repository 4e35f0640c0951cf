"""Test-session setup: every file the tests write goes into temporary folders that the session removes again.

- One persistent JAX compile cache per test worker, shared with the subprocesses it starts. Many tests run train.py
  (or a CLI) on the same small configurations; with the cache a program compiles once per worker instead of once
  per process. A cache entry is the compiled program itself, so results are the same with or without it (JAX
  recompiles on a miss, and on an unreadable entry with a warning).
- One $ZOO_CACHE (decoded datasets, `zoo.sweep`'s compile cache) for the whole session, made before the xdist
  workers start so that they and their subprocesses share it: the bundled CIFAR-10 decodes once per session, and
  nothing lands in the user's ~/.cache/zoo (the decoded copy, 185 MB, is keyed by the checkout's path, so every
  fresh clone added one there).
- XLA's backend (LLVM) optimisation level 1 instead of its default 2, for every program the tests compile, here and in
  the subprocesses they start (`FAST_COMPILE`; a program zoo compiles with its own options, run_once_options()'s
  level 0, keeps them). XLA:CPU compiles without fast-math at every level, so the programs compute the same numbers:
  measured (2026-11-29, the 2-core CPU), 40 steps of train.py on a GPT, an MLP-ResNet and a ViT gave the same losses
  bit for bit at both levels and the same step times, while the GPT's and ViT's train steps compiled in 6.9 and 10.9 s
  instead of 12.8 and 13.6; the compile-heavy test files (tests/diagnostics/test_jacobian.py and test_coord_check.py,
  two audit and model tests: 110 tests) took 302 s instead of 334 (CPU seconds 401 against 467). CI's 30 minutes on
  2 cores is the suite's constraint, and most of its time is XLA compiling.
- A test that points the cache elsewhere (an in-process CLI run with --compile-cache in its tmp_path) has the
  worker's cache back when it ends (`worker_compile_cache`): later tests in the worker would otherwise write into a
  folder already removed (one JAX warning per program).
- pyproject.toml keeps a test's tmp_path only when the test fails.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import jax
import pytest

FAST_COMPILE = "--xla_backend_optimization_level=1"
MADE: list[str] = []  # the folders this process made, removed when its session ends
CACHE: dict[str, str] = {}  # "folder": this process's persistent compile cache


def made_folder(prefix: str) -> str:
    folder = tempfile.mkdtemp(prefix=prefix)
    MADE.append(folder)
    return folder


def pytest_configure(config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # the session's own process (with xdist, the controller; its workers inherit the setting)
        os.environ["ZOO_CACHE"] = made_folder("zoo-test-cache-")
    cache = made_folder(f"zoo-test-jax-cache-{worker or 'main'}-")
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {FAST_COMPILE}".strip()  # read when the backend starts, after this
    settings = {"JAX_COMPILATION_CACHE_DIR": cache, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    os.environ.update(settings)  # inherited by every subprocess a test starts
    CACHE["folder"] = cache
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_unconfigure(config) -> None:
    for folder in MADE:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def worker_compile_cache():
    """After each test, the worker's compile cache again, where the test switched it (zoo.train.compile_cache.use)."""
    yield
    if (jax.config.jax_enable_compilation_cache, jax.config.jax_compilation_cache_dir) != (True, CACHE["folder"]):
        from zoo.train import compile_cache

        compile_cache.use(CACHE["folder"])
