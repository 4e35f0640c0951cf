"""Files written whole or not at all, with the permissions the user's umask gives every other file."""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import math
import os
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from zoo.errors import naming_full_disk

LONG_NAME = 200  # bytes of a file name beyond which its temporaries are named by its hash
SWEEP_EVERY = 60.0  # seconds between two removals of a path's dead temporaries by one process
_SWEPT: dict[Path, float] = {}  # path -> when this process last removed its dead processes' temporaries
_WRITING: set[str] = set()  # the temporaries `atomic` is writing now, in any thread (`abandon_writes`)


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


def resolved(path: str | Path) -> Path:
    """`path` made absolute through its links; one line where they loop (Python's RuntimeError or, since 3.13,
    OSError ELOOP)."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError) as e:
        if isinstance(e, OSError) and e.errno != errno.ELOOP:
            raise
        raise ValueError(f"{path} is a loop of symbolic links (each names the next, and the last the first); give "
                         "the real path") from None


class NotAFile(ValueError):
    """A path zoo reads or writes is not a regular file: a FIFO, a device, a socket or a folder, or (to write) a
    symbolic link."""


KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
FLAGS = {"r": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
         "r+": os.O_RDWR}


def open_regular(path: str | Path, mode: str = "rb", what: str | None = None) -> IO:
    """`path` opened as a regular file (`regular_fd`); `mode`: r, w, a or r+, with b for bytes."""
    kind = mode.replace("b", "").replace("t", "")
    fd = regular_fd(path, FLAGS[kind], what)
    try:
        if kind == "w":
            os.ftruncate(fd, 0)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def regular_fd(path: str | Path, flags: int, what: str | None = None) -> int:
    """A descriptor of `path` opened with `flags` as a regular file, or one line (NotAFile) naming it as `what`
    (default: the path) and what it is, before a byte is read or written: a FIFO or a device would hang the command
    or feed it without end (/dev/zero). Writing never follows a symbolic link (its last part), which could point at
    any file the user can write (the link is refused); reading follows one. Opening never blocks (O_NONBLOCK,
    cleared once the file is known to be regular)."""
    path = Path(path)
    name = what or str(path)
    writing = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) != 0
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if writing else 0), 0o666)
    except OSError as e:
        if writing and e.errno == errno.ELOOP and path.is_symlink():
            raise NotAFile(f"{name} is a symbolic link, which zoo never writes through (it could point at any file): "
                           "remove it, or choose another path") from None
        if e.errno == errno.ENXIO:  # a FIFO opened to write with no reader
            raise NotAFile(f"{name} is not a regular file but a FIFO (named pipe); give a file") from None
        raise
    try:
        found = os.fstat(fd).st_mode
        if not stat.S_ISREG(found):
            raise NotAFile(f"{name} is not a regular file but {_kind(found)}; give a file")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    return next((text for test, text in KINDS if test(mode)), "not a file")


def read_regular(path: str | Path, what: str | None = None) -> bytes:
    """The bytes of the regular file at `path` (`open_regular`)."""
    with open_regular(path, "rb", what) as f:
        return f.read()


def refuse_special(path: str | Path, what: str) -> None:
    """One line (NotAFile) naming `path` as `what` where it is (through its links) a FIFO, a device or a socket,
    before a reader opens it: /dev/zero fed a reader without end, a FIFO hung it, and both were 'does not exist'
    where the check was for a regular file. A folder or a missing path passes (each caller names those)."""
    try:
        found = os.stat(path).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(found) or stat.S_ISDIR(found)):
        raise NotAFile(f"{what} is not a regular file but {_kind(found)}; give a file")


def check_replaceable(path: Path) -> None:
    """`path` may be replaced by a file zoo writes: nothing there yet, or a regular file (not a link, a FIFO or a
    device, which a write meant for a file of zoo's would replace)."""
    try:
        found = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(found):
        raise NotAFile(f"{path} is a symbolic link, which zoo never writes through (it could point at any file): "
                       "remove it, or choose another path")
    if stat.S_ISDIR(found):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(found):
        raise NotAFile(f"{path} is not a regular file but {_kind(found)}, which zoo does not replace; remove it, or "
                       "choose another path")


@contextlib.contextmanager
def atomic(path: Path, mode: str = "w") -> Iterator[IO]:
    """A file object for a temporary file beside `path`, renamed over it when the block ends (removed if it fails):
    readers see the old or the new file, never a partial one. The temporary file is `temporary(path)` with a random
    part before its .tmp, and those of `path` whose process is gone (a SIGKILL before the rename) are removed at the
    process's first write of `path` and then at most every SWEEP_EVERY seconds (listing a folder of 100,000 files
    takes 65 ms; a long-lived writer still removes another writer's, killed since). The file gets mode 0666
    less the umask, as `open(path, "w")` would give it (mkstemp alone gives 0600). A folder at `path` is an error
    naming `path` (not the temporary file, which the rename would name), and so is a link or a special file there
    (`check_replaceable`). A full disk is one DiskFull line naming `path`."""
    check_replaceable(path)
    if time.monotonic() - _SWEPT.get(path.absolute(), -math.inf) >= SWEEP_EVERY:
        for stale in stale_temporaries(path):
            stale.unlink(missing_ok=True)
        _SWEPT[path.absolute()] = time.monotonic()
    with naming_full_disk(path):
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary(path).name[:-len("tmp")], suffix=".tmp")
        except PermissionError as e:  # named by the file meant, not the temporary one (as a folder at `path` is)
            raise PermissionError(e.errno, e.strerror, str(path)) from None
        _WRITING.add(tmp)
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
        finally:
            _WRITING.discard(tmp)


def abandon_writes() -> None:
    """Remove the temporaries `atomic` is writing in any thread: a command that leaves at once on a signal
    (os._exit) while a worker thread writes (zoo.cli.boundary.interruptible) left an empty .NAME.*.tmp beside its
    file, which only a later write there would have swept."""
    for tmp in list(_WRITING):
        Path(tmp).unlink(missing_ok=True)


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def temporary(path: Path, pid: int | None = None) -> Path:
    """The temporary beside `path` of process `pid` (this one by default) on this host, `.NAME.HOST-PID.tmp` (a file
    `atomic` writes adds a random part before .tmp; zoo.export's folder has none): HOST a hash of the host's name
    (which can be 63 characters long), NAME a hash of `path`'s where that is longer than LONG_NAME, so that every
    name a file system takes (255 bytes) can be written."""
    name = path.name if len(path.name.encode()) <= LONG_NAME else _short(path.name)
    return path.parent / f".{name}.{_short(socket.gethostname())[:8]}-{os.getpid() if pid is None else pid}.tmp"


def stale_temporaries(path: Path, *, mine: bool = False) -> list[Path]:
    """The temporaries beside `path` of this host's processes that are gone (and, with `mine`, this process's: a
    pid reused after a kill): a SIGKILL before their rename left them (a decoded dataset's, hundreds of MB; an
    export's folder), and nothing else would remove them. Another host's (a shared file system) and another live
    process's are not among them."""
    prefix = temporary(path, 0).name[:-len("0.tmp")]
    found = []
    for tmp in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        pid = tmp.name[len(prefix):].partition(".")[0]
        if pid.isascii() and pid.isdigit() and (not alive(int(pid)) or (mine and int(pid) == os.getpid())):
            found.append(tmp)
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


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


def write_atomic(path: Path, text: str | bytes, mode: str = "w") -> None:
    """`text` written to `path` atomically (see `atomic`); `mode` "wb" for bytes."""
    with atomic(path, mode) as f:
        f.write(text)


NAME_MAX = 255  # bytes in one file name, on Linux's and macOS's file systems


def path_name_problem(path: str) -> str | None:
    """Why `path` can name no file (a name in it longer than NAME_MAX bytes: the OS's 'File name too long' named no
    flag), or None."""
    long = next((part for part in Path(path).parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        return (f"a name in it is {len(os.fsencode(long))} bytes long ({long[:20]}...), more than a file name's "
                f"{NAME_MAX}")
    return None


def check_writable(path: Path, flag: str) -> None:
    """Before any work: `path` can be written later (a temporary file created and removed in its folder, or in the
    nearest that exists: a refused command leaves no folder made for its output); one line naming `flag`
    otherwise."""
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a directory, not a file")
    check_can_write_in(nearest_existing(path.parent), f"{flag} {path}")


def check_no_dangling_link(folder: Path, what: str) -> None:
    """No link on the way to `folder` leads nowhere (its target is not there, or links loop): making the folder
    failed with mkdir's 'File exists' of a folder not there, or was called a file."""
    for path in (folder, *folder.parents):
        if path.is_symlink() and not path.exists():
            raise ValueError(f"{what}: {path} is a link to {os.readlink(path)}, which leads nowhere (its target does "
                             "not exist, or links loop): make that folder, or give another")


def check_can_write_in(folder: Path, what: str) -> None:
    """Before any work: files can be made in `folder` (made, with its parents, if needed); one line naming `what`
    otherwise."""
    check_no_dangling_link(folder, what)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except FileExistsError as e:  # a file where a folder of the path goes
        raise ValueError(f"{what} cannot be written: {e.filename} is a file, not a folder") from None
    except OSError as e:
        raise ValueError(f"{what} cannot be written: {e.strerror or e}") from None


def check_out_folder(folder: Path, flag: str) -> None:
    """Before any work: an output folder is one (or can be made: its nearest existing folder takes files), without
    making it; one line naming `flag` otherwise. A file there was refused only after the measurements (9-18 s)."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{flag} {folder} is a file, not a directory; choose another")
    check_no_dangling_link(folder, f"{flag} {folder}")
    check_can_write_in(nearest_existing(folder), f"{flag} {folder}")


def nearest_existing(folder: Path) -> Path:
    """`folder`, or the nearest folder above it that exists (where checking it can take files makes nothing)."""
    missing = first_missing(folder)
    return folder if missing is None else missing.parent


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


MAX_DEPTH = 32  # levels of nested mappings and lists in a settings file: a run's config holds 3


def shallow(data: Any, where: str) -> Any:
    """`data` (a file's parsed values), refused in one line naming `where` where it nests deeper than MAX_DEPTH:
    the checks that walk a file's values recurse (a list nested 900 deep was 'unexpected RecursionError' and a trace
    of 190 KB). Walked without recursion."""
    level = [data]
    for _ in range(MAX_DEPTH + 1):
        level = [v for x in level if isinstance(x, (dict, list)) for v in (x.values() if isinstance(x, dict) else x)]
        if not level:
            return data
    raise ValueError(f"{where} nests its values deeper than a settings file does ({MAX_DEPTH} levels at most); is it "
                     "a settings file?")


def read_mapping(path: Path, what: str, advice: str) -> dict[str, Any]:
    """The JSON object in `path`: one line naming the file, `what` it should hold and `advice` when it is not JSON
    or not an object."""
    try:
        value = shallow(json.loads(read_regular(path)), str(path))
    except RecursionError:
        raise ValueError(f"{path} nests its values too deep to be {what}: {advice}") from None
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
