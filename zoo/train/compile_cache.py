"""JAX's persistent compilation cache, on for every zoo command that compiles (`--compile-cache`).

A compiled program is stored under a hash of its lowered text, the compile options and the backend, so a rerun, or
another sweep, run or plugin whose programs have the same shapes, loads it instead of running XLA (on a GPU, where
one program costs seconds, that is most of a short run). XLA's per-fusion GPU autotune results go into the same
folder (JAX's `jax_persistent_cache_enable_xla_caches` default). The folder: --compile-cache, else
$JAX_COMPILATION_CACHE_DIR where set, else $ZOO_CACHE/jax, else ~/.cache/zoo/jax; `off` turns the cache off.

A cache entry is the compiled program itself: results are the same with or without it. A damaged entry is a miss
(JAX compiles again: `jax_raise_persistent_cache_errors` stays off), and so is an entry this process cannot read;
JAX never replaces an entry, so a damaged one is compiled at every run until removed, which one line says (JAX's
warning is kept off the terminal with the other libraries', zoo.cli.boundary; a sweep's worker processes pass
theirs to the command, which says it once); a folder that cannot be written, or that holds a FIFO or a device
where JAX reads an entry (the read would block for ever), is refused in one line when the user named it, and
skipped with a one-line warning when it is the default (the run compiles as it would without a cache)."""

from __future__ import annotations

import os
import stat
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import jax
from jax.experimental.compilation_cache import compilation_cache

from zoo.files import check_can_write_in, resolved

OFF = "off"
FLAG = "--compile-cache"
ENTRY_SUFFIXES = ("-cache", "-atime")  # the names of JAX's cache entries (jax._src.lru_cache)
DAMAGED = "Error reading persistent compilation cache entry for '"  # JAX's warning, then the program's name
_in_use: list[tuple[Path, bool]] = []  # the folder in use, and whether its damaged entry was said (`use`)
_previous: list = []  # the warnings hook `_show` passes the other warnings to
_relay: list[Callable[[str], None] | None] = [None]  # a worker's: where its damaged entries' names go (`damaged`)
_saying = threading.Lock()  # `damaged`'s check and mark, one thread at a time


def default_folder() -> tuple[str, str]:
    """$JAX_COMPILATION_CACHE_DIR, else $ZOO_CACHE/jax, else ~/.cache/zoo/jax; and which of them it is."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return str(Path(os.environ["JAX_COMPILATION_CACHE_DIR"]).expanduser()), "$JAX_COMPILATION_CACHE_DIR"
    if os.environ.get("ZOO_CACHE"):
        return str(Path(os.environ["ZOO_CACHE"]).expanduser() / "jax"), "$ZOO_CACHE/jax"
    return str(Path("~/.cache/zoo/jax").expanduser()), "the default"


def use(folder: str | None) -> Path | None:
    """The cache in `folder` (None: the default folder; OFF: no cache); returns the folder in use, or None.

    A named folder that cannot be made or written is a ValueError naming the flag; the default folder that cannot
    is a warning on stderr, and the command runs without a cache."""
    if folder == OFF:
        _switch(None)
        return None
    default, source = default_folder()
    path = Path(folder or default).expanduser()
    what = f"{FLAG} {folder}" if folder is not None else f"the compile cache {path} ({source})"
    try:
        check_can_write_in(path, what)
        path = resolved(path)  # the key of an entry holds the folder's name (compile options name XLA's autotune cache
        check_entries(path, what)  # in it): one folder, one spelling, found by any
    except ValueError as e:
        if folder is not None:
            raise
        print(f"warning: {e}; compiling without a cache ({FLAG} off silences this)", file=sys.stderr)
        _switch(None)
        return None
    _switch(path)
    say_damaged_entries(path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # on a GPU every program costs seconds
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


def check_entries(path: Path, what: str) -> None:
    """No entry of the cache folder is a FIFO or a device: JAX opens an entry by its name (KEY-cache, KEY-atime) and
    reads it whole, and such a read can block for ever; one line naming it otherwise (other files are not JAX's).
    A link JAX can neither read nor write through (a loop, or one into a folder that is not there; into one that is,
    JAX's next write makes its file) is a miss at every run: one warning line. At every command's start: a plain
    file or folder is known from the listing, only the rest is stat'ed."""
    broken = []
    try:
        listing = list(os.scandir(path))
    except OSError as e:  # a folder that can be written but not listed (mode -wx): its entries cannot be checked
        raise ValueError(f"{what} cannot be listed: {e.strerror or e}") from None
    for entry in listing:
        if not entry.name.endswith(ENTRY_SUFFIXES) or entry.is_file(follow_symlinks=False) or \
                entry.is_dir(follow_symlinks=False):
            continue
        try:
            mode = entry.stat().st_mode
        except OSError:  # a dangling link (or one gone meanwhile): JAX's read fails, a miss
            if entry.name.endswith("-cache") and _misses_for_good(Path(entry.path)):
                broken.append(entry.name)
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise ValueError(f"{what} holds {entry.name}, a FIFO or device where JAX reads a cache entry (the "
                             "read would never end); remove it")
    if broken:
        print(f"warning: the compile cache {path} holds {len(broken)} entry link(s) JAX can neither read nor write "
              f"through, a loop or into a missing folder ({broken[0]}): their programs are compiled again at every "
              "run; remove them", file=sys.stderr)


def _misses_for_good(link: Path) -> bool:
    """A link to nothing that JAX cannot write through either: a loop, or one into a folder that is not there."""
    if not link.is_symlink():
        return False
    try:
        return not link.resolve().parent.is_dir()
    except (RuntimeError, OSError):  # a loop (RuntimeError before Python 3.13, OSError since)
        return True


def say_damaged_entries(path: Path, relay: Callable[[str], None] | None = None) -> None:
    """One line on stderr, at the first entry JAX could not read in the folder: a hook over the warnings hook in
    place (the commands' own logs library warnings out of sight), installed again where something replaced it.
    `relay`: a sweep worker's, which gets the entry's name instead, for its command to say (`damaged`)."""
    _in_use[:] = [(path, False)]
    _relay[0] = relay
    if warnings.showwarning is not _show:
        _previous[:] = [warnings.showwarning]
        warnings.showwarning = _show


def _show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001, ANN202
    text = str(message)
    if not text.startswith(DAMAGED) or not _in_use:
        return _previous[0](message, category, filename, lineno, file, line)
    damaged(text[len(DAMAGED):].partition("'")[0])


def damaged(name: str) -> None:
    """The folder in use holds a damaged entry (program `name`'s): said once per command, on stderr (a shape's
    programs compile in threads side by side, and each may meet one)."""
    if _relay[0] is not None:
        return _relay[0](name)
    with _saying:
        if not _in_use or _in_use[0][1]:
            return
        folder = _in_use[0][0]
        print(f"warning: the compile cache {folder} holds a damaged entry ({name}'s): it was compiled again, as it "
              "will be at every run until it is removed (JAX never replaces an entry; removing the folder is safe)",
              file=sys.stderr)
        _in_use[0] = (folder, True)


def _switch(path: Path | None) -> None:
    """The cache in `path` (None: off). JAX opens its cache at the first compile and keeps it: a process that changes
    folders (a second command run in-process) has it reopened."""
    enabled, folder = jax.config.jax_enable_compilation_cache, jax.config.jax_compilation_cache_dir
    if (path is not None, str(path) if path else folder) != (enabled, folder):
        compilation_cache.reset_cache()
    jax.config.update("jax_enable_compilation_cache", path is not None)
    if path is not None:
        compilation_cache.set_cache_dir(str(path))
