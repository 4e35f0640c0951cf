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


def test_a_failure_while_a_compile_runs_ahead_leaves_at_once(monkeypatch, capsys):
    """A sweep that failed (a full disk) while its next shape compiled in the background crashed after its error
    line in 2 of 5 runs (a segfault, or 'FATAL: exception not rethrown': the interpreter's teardown stopped the
    thread inside XLA). With a thread of zoo's still compiling, the boundary leaves with os._exit(1) after the line;
    with none, it raises SystemExit(1) as before."""
    import threading

    import zoo.cli.boundary
    from zoo.cli.boundary import boundary

    left = []
    monkeypatch.setattr(zoo.cli.boundary.os, "_exit", lambda status: left.append(status))
    release = threading.Event()
    ahead = threading.Thread(target=release.wait, name="zoo-compile-ahead", daemon=True)

    @boundary
    def main(argv: list[str] | None = None) -> None:
        ahead.start()
        raise ValueError("no space left")

    try:
        with pytest.raises(SystemExit):
            main()
    finally:
        release.set()
        ahead.join()
    assert left == [1] and capsys.readouterr().err == "error: no space left\n"
    with pytest.raises(SystemExit) as e:
        boundary(lambda: (_ for _ in ()).throw(ValueError("no space left")))()
    assert e.value.code == 1 and left == [1]


def test_matplotlibs_log_lines_stay_off_the_terminal():
    """Where matplotlib cannot make its config folder (a HOME that cannot be written), its two log lines ('mkdir -p
    failed', 'created a temporary cache directory') reached the terminal of zoo.fit and a sweep's report: stderr
    held them, and 3 lines with an error after. Its logger is quiet in every command, as the other libraries' are."""
    import logging

    from zoo.errors import quiet_libraries

    quiet_libraries()  # what every command's boundary does first
    assert not logging.getLogger("matplotlib").isEnabledFor(logging.WARNING)
