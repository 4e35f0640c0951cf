"""Test-session setup: one persistent JAX compile cache per test worker, shared with the subprocesses it starts.

Many tests run train.py (or a CLI) on the same small configurations; with the cache a program compiles once per
worker instead of once per process. A cache entry is the compiled program itself, so results are the same with
or without it (JAX recompiles on a miss, and on an unreadable entry with a warning)."""

from __future__ import annotations

import os
import tempfile

import jax


def pytest_configure(config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    cache = tempfile.mkdtemp(prefix=f"zoo-test-jax-cache-{worker}-")
    settings = {"JAX_COMPILATION_CACHE_DIR": cache, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    os.environ.update(settings)  # inherited by every subprocess a test starts
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
