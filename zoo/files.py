"""Files written whole or not at all, with the permissions the user's umask gives every other file."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from zoo.errors import naming_full_disk


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


@contextlib.contextmanager
def atomic(path: Path, mode: str = "w") -> Iterator[IO]:
    """A file object for a temporary file beside `path`, renamed over it when the block ends (removed if it fails):
    readers see the old or the new file, never a partial one. The file gets mode 0666 less the umask, as
    `open(path, "w")` would give it (mkstemp alone gives 0600). A folder at `path` is an error naming `path` (not
    the temporary file, which the rename would name). A full disk is one DiskFull line naming `path`."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    with naming_full_disk(path):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o666 & ~umask())
            with os.fdopen(fd, mode) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def save_figure(fig: Any, path: str | Path, dpi: float | None = None) -> Path:
    """A matplotlib figure saved to `path` atomically (see `atomic`; its folder made, its format from the suffix,
    PNG by default), then closed."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic(path, "wb") as f:
        fig.savefig(f, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def write_atomic(path: Path, text: str) -> None:
    """`text` written to `path` atomically (see `atomic`)."""
    with atomic(path) as f:
        f.write(text)


def check_writable(path: Path, flag: str) -> None:
    """Before any work: `path` can be written later (its folder made and a temporary file created and removed
    there); one line naming `flag` otherwise."""
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a directory, not a file")
    check_can_write_in(path.parent, f"{flag} {path}")


def check_can_write_in(folder: Path, what: str) -> None:
    """Before any work: files can be made in `folder` (made, with its parents, if needed); one line naming `what`
    otherwise."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except FileExistsError as e:  # a file where a folder of the path goes
        raise ValueError(f"{what} cannot be written: {e.filename} is a file, not a folder") from None
    except OSError as e:
        raise ValueError(f"{what} cannot be written: {e.strerror or e}") from None


def first_missing(folder: Path) -> Path | None:
    """The outermost folder on the way to `folder` that does not exist yet (`folder` itself or one above it); None
    when `folder` exists."""
    top, path = None, folder
    while not path.exists() and path != path.parent:
        top, path = path, path.parent
    return top


def remove_empty_folders(folder: Path, top: Path | None) -> None:
    """`folder` and the folders above it up to `top` (those a refused command made) removed, each while empty."""
    path = folder
    while top is not None and path.is_relative_to(top):
        try:
            path.rmdir()
        except OSError:
            break
        path = path.parent


@contextlib.contextmanager
def undo_folders_made_on_failure(folder: Path) -> Iterator[None]:
    """Runs the block; if it fails, the folders it made on the way to `folder` (those missing when it began) are
    removed again while empty, so a refused command leaves nothing behind."""
    top = first_missing(folder)
    try:
        yield
    except BaseException:
        remove_empty_folders(folder, top)
        raise


def read_mapping(path: Path, what: str, advice: str) -> dict[str, Any]:
    """The JSON object in `path`: one line naming the file, `what` it should hold and `advice` when it is not JSON
    or not an object."""
    try:
        value = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not JSON ({e}): {advice}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} is not {what} (not a JSON object): {advice}")
    return value


def jsonable(x: Any) -> Any:
    """Numbers as JSON: numpy scalars and arrays to Python, NaN and inf to None."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x
