"""A run dir, a checkpoint or a config file never names code to import (issue 41, item 5): a model given as
`module:Class` in a run's config.json, or in its checkpoints' metadata alone, was imported with the current folder on
the path, so a run dir under ./runs/ could ship its own module, which zoo.export, zoo.audit RUN and --fork-from ran.
Every reader refuses it in one line that says which flag allows it; the flag does."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from cli_utils import TINY, metadata_files, one_line_error, saved_run

import zoo.models
import zoo.registry
from zoo.cli import audit, export, sample, train

NAME = "runs.r.payload:Net"
PAYLOAD = ("import pathlib\npathlib.Path(__file__).with_name('RAN').write_text('the payload ran')\n"
           "from zoo.models.mlp_resnet import MLPResNet as Net\n")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Path:
    """A folder whose ./runs/r is a run that names the model runs.r.payload:Net, a module the run dir ships, in its
    config.json and in its checkpoints' metadata."""
    root = tmp_path_factory.mktemp("cwd")
    run = saved_run(root / "runs" / "r")
    (run / "payload.py").write_text(PAYLOAD)
    config = json.loads((run / "config.json").read_text())
    config["model"]["name"] = NAME
    (run / "config.json").write_text(json.dumps(config))
    for f in metadata_files(run):
        meta = json.loads(f.read_text())
        meta["config"]["model"]["name"] = NAME
        f.write_text(json.dumps(meta))
    return root


@pytest.fixture
def cwd(shipped, tmp_path, monkeypatch) -> Path:
    """A copy of `shipped` as the current folder; nothing imported or allowed by a test outlives it."""
    here = tmp_path / "here"
    shutil.copytree(shipped, here)
    monkeypatch.chdir(here)
    allowed, modules = getattr(zoo.registry, "ALLOWED", set()), set(sys.modules)
    before = set(allowed)
    yield here
    allowed.intersection_update(before)
    zoo.models.MODELS.entries.pop(NAME, None)
    for name in set(sys.modules) - modules:
        if name.split(".")[0] == "runs":
            del sys.modules[name]


@pytest.mark.parametrize("named_by", ["config.json", "checkpoint"])
def test_no_reader_runs_code_a_run_dir_names(cwd, named_by, capsys):
    """zoo.export, zoo.audit, zoo.sample and --fork-from refuse in one line naming the file and --allow-import; the
    payload never runs. --init-from reads the arrays only (nothing named there is imported)."""
    if named_by == "checkpoint":
        (cwd / "runs" / "r" / "config.json").unlink()
    blamed = "runs/r/config.json" if named_by == "config.json" else "meta/metadata"
    for main, argv in ((export.main, ["runs/r", "--out", "exported"]),
                       (audit.main, ["runs/r", "--json", "audit.json"]),
                       (sample.main, ["runs/r"]),
                       (train.main, [*TINY, "--steps", "8", "--fork-from", "runs/r", "--run-dir", "fork"])):
        line = one_line_error(main, argv, capsys)
        assert blamed in line and f"names the model '{NAME}'" in line and f"--allow-import {NAME}" in line, line
        assert not (cwd / "runs" / "r" / "RAN").exists(), (main.__module__, line)
    from zoo.train.load import read_state

    read_state("runs/r", report=lambda _: None)  # what --init-from reads
    assert not (cwd / "runs" / "r" / "RAN").exists()
    assert not any(name.startswith("runs") for name in sys.modules)


def test_a_config_file_names_no_code_and_the_flag_allows_it(cwd, capsys):
    """A config file that names module:Class is refused the same way; --allow-import (or the same --model on the
    command line) runs it."""
    (cwd / "c.yaml").write_text(f"model: {NAME}\n")
    line = one_line_error(train.main, ["--config", "c.yaml", "--print-config"], capsys)
    assert "config file c.yaml names the model" in line and f"--allow-import {NAME}" in line, line
    assert not (cwd / "runs" / "r" / "RAN").exists()
    train.main(["--config", "c.yaml", "--print-config", "--allow-import", NAME])
    assert f"name: {NAME}" in capsys.readouterr().out
    assert (cwd / "runs" / "r" / "RAN").exists()  # allowed: imported
