"""JAX's persistent compile cache for every command (zoo.train.compile_cache): off is off, a damaged entry is compiled
again, a folder that cannot be written or holds a FIFO is one line. (train.py's rerun from the cache, in the same
processes as the sweep member it equals: tests/sweeps/test_plugin_numbers.py.)"""

from __future__ import annotations

import os
import warnings

import jax
import jax.numpy as jnp
import pytest
from cli_utils import one_line_error
from jax.experimental.compilation_cache import compilation_cache

from zoo.cli import train as train_cli
from zoo.train import compile_cache

EVENTS: list[str] = []
jax.monitoring.register_event_listener(lambda event, **_: EVENTS.append(event))
REQUESTS, HITS = "/jax/compilation_cache/compile_requests_use_cache", "/jax/compilation_cache/cache_hits"
TINY = ["--model", "mlp_resnet", "--width", "8", "--depth", "1", "--batch-size", "8", "--data", "synthetic",
        "--steps", "2", "--eval-every", "1000"]


@pytest.fixture(autouse=True)
def fresh_default(tmp_path, monkeypatch):
    """The default folder a fresh one per test ($JAX_COMPILATION_CACHE_DIR, as conftest sets it per worker)."""
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax-cache"))


@pytest.fixture
def own_cache():
    """The test's cache settings undone afterwards (conftest's per-worker cache comes back)."""
    names = ("jax_enable_compilation_cache", "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes")
    before = {name: getattr(jax.config, name) for name in names}
    yield
    compilation_cache.reset_cache()
    for name, value in before.items():
        jax.config.update(name, value)


def misses() -> int:
    """Programs compiled by XLA since EVENTS was cleared (requests the persistent cache did not answer)."""
    return EVENTS.count(REQUESTS) - EVENTS.count(HITS)


def test_off_is_no_cache(tmp_path, own_cache):
    """--compile-cache off: nothing is looked up or written, whatever JAX's own settings say."""
    compile_cache.use(str(tmp_path / "cache"))
    compile_cache.use("off")
    EVENTS.clear()
    jax.jit(lambda v: v - 7)(jnp.arange(3.0)).block_until_ready()
    assert EVENTS.count(REQUESTS) == 0 and not list((tmp_path / "cache").iterdir())


def test_a_damaged_entry_is_compiled_again(tmp_path, own_cache, capsys):
    """Every entry overwritten with garbage: the program compiles again and gives the same result, no error; one
    line says so, since JAX never replaces the entry (it was compiled at every run, and nothing said why)."""
    folder = compile_cache.use(str(tmp_path / "cache"))
    x = jnp.arange(4.0)
    expected = jax.jit(lambda v: v * 3 + 1)(x)
    entries = [f for f in folder.rglob("*") if f.is_file()]
    assert entries
    for f in entries:
        f.write_bytes(b"not a compiled program")
    jax.clear_caches()
    EVENTS.clear()
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # JAX's warning, though another test raised the same before
        again = jax.jit(lambda v: v * 3 + 1)(x)
        jax.jit(lambda v: v * 3 + 1)(x + 1)
    assert EVENTS.count(HITS) == 0 and misses() > 0
    assert jnp.array_equal(again, expected)
    (line,) = capsys.readouterr().err.splitlines()  # one line, however many entries
    assert line.startswith(f"warning: the compile cache {folder} holds a damaged entry (jit__lambda's)"), line


def test_a_cache_folder_that_cannot_be_written(tmp_path, own_cache, capsys, monkeypatch):
    """Named with --compile-cache: one line naming the flag, before anything runs. The default folder: a one-line
    warning, and the command runs without a cache."""
    (tmp_path / "file").write_text("")
    line = one_line_error(train_cli.main, [*TINY, "--run-dir", str(tmp_path / "r"), "--compile-cache",
                                           str(tmp_path / "file")], capsys)
    assert f"--compile-cache {tmp_path / 'file'} cannot be written" in line
    assert not (tmp_path / "r").exists()
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "file" / "sub"))
    assert compile_cache.use(None) is None
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("warning: ") and "compiling without a cache" in err[0], err
    assert f"the compile cache {tmp_path / 'file' / 'sub'} ($JAX_COMPILATION_CACHE_DIR) cannot be written" in err[0]
    assert not jax.config.jax_enable_compilation_cache
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")  # the folder named by the variable the user set, not a flag
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "file"))
    assert compile_cache.use(None) is None
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: the compile cache {tmp_path / 'file' / 'jax'} ($ZOO_CACHE/jax) cannot be "), line


def test_a_fifo_among_the_entries(tmp_path, own_cache, capsys, monkeypatch):
    """A FIFO where JAX reads an entry would block the command for ever: named, one line, before anything runs; in
    the default folder a one-line warning, and the command runs without a cache."""
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "jit_init-0123-cache").write_bytes(b"an entry")
    (folder / "autotune").mkdir()  # folders are JAX's and XLA's own
    os.mkfifo(folder / "not-an-entry")  # JAX opens none but its own names
    os.mkfifo(folder / "jit_train-4567-cache")
    line = one_line_error(train_cli.main, [*TINY, "--run-dir", str(tmp_path / "r"), "--compile-cache", str(folder)],
                          capsys)
    assert f"--compile-cache {folder} holds jit_train-4567-cache, a FIFO or device where JAX reads a cache" in line
    assert not (tmp_path / "r").exists()
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(folder))
    assert compile_cache.use(None) is None
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "jit_train-4567-cache" in err[0] and "compiling without a cache" in err[0], err
    (folder / "jit_train-4567-cache").unlink()
    assert compile_cache.use(None) == folder  # the FIFO JAX never opens stays


def test_a_link_jax_cannot_write_through_is_said(tmp_path, own_cache, capsys):
    """An entry that is a link into a folder that is not there, or a loop, is a miss JAX can neither read nor
    replace: its program was compiled again at every run without a word, where a damaged file is said. One warning
    line naming them, and the command runs on the cache; a link into a folder that is there is no such entry (JAX's
    next write makes its file, and the run after reads it)."""
    folder = tmp_path / "cache"
    (tmp_path / "moved").mkdir()
    folder.mkdir()
    (folder / "jit_init-0123-cache").write_bytes(b"an entry")
    (folder / "jit_train-4567-cache").symlink_to(tmp_path / "nowhere" / "entry")
    (folder / "jit_eval-89ab-cache").symlink_to(folder / "jit_eval-89ab-cache")  # a loop
    (folder / "jit_loss-cdef-cache").symlink_to(tmp_path / "moved" / "entry")  # written through
    (folder / "jit_train-4567-atime").symlink_to(tmp_path / "nowhere")  # JAX's access time: not an entry's program
    assert compile_cache.use(str(folder)) == folder
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "holds 2 entry link(s) JAX can neither read nor write through" in err[0], err


def test_a_folder_that_cannot_be_listed(tmp_path, own_cache, capsys, monkeypatch):
    """A folder that can be written but not listed (mode -wx): the check of its entries raised PermissionError, and
    the command failed ('Permission denied', no flag) where the default folder promises a warning. Named: one line
    naming the flag; the default: a warning, and no cache."""
    folder, scandir = tmp_path / "cache", os.scandir

    def unlistable(path):
        if os.fspath(path) == str(folder):
            raise PermissionError(13, "Permission denied", str(folder))
        return scandir(path)

    monkeypatch.setattr(compile_cache.os, "scandir", unlistable)  # root lists any folder: chmod 333 cannot show it
    line = one_line_error(train_cli.main, [*TINY, "--run-dir", str(tmp_path / "r"), "--compile-cache", str(folder)],
                          capsys)
    assert f"--compile-cache {folder} cannot be listed: Permission denied" in line, line
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(folder))
    assert compile_cache.use(None) is None
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "cannot be listed" in err[0] and "compiling without a cache" in err[0], err


def test_one_folder_named_two_ways_is_one_cache(tmp_path, own_cache, monkeypatch):
    """An entry's key holds the folder's name (the compile options name XLA's autotune cache inside it): the same
    folder named through a link, or relative to another working folder, found none of its entries and stored every
    program again. The folder is used by its real path."""
    folder = tmp_path / "cache"
    assert compile_cache.use(str(folder)) == folder.resolve()
    x = jnp.arange(5.0)
    jax.jit(lambda v: v * 5 - 2)(x)
    (tmp_path / "link").symlink_to(folder)
    monkeypatch.chdir(tmp_path / "link")
    stored = sorted(folder.iterdir())
    for spelling in (str(tmp_path / "link"), "../cache", "."):
        jax.clear_caches()
        assert compile_cache.use(spelling) == folder.resolve()
        EVENTS.clear()
        jax.jit(lambda v: v * 5 - 2)(x)
        assert EVENTS.count(HITS) == 1 and misses() == 0, spelling
    assert sorted(folder.iterdir()) == stored


def test_a_damaged_entry_is_said_once_by_threads_compiling_side_by_side(own_cache, capsys, monkeypatch, tmp_path):
    """A shape's programs compile in threads, and each may meet a damaged entry: the check of 'said' and its mark
    were apart, and two threads both printed (2 of 12 sweeps)."""
    import sys
    import threading
    import time

    compile_cache.use(str(tmp_path / "cache"))
    write = sys.stderr.write
    monkeypatch.setattr(sys.stderr, "write", lambda text: (time.sleep(0.02), write(text))[1])  # a slow terminal
    threads = [threading.Thread(target=compile_cache.damaged, args=(f"jit_program{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(capsys.readouterr().err.splitlines()) == 1
