"""Test-session setup: every file the tests write goes into temporary folders that the session removes again.

- One persistent JAX compile cache for the session, shared by the xdist workers and the subprocesses they start.
  Many tests run train.py (or a CLI) on the same small configurations; with the cache a program compiles once per
  session instead of once per process. A size limit turns on JAX's file lock around every read and write of it
  (jax._src.lru_cache), so two processes never see a half-written entry. A cache entry is the compiled program
  itself, so results are the same with or without it (JAX recompiles on a miss).
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

CACHE_BYTES = 8 << 30  # far above a session's programs: the limit is there for the lock, not to evict
MADE: list[str] = []  # the folders this process made, removed when its session ends


def made_folder(prefix: str) -> str:
    folder = tempfile.mkdtemp(prefix=prefix)
    MADE.append(folder)
    return folder


def pytest_configure(config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # the session's own process (with xdist, the controller)
        os.environ["ZOO_CACHE"] = made_folder("zoo-test-cache-")  # the workers inherit both folders
        os.environ["JAX_COMPILATION_CACHE_DIR"] = made_folder("zoo-test-jax-cache-")
    settings = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
                "JAX_COMPILATION_CACHE_MAX_SIZE": str(CACHE_BYTES)}
    os.environ.update(settings)  # inherited by every subprocess a test starts
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_compilation_cache_max_size", CACHE_BYTES)


def pytest_unconfigure(config) -> None:
    for folder in MADE:
        shutil.rmtree(folder, ignore_errors=True)
