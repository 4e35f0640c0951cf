"""Checkpoints carry a format (issue 41, item 12): what this zoo does not know in one is refused naming the field and
the format, blamed on the checkpoint, before any array is read. A newer format was refused as 'zoo before
2026-11-26' (the kernels' layout), unknown plugin options and loop fields were dropped silently, and an unknown model
option was blamed on config.json. A checkpoint without a format (before it was written) reads as it always did."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_utils import metadata_files, saved_run

from zoo.errors import CheckpointFormat
from zoo.train.checkpoint import Checkpoints
from zoo.train.load import load_run, read_state


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return saved_run(tmp_path_factory.mktemp("fmt") / "run", steps=(2,))


def _edited(run, tmp_path, edit, config_json=True):
    """A copy of `run` whose checkpoint's metadata `edit` changed (its config.json removed unless `config_json`)."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    if not config_json:
        (copy / "config.json").unlink()
    [meta_file] = metadata_files(copy)
    meta = json.loads(meta_file.read_text())
    edit(meta)
    meta_file.write_text(json.dumps(meta))
    return copy, meta_file


def test_a_checkpoint_records_its_format(run):
    from zoo.train.ckpt_format import FORMAT

    [meta_file] = metadata_files(run)
    assert json.loads(meta_file.read_text())["format"] == FORMAT


@pytest.mark.parametrize("edit, field", [
    (lambda m: m.update(format=99), "format 99, newer than this zoo's"),
    (lambda m: m.update(future_field=1), "holds future_field"),
    (lambda m: m["plugin"]["options"].update(future_option=1), "holds plugin.options.future_option"),
    (lambda m: m["config"]["param"]["options"].update(future_option=1), "holds config.param.options.future_option"),
    (lambda m: m["config"]["loop"].update(future_field=1), "holds config.loop.future_field"),
    (lambda m: m["config"]["model"]["options"].update(future_option=1), "holds config.model.options.future_option"),
])
@pytest.mark.parametrize("config_json", [True, False])
def test_what_this_zoo_does_not_know_is_refused_naming_it(run, tmp_path, edit, field, config_json):
    """Every reader (a run's resume, a fork's or an export's load_run, --init-from's read_state) refuses it naming
    the checkpoint's metadata, the field and the format; nothing is moved to corrupt/."""
    copy, meta_file = _edited(run, tmp_path, edit, config_json)
    for read in (lambda: Checkpoints(copy).restore_latest(report=print), lambda: load_run(copy, report=print),
                 lambda: read_state(copy, report=print)):
        with pytest.raises(CheckpointFormat) as refused:
            read()
        line = str(refused.value)
        assert str(meta_file) in line and field in line and "config.json" not in line, line
        assert "format" in line, line
    assert not (copy / "corrupt").exists()


def test_a_checkpoint_without_a_format_reads_as_before(run, tmp_path):
    """Before formats were written: fields a newer zoo added are not known to be newer, and are dropped."""
    def old(meta):
        meta.pop("format", None)
        meta["config"]["loop"]["future_field"] = 1

    copy, _ = _edited(run, tmp_path, old)
    assert read_state(copy, report=print)[1]["step"] == 2
    assert load_run(copy, report=print).step == 2
