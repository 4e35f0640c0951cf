"""An outside referee's inputs to the command lines, run dirs, resume, finetune, export, sample and data
preparation that zoo's other tests do not use: each was misreported, accepted silently or ended in a traceback
before its fix."""

from __future__ import annotations

import pytest


def test_an_empty_criticality_out_is_a_bad_command_line(tmp_path, monkeypatch, capsys):
    """`python -m zoo.criticality --out ""` (an unset shell variable) wrote criticality.json into the current folder,
    where every other command refuses an empty path in one line."""
    from zoo.cli import criticality

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        criticality.main(["--width", "8", "--depth", "2", "--seeds", "1", "--out", ""])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and len(err.splitlines()) == 1 and "--out" in err and "empty" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tool, flag", [("zoo.cli.coord_check", "--out"), ("zoo.cli.audit", "--json")])
def test_an_empty_output_path_is_refused_by_every_tool(tool, flag, capsys):
    """coord_check's --out and the audit's --json took '' (an unset shell variable) as the current folder, where the
    other tools refuse it in one line: they now take the same path_arg."""
    import importlib

    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(tool).parser().parse_args([flag, ""])
    assert exit_.value.code == 2
    assert f"argument {flag}: must not be empty" in capsys.readouterr().err
