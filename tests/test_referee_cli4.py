"""An outside referee's inputs to the command lines, run dirs, checkpoints and data preparation that zoo's other
tests do not use: each was accepted silently, misreported or ended in a traceback before its fix."""

from __future__ import annotations

import pytest
from cli_utils import one_line_error

from zoo.cli import train as train_cli


@pytest.mark.parametrize("mesh, why", [
    ("data=x", "'data=x' needs an integer size"), ("rows=2", "unknown axis 'rows'"),
    ("tensor=0", "axis tensor must have a positive size, got 0"), ("data=1,data=1", "axis data is given twice"),
    ("tensor=1000003", "data x fsdp x tensor = 1000003 must equal the")])
def test_print_config_refuses_a_mesh_training_would_refuse(mesh, why, capsys, monkeypatch):
    """`train.py --print-config --mesh <bad>` printed the config, the mesh refused only once training started: now
    its form is checked with the config (also in a config file) and its size against the devices here, each in
    one line; a mesh that fits any device count (data takes what the others leave) prints."""
    monkeypatch.delenv("JAX_COORDINATOR_ADDRESS", raising=False)
    assert why in one_line_error(train_cli.main, ["--print-config", "--mesh", mesh], capsys)
    train_cli.main(["--print-config", "--mesh", "fsdp=1,tensor=1"])
    assert "mesh: fsdp=1,tensor=1" in capsys.readouterr().out


def test_a_config_file_with_a_bad_mesh_is_refused(tmp_path, capsys):
    file = tmp_path / "run.yaml"
    file.write_text("loop: {mesh: 'fsdp=two'}\n")
    argv = ["--print-config", "--config", str(file)]
    assert "'fsdp=two' needs an integer size" in one_line_error(train_cli.main, argv, capsys)


def test_an_empty_config_or_fork_run_dir_is_refused(tmp_path, capsys, monkeypatch):
    """`train.py --config ""` (an unset shell variable) trained with no config file at all, silently, into the
    default run dir; `--fork-from :3` (the same, before a step) looked for the run in the current folder. Both are
    one line now, and nothing is written."""
    monkeypatch.chdir(tmp_path)
    line = one_line_error(train_cli.main, ["--config", "", "--steps", "1"], capsys)
    assert "argument --config: must not be empty" in line
    tiny = ["--width", "8", "--depth", "1", "--data", "synthetic:teacher", "--batch-size", "8", "--steps", "5"]
    line = one_line_error(train_cli.main, [*tiny, "--fork-from", ":3", "--run-dir", "fork"], capsys)
    assert line == "error: --fork-from :3 names no run dir before its step; give RUN_DIR:3"
    assert list(tmp_path.iterdir()) == []
