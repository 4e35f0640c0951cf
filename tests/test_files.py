"""zoo.files: a file written atomically leaves nothing behind, even where the writer was SIGKILLed mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from zoo import files
from zoo.files import write_atomic

WRITER = """
import sys, time
from pathlib import Path
from zoo.files import atomic
with atomic(Path(sys.argv[1]), "wb") as f:
    f.write(b"x" * 4096)
    f.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    """A first run SIGKILLed while it wrote its decoded dataset into the cache left `.NAME.<random>.tmp` (up to 184
    MB), which no later run removed. The next atomic write of the same file removes those of dead processes on this
    host, and keeps a live process's and another host's (a shared file system)."""
    path = tmp_path / "data.npz"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline() == "writing\n"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    (left,) = tmp_path.glob(".data.npz.*.tmp")
    live = files.temporary(path, os.getppid()).with_suffix(".abc.tmp")
    mine = files.temporary(path, writer.pid).name  # .data.npz.HOST-PID.tmp
    host = mine[len(".data.npz."):].partition("-")[0]
    other_host = tmp_path / mine.replace(host, "0" * 8 if host != "0" * 8 else "1" * 8)
    for kept in (live, other_host):
        kept.write_bytes(b"")
    write_atomic(path, b"done", "wb")
    assert path.read_bytes() == b"done" and not left.exists()
    assert sorted(tmp_path.iterdir()) == sorted([path, live, other_host])


def test_every_name_the_file_system_takes_is_written(tmp_path):
    """The host's name in a temporary's (up to 63 characters) made names of 175 characters and more fail ('File name
    too long', naming the temporary); before, names of 242 and more did. A long name's temporaries are named by its
    hash now, so every name up to the file system's 255 bytes is written, and a killed writer's still removed."""
    for length in (200, 201, 230, 254):
        path = tmp_path / ("x" * length)
        write_atomic(path, "done")
        assert path.read_text() == "done"
    path = tmp_path / ("y" * 255)
    stale = files.temporary(path, 999999999)  # a pid no process has
    stale.write_text("")
    write_atomic(path, "done")
    assert not stale.exists() and path.read_text() == "done"


def test_a_folder_is_listed_once_a_minute_per_file_and_process(tmp_path, monkeypatch):
    """Removing dead processes' temporaries lists the folder (65 ms for 100,000 files, on every write before): it is
    done at a process's first write of a path and then at most once a minute, so that a long-lived writer (a sweep)
    still removes the temporary of another writer of the path killed since."""
    listed, clock = [], [1000.0]
    sweep = files.stale_temporaries
    monkeypatch.setattr(files, "stale_temporaries", lambda path, **kw: listed.append(path) or sweep(path, **kw))
    monkeypatch.setattr(files.time, "monotonic", lambda: clock[0])
    for _ in range(3):
        write_atomic(tmp_path / "metrics.json", "{}")
        write_atomic(tmp_path / "other.json", "{}")
    assert listed == [tmp_path / "metrics.json", tmp_path / "other.json"]
    killed = files.temporary(tmp_path / "metrics.json", 999999999)  # another writer's, SIGKILLed since
    killed.write_text("")
    clock[0] += files.SWEEP_EVERY
    write_atomic(tmp_path / "metrics.json", "{}")
    assert listed[2:] == [tmp_path / "metrics.json"] and not killed.exists()


def test_a_stop_removes_the_temporary_a_worker_thread_is_writing(tmp_path):
    """zoo.criticality writes its figure in a worker thread (zoo.cli.boundary.interruptible); a SIGTERM as it wrote
    left the process by os._exit with an empty .apjn_profile.png.*.tmp beside the folder's files. The exit now removes
    every temporary `atomic` is writing; the file itself is not made."""
    import contextlib
    import threading

    from zoo.files import abandon_writes, atomic

    started, release = threading.Event(), threading.Event()

    def write():
        with contextlib.suppress(FileNotFoundError), atomic(tmp_path / "f.png", "wb") as f:
            f.write(b"x")
            started.set()
            release.wait(10)

    worker = threading.Thread(target=write)
    worker.start()
    assert started.wait(10) and len(list(tmp_path.glob(".f.png.*.tmp"))) == 1
    abandon_writes()
    assert not list(tmp_path.iterdir())
    release.set()
    worker.join(10)
    assert not list(tmp_path.iterdir())


def test_a_folder_it_may_not_write_in_names_the_file_meant(tmp_path, monkeypatch):
    """A folder the user may not write in (a read-only sweep dir re-rendered with --report-only) was 'Permission
    denied: DIR/.sweep.png.HOST-PID.RANDOM.tmp', naming a file the user never asked for: now the file meant."""
    import tempfile

    from zoo.files import atomic

    def denied(dir, prefix, suffix):  # noqa: A002 (tempfile's own names), as a folder mode 0500 answers a non-root user
        raise PermissionError(13, "Permission denied", f"{dir}/{prefix}abc{suffix}")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(PermissionError) as e, atomic(tmp_path / "sweep.png", "wb") as f:
        f.write(b"png")
    assert e.value.filename == str(tmp_path / "sweep.png") and not list(tmp_path.iterdir())


def test_a_loop_of_links_is_one_line_where_paths_are_resolved(tmp_path, capsys):
    """Two links naming each other, given as a run to export, a source to --init-from or a sweep dir to fit: Path.
    resolve's RuntimeError ('Symlink loop') ended each in 'unexpected RuntimeError' and a traceback file."""
    from zoo.files import resolved

    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(ValueError, match=f"{tmp_path / 'a'} is a loop of symbolic links"):
        resolved(tmp_path / "a")
    assert resolved(tmp_path) == tmp_path.resolve()
    from zoo.cli.export import main

    with pytest.raises(SystemExit) as e:
        main([str(tmp_path / "a"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 1 and err == f"error: {tmp_path / 'a'} is a loop of symbolic links (each names the next, " \
        "and the last the first); give the real path", err


def test_a_link_that_leads_nowhere_is_named_by_every_output_check(tmp_path):
    """An --out, --compile-cache or --cache-dir that is (or lies below) a link to a folder not there: the coordinate
    check and criticality measured for seconds and then failed with 'File exists', naming no flag; the caches said
    'is a file, not a folder'. Each check names the link before any work."""
    from zoo.files import check_can_write_in, check_out_folder

    (tmp_path / "dang").symlink_to(tmp_path / "gone")
    for folder in (tmp_path / "dang", tmp_path / "dang" / "sub"):
        for check in (lambda f: check_out_folder(f, "--out"), lambda f: check_can_write_in(f, f"--cache-dir {f}")):
            with pytest.raises(ValueError, match=f"{tmp_path / 'dang'} is a link to {tmp_path / 'gone'}, which leads "
                                                 "nowhere"):
                check(folder)
    assert not (tmp_path / "gone").exists()
