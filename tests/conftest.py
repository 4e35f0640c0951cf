"""Test-session setup: every file the tests write goes into temporary folders that the session removes again.

- One persistent JAX compile cache per test worker, shared with the subprocesses it starts. Many tests run train.py
  (or a CLI) on the same small configurations; with the cache a program compiles once per worker instead of once
  per process. A cache entry is the compiled program itself, so results are the same with or without it (JAX
  recompiles on a miss, and on an unreadable entry with a warning).
- One $ZOO_CACHE (decoded datasets, `zoo.sweep`'s compile cache) for the whole session, made before the xdist
  workers start so that they and their subprocesses share it: the bundled CIFAR-10 decodes once per session, and
  nothing lands in the user's ~/.cache/zoo (the decoded copy, 185 MB, is keyed by the checkout's path, so every
  fresh clone added one there).
- pyproject.toml keeps a test's tmp_path only when the test fails.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import jax

MADE: list[str] = []  # the folders this process made, removed when its session ends


def made_folder(prefix: str) -> str:
    folder = tempfile.mkdtemp(prefix=prefix)
    MADE.append(folder)
    return folder


def pytest_configure(config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # the session's own process (with xdist, the controller; its workers inherit the setting)
        os.environ["ZOO_CACHE"] = made_folder("zoo-test-cache-")
    cache = made_folder(f"zoo-test-jax-cache-{worker or 'main'}-")
    settings = {"JAX_COMPILATION_CACHE_DIR": cache, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    os.environ.update(settings)  # inherited by every subprocess a test starts
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_unconfigure(config) -> None:
    for folder in MADE:
        shutil.rmtree(folder, ignore_errors=True)
