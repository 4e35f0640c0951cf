"""An outside referee's inputs to the command lines, run dirs, checkpoints and data preparation that zoo's other
tests do not use: each was accepted silently, misreported or ended in a traceback before its fix."""

from __future__ import annotations

import pytest

from zoo.cli import train as train_cli


def one_line_error(main, argv, capsys) -> str:
    """The one line a CLI refused `argv` with (exit status 1 or 2, no traceback)."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    out = capsys.readouterr()
    lines = [line for line in out.err.splitlines() if line.strip()]
    assert stop.value.code in (1, 2) and len(lines) == 1 and "Traceback" not in lines[0], lines
    assert not out.out, out.out  # nothing printed as if it were the config
    return lines[0]


@pytest.mark.parametrize("mesh, why", [
    ("data=x", "'data=x' needs an integer size"), ("rows=2", "unknown axis 'rows'"),
    ("tensor=0", "axis tensor must have a positive size, got 0"), ("data=1,data=1", "axis data is given twice"),
    ("data=3", "data x fsdp x tensor = 3 must equal the 1 devices present")])
def test_print_config_refuses_a_mesh_training_would_refuse(mesh, why, capsys, monkeypatch):
    """`train.py --print-config --mesh <bad>` printed the config, the mesh refused only once training started: now
    its form is checked with the config (also in a config file) and its size against the devices here (1 CPU
    device in tests), each in one line; a mesh that fits prints."""
    monkeypatch.delenv("JAX_COORDINATOR_ADDRESS", raising=False)
    assert why in one_line_error(train_cli.main, ["--print-config", "--mesh", mesh], capsys)
    train_cli.main(["--print-config", "--mesh", "data=1,tensor=1"])
    assert "mesh: data=1,tensor=1" in capsys.readouterr().out


def test_a_config_file_with_a_bad_mesh_is_refused(tmp_path, capsys):
    file = tmp_path / "run.yaml"
    file.write_text("loop: {mesh: 'fsdp=two'}\n")
    argv = ["--print-config", "--config", str(file)]
    assert "'fsdp=two' needs an integer size" in one_line_error(train_cli.main, argv, capsys)
