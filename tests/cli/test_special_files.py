"""zoo reads and writes regular files only (issue 41, items 8 and 16): a file it opens to write is never a symbolic
link (a `.lock` that linked to a file outside the run was followed and truncated to 0 bytes, in train.py, zoo.sweep
--out and zoo.data.prepare --out) nor a FIFO or a device, and a path it reads is checked to be a regular file first
(`--data imagefolder:/dev/zero` hung; `--config /dev/zero`, a FIFO and `text:/dev/zero` were 'does not exist')."""

from __future__ import annotations

import os
import time

import pytest
from cli_utils import SMALL, TINY, one_line_error, run_main_many

from zoo.cli import train
from zoo.files import write_atomic
from zoo.sweeps.results import open_dir
from zoo.train.lock import claim

SECRET = "data outside the run dir\n"


@pytest.fixture
def outside(tmp_path):
    """A file outside every folder a command writes, which a link in one points at."""
    target = tmp_path / "outside.txt"
    target.write_text(SECRET)
    return target


def test_a_lock_that_is_a_link_is_refused_and_its_target_kept(tmp_path, outside):
    """The lock of a run dir, a sweep's --out and a prepare's --out (one RunLock): refused in one line, the file it
    links to intact."""
    for folder, take in (("run", lambda d: claim(d)), ("sweep", lambda d: open_dir(d)),
                         ("prepare", lambda d: claim(d, what="prepare", flag="--out"))):
        directory = tmp_path / folder
        directory.mkdir()
        (directory / ".lock").symlink_to(outside)
        with pytest.raises(ValueError, match="symbolic link"):
            take(directory)
        assert outside.read_text() == SECRET, folder


def test_train_refuses_a_linked_lock_or_run_file(tmp_path, outside, capsys):
    """train.py itself: a run dir whose .lock or metrics.jsonl links elsewhere is one line before any step."""
    for name in (".lock", "metrics.jsonl"):
        run = tmp_path / f"run-{name}"
        run.mkdir()
        (run / name).symlink_to(outside)
        line = one_line_error(train.main, [*TINY, "--steps", "2", "--run-dir", str(run)], capsys)
        assert "symbolic link" in line and name in line, line
        assert outside.read_text() == SECRET


def test_files_written_whole_refuse_links_and_special_files(tmp_path, outside):
    from zoo.files import NotAFile, open_regular

    link = tmp_path / "link.json"
    link.symlink_to(outside)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (link, fifo):
        with pytest.raises(NotAFile):
            write_atomic(path, "{}")
        with pytest.raises(NotAFile):
            open_regular(path, "a")
    assert outside.read_text() == SECRET and link.is_symlink()
    start = time.perf_counter()
    with pytest.raises(NotAFile, match="FIFO"):  # opening a FIFO to read blocks until a writer comes
        open_regular(fifo, "rb")
    assert time.perf_counter() - start < 1


def test_special_files_given_to_read_are_one_line_at_once(tmp_path):
    """Each in one line naming it and what it is, without reading (through train.py's main, in one process)."""
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    cases = [(["--config", "/dev/zero"], "config file /dev/zero is not a regular file but a character device"),
             (["--config", str(fifo)], f"config file {fifo} is not a regular file but a FIFO"),
             ([*SMALL, "--data", "text:/dev/zero", "--steps", "1", "--run-dir", str(tmp_path / "a")],
              "text:/dev/zero is not a regular file but a character device"),
             ([*SMALL, "--data", f"text:{fifo}", "--steps", "1", "--run-dir", str(tmp_path / "b")],
              "is not a regular file but a FIFO"),
             ([*SMALL, "--data", "imagefolder:/dev/zero", "--steps", "1", "--run-dir", str(tmp_path / "c")],
              "imagefolder:/dev/zero is not a regular file but a character device")]
    results = run_main_many([argv for argv, _ in cases], timeout=120)
    for (argv, needle), (code, err) in zip(cases, results, strict=True):
        lines = err.strip().splitlines()
        assert code == 1 and len(lines) == 1 and needle in lines[0], (argv, err)
    assert not any((tmp_path / d).exists() for d in "abc")
