"""glibc's heap kept between steps. Freed memory normally goes back to the system: blocks above glibc's mmap
threshold (at most 32 MiB) are mapped for each allocation and unmapped when freed, and the heap's free top is
trimmed. XLA:CPU allocates a step's temporaries as one block per run (270 MB for ViT's default step), so every
step maps a fresh block and page-faults it in 4 KB at a time (76,000 faults, 140 ms of a 320 ms step on a 2-core
Zen 4). With mapping and trimming off, the block is carved from the heap once and reused.

The settings bind the arena of the allocating thread: the main one when steps run on the calling thread
(zoo.train.backend.start). A worker thread's arena maps any block above its 64 MB heap regardless."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's malloc.h
NEVER_TRIM = 2**31 - 1  # mallopt takes an int: the largest threshold it can express


def is_glibc() -> bool:
    """Whether this process runs on glibc (whose mallopt options these are)."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError):
        return False


def keep() -> bool:
    """mallopt(M_MMAP_MAX, 0) and mallopt(M_TRIM_THRESHOLD, 2**31 - 1): large blocks come from the heap, and freed
    memory stays with the process for the next step. False (nothing set) where the C library is not glibc."""
    if not is_glibc():
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))
