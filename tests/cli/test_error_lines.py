"""An error line names the file and keeps its reason, and shows no more of a file than a key's name (issue 41, items
10, 11, 13 and 15): a run dir path of ~390 characters or with a newline cut the reason out of the line; a deeply
nested config was 'unexpected RecursionError'; `--config /etc/shadow` printed its first entry; `zoo.coord_check --out
FILE` measured for 9-18 s before refusing a file where its folder goes."""

from __future__ import annotations

import pytest
from cli_utils import one_line_error

from zoo.cli import coord_check, sample, train

REASON = "is not valid JSON"


@pytest.mark.parametrize("name", ["d" * 200 + "/" + "e" * 190, "run\nwith a newline"])
def test_a_long_or_odd_run_dir_keeps_the_reason(tmp_path, name, capsys):
    run = tmp_path / name
    run.mkdir(parents=True)
    (run / "config.json").write_text("{not json")
    line = one_line_error(sample.main, [str(run)], capsys)
    assert REASON in line and line.endswith("use another run dir"), line
    assert "\\n" in line if "\n" in name else "..." in line and len(line) < 400, line


@pytest.mark.parametrize("suffix, text", [(".yaml", "model_opt:\n  a: " + "[" * 900 + "]" * 900 + "\n"),
                                          (".json", '{"model_opt": {"a": ' + "[" * 5000 + "]" * 5000 + "}}")])
def test_a_deeply_nested_config_is_one_line_naming_it(tmp_path, suffix, text, capsys):
    path = tmp_path / f"deep{suffix}"
    path.write_text(text)
    line = one_line_error(train.main, ["--config", str(path), "--print-config"], capsys)
    assert f"config file {path} nests its values deeper" in line, line


def test_a_file_given_as_config_by_mistake_is_not_echoed(tmp_path, capsys):
    """A shadow-like file (one YAML key: its whole first line) and a key in a part: neither is printed."""
    secret = "root:$6$saltsalt$HASHHASHHASHHASH:19000:0:99999:7:::"
    (tmp_path / "shadow").write_text(f"{secret}\ndaemon:*:19000:0:99999:7:::\n")
    (tmp_path / "nested.yaml").write_text(f'optim:\n  "{secret}": 1\n')
    for name in ("shadow", "nested.yaml"):
        line = one_line_error(train.main, ["--config", str(tmp_path / name), "--print-config"], capsys)
        assert str(tmp_path / name) in line and "$6$" not in line and "HASH" not in line, line
    (tmp_path / "typo.yaml").write_text("widht: 32\n")  # a key that is a name is still shown
    assert "widht" in one_line_error(train.main, ["--config", str(tmp_path / "typo.yaml")], capsys)


def test_coord_check_refuses_a_file_as_out_before_measuring(tmp_path, monkeypatch, capsys):
    import zoo.diagnostics.coord_sweep

    def measured(*args, **kwargs):
        raise AssertionError("it measured before refusing --out")

    monkeypatch.setattr(zoo.diagnostics.coord_sweep, "coord_sweep", measured)
    (tmp_path / "out").write_text("a file")
    line = one_line_error(coord_check.main, ["--out", str(tmp_path / "out")], capsys)
    assert "--out" in line and "is a file, not a directory" in line, line


def test_a_run_dir_whose_config_nests_too_deep_is_one_line(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text('{"model": ' + "[" * 5000 + "]" * 5000 + "}")
    line = one_line_error(sample.main, [str(tmp_path / "run")], capsys)
    assert f"{tmp_path / 'run' / 'config.json'} nests its values too deep" in line, line
