"""Decoded arrays cached as .npz, keyed by the source's path, size, mtime and ctime; written atomically."""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from pathlib import Path

import numpy as np

from zoo.errors import DiskFull
from zoo.files import atomic, check_can_write_in

VERSION = "1"
OFF = "off"


def cache_root(cache_dir: str | None = None) -> Path:
    """`cache_dir`, else $ZOO_CACHE, else ~/.cache/zoo."""
    return Path(cache_dir or os.environ.get("ZOO_CACHE") or Path.home() / ".cache" / "zoo")


def cache_path(kind: str, fingerprint: str, cache_dir: str | None = None) -> Path | None:
    """Where the arrays of a source with this fingerprint (path, size, mtime, ...) are cached; None under
    cache_dir 'off' (decoded each time, as 'off' turns off the sweep's compile cache)."""
    if cache_dir == OFF:
        return None
    digest = hashlib.sha256(f"{VERSION}|{fingerprint}".encode()).hexdigest()[:20]
    return cache_root(cache_dir) / f"{kind}-{digest}.npz"


def stat_key(path: Path) -> str:
    """A file's size, mtime and ctime. The ctime too: a file replaced by one of the same size with its mtime kept
    (`cp -p`, `rsync -a`, an archive rebuilt at a fixed mtime: fixed-size images, tar's 512-byte blocks) kept its
    size and mtime, and its stale arrays were served; no tool sets a ctime back."""
    st = path.stat()
    return f"{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}"


def file_fingerprint(path: Path) -> str:
    return f"{path.resolve()}|{stat_key(path)}"


def load(path: Path | None) -> dict[str, np.ndarray] | None:
    """The cached arrays, or None when absent, unreadable or not cached (then the caller decodes again)."""
    if path is None:
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None


def writable(path: Path | None, cache_dir: str | None) -> Path | None:
    """`path`, checked before any decoding: its folder can be written (made if needed). A --cache-dir given that
    cannot be is one line naming it and how to choose another (one that is a file read 'File exists: X' once the
    whole set was decoded); the default folder ($ZOO_CACHE or ~/.cache/zoo) that cannot be is a one-line warning, and
    the set is decoded without a cache (None), as the compile cache goes without one."""
    if path is None:
        return None
    try:
        check_can_write_in(path.parent, f"the decoded-data cache {path.parent} (--cache-dir DIR, or off)")
    except ValueError as e:
        if cache_dir is not None:
            raise
        print(f"warning: {e}; decoding without a cache", file=sys.stderr)
        return None
    return path


def save(path: Path | None, arrays: dict[str, np.ndarray]) -> None:
    """Write atomically (readers never see a partial file), with the permissions the umask gives; nothing where
    the cache is off. A full disk is one DiskFull line naming the cache file: a write error names no file, so the
    line said 'writing . (78,432 MB free)', the working folder's disk."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic(path, "wb") as f:
            np.savez(f, **arrays)
    except DiskFull:
        full = DiskFull.writing(path, sum(a.nbytes for a in arrays.values()))
        raise DiskFull(f"{full} (or with --cache-dir off, which decodes the set at each start)") from None
