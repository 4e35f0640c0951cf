"""One process per directory (zoo.train.lock): a lock its owner removed is taken again on the file now at the path,
and a run refused by the lock leaves the holder's new run dir alone."""

from __future__ import annotations

import os

import pytest


def test_a_lock_removed_by_its_owner_is_taken_on_the_file_now_there(tmp_path, monkeypatch):
    """A prepare removes its lock file as it finishes; a process that opened that file just before and locks it
    just after would hold a lock on a removed file, which excludes no one (a third process locks a new .lock).
    The lock is then taken again on the file at the path."""
    import fcntl
    import os

    from zoo.train import lock

    flock, calls = fcntl.flock, []

    def owner_removes_it_first(fd: int, op: int) -> None:
        if not calls:
            (tmp_path / ".lock").unlink()  # the owner finished between our open and our lock
        calls.append(op)
        flock(fd, op)

    monkeypatch.setattr(lock.fcntl, "flock", owner_removes_it_first)
    with lock.claim(tmp_path, what="prepare", flag="--out") as held:
        assert os.path.samestat(os.fstat(held.fd), os.stat(tmp_path / ".lock"))
    assert calls.count(fcntl.LOCK_EX | fcntl.LOCK_NB) == 2  # taken on the removed file, then on the new one


def test_a_run_refused_by_the_lock_leaves_the_holders_new_dir_alone(tmp_path, monkeypatch):
    """Two runs started at once into one new --run-dir: the second found the dir missing, then found it locked by
    the first, and, as a refused run removes the dir it 'made', deleted the first's run dir (its lock with it)
    while the first trained on. A run refused by the lock now removes nothing."""
    from zoo.config import resolve
    from zoo.errors import RunLocked
    from zoo.train import lock, run

    path = tmp_path / "new" / "run"
    held = []

    def first_takes_it(directory, *args, **kwargs):  # the first run claims the dir between our look and our claim
        held.append(lock.claim(directory))
        return lock.claim(directory, *args, **kwargs)

    monkeypatch.setattr(run, "claim", first_takes_it)
    with pytest.raises(RunLocked, match="is in use by another run"):
        run.Run.open(resolve({"model": "mlp_resnet", "run_dir": str(path)}))
    assert (path / ".lock").is_file() and os.path.samestat(os.fstat(held[0].fd), os.stat(path / ".lock"))
    held[0].release()


def test_a_link_to_a_folder_not_there_is_named(tmp_path):
    """A --run-dir or --out that is (or lies below) a link to nothing: mkdir failed with 'File exists' of a folder not
    there. One line names the link and its target; with the target made, the link is the folder."""
    from zoo.train.lock import claim

    (tmp_path / "link").symlink_to(tmp_path / "gone")
    for out in (tmp_path / "link", tmp_path / "link" / "sub"):
        with pytest.raises(ValueError, match=f"--out {out}: {tmp_path / 'link'} is a link to {tmp_path / 'gone'}, "
                                             "which leads nowhere"):
            claim(out, flag="--out")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(ValueError, match="loop is a link to .*loop, which leads nowhere .*or links loop"):
        claim(tmp_path / "loop", flag="--out")
    (tmp_path / "gone").mkdir()
    claim(tmp_path / "link", flag="--out").release()
    assert (tmp_path / "gone" / ".lock").exists()
