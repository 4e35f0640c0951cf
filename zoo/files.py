"""Files written whole or not at all, with the permissions the user's umask gives every other file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def umask() -> int:
    """The process's file-mode creation mask (read without changing it, where /proc allows)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename over it: readers see the old or the new file. The file
    gets mode 0666 less the umask, as `open(path, "w")` would give it (mkstemp alone gives 0600)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
