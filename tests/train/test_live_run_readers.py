"""A reader of a run that is still training (issue 41, item 9): the run saves a checkpoint and removes its oldest
(--keep) between the reader's listing of the steps and its reads. zoo.sample of a --keep 1 run and zoo.export of a
--keep 2 fork called those good checkpoints unreadable ('no checkpoint ... can be read ... move them away') or read an
older one; a reader lists the steps again and reads the newest, and never advises moving a run's checkpoints away."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_utils import saved_run

from zoo.errors import CheckpointError
from zoo.train.checkpoint import Checkpoints
from zoo.train.load import load_run, read_state


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return saved_run(tmp_path_factory.mktemp("live") / "run", steps=(2, 4))


@pytest.fixture
def live(run, tmp_path, monkeypatch):
    """A copy of `run` kept at 1 checkpoint (4), which, once a reader starts reading a checkpoint's arrays, 'saves'
    step 6 and removes step 4, as a run training with --keep 1 does."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    shutil.rmtree(copy / "checkpoints" / "2")
    spare = tmp_path / "spare6"
    shutil.copytree(copy / "checkpoints" / "4", spare)
    meta_file = spare / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    meta["step"] = meta["data_position"] = 6
    meta_file.write_text(json.dumps(meta))
    original = Checkpoints.restore

    def restore(self, step, *args, **kwargs):
        if step == 4 and (copy / "checkpoints" / "4").exists():
            shutil.move(spare, copy / "checkpoints" / "6")
            shutil.rmtree(copy / "checkpoints" / "4")
        return original(self, step, *args, **kwargs)

    monkeypatch.setattr(Checkpoints, "restore", restore)
    return copy


def test_a_reader_reads_the_checkpoint_saved_while_it_listed(live):
    lines = []
    assert read_state(live, report=lines.append)[1]["step"] == 6
    assert not lines, lines


def test_a_fork_or_an_export_reads_the_newest_too(live):
    lines = []
    assert load_run(live, report=lines.append).step == 6
    assert not lines, lines


def test_a_reader_never_advises_moving_a_run_s_checkpoints_away(run, tmp_path):
    """Where none reads (here all are damaged), the reader's line does not tell the user to move them: the run
    that owns them may be training; its own resume moves them aside."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    for data in (copy / "checkpoints").glob("*/state/*"):
        if data.is_dir():
            shutil.rmtree(data)
    with pytest.raises(CheckpointError) as refused:
        read_state(copy, report=lambda _: None)
    assert "can be read" in str(refused.value) and "move them" not in str(refused.value), refused.value
