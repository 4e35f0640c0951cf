"""The abcd plugin's table from a file (--param-opt file=rules.yaml): exponents read as numbers, a file that is no
table (or an empty path) refused in one line, and a run that records the file's exponents, not its path."""

from __future__ import annotations

import pytest

import zoo.param as P


@pytest.mark.parametrize("text, message", [
    ("hidden: [0, 0.5\n", "cannot be read as YAML"),  # was: unexpected ParserError and a traceback file
    ("hidden: [0, 0.5, 1, 1]\nhidden: [0, 0, 1, 1]\n", "given twice"),  # was: the last one, silently
    ("hidden: [0, 0.5, 1, true]\n", "four numbers"),  # was: d = True read as 1
    ("hidden: 1\n", "four numbers"),  # was: TypeError (len of an int)
])
def test_an_abcd_file_that_is_no_table_is_one_line(tmp_path, text, message):
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        P.get("abcd", file=str(path))


def test_an_empty_abcd_file_path_is_refused():
    """file= with an empty path (an unset shell variable, --param-opt file=$RULES) was skipped: the run trained under
    SP's table (no muP rule on any kind) without a word."""
    with pytest.raises(ValueError, match="names no file"):
        P.get("abcd", file="")


def test_an_abcd_file_reads_exponents_as_numbers(tmp_path):
    """1e0 is a number, as in config files (YAML 1.1's safe_load read it as the string '1e0' and refused the row)."""
    path = tmp_path / "rules.json"
    path.write_text('{"hidden": [0, 0.5, 1e0, 1], "output": [1, 0, 0, 1]}')
    plugin = P.get("abcd", file=str(path))
    assert plugin.table_for("hidden") == (0, 0.5, 1.0, 1) and plugin.table_for("output") == (1, 0, 0, 1)
    assert plugin.table_for("input") == (0, 0, 0, 0)  # not given: SP's


def test_a_run_records_an_abcd_files_exponents_not_its_path(tmp_path):
    """A run under `--param-opt file=rules.yaml` recorded the path: the same command after the file was edited
    resumed the run under other rules without a word, and its config.json no longer said which. The config now holds
    the file's exponents (the flags' kinds winning, as they do over the file) and no path: the edited file is other
    settings, refused in one line, and the run's own config rebuilds it with the file gone."""
    import json

    from cli_utils import SMALL, run_train

    rules = tmp_path / "rules.yaml"
    rules.write_text("hidden: [0, 0.5, 1, 1]\noutput: [0, 1, 1, 1]\n")
    run = tmp_path / "run"
    args = [*SMALL, "--param", "abcd", "--param-opt", f"file={rules}", "--param-opt", "input=0,0,0,1", "--steps", "2",
            "--run-dir", str(run)]
    done = run_train(args)
    assert done.returncode == 0, done.stderr
    options = json.loads((run / "config.json").read_text())["param"]["options"]
    assert options == {"input": [0, 0, 0, 1], "hidden": [0, 0.5, 1, 1], "output": [0, 1, 1, 1]}
    rules.write_text("hidden: [0, 0, 1, 1]\noutput: [0, 1, 1, 1]\n")
    edited = run_train(args)
    assert edited.returncode == 1 and "holds a run with other settings (param_opt" in edited.stderr, edited.stderr
    rules.unlink()
    again = run_train(["--config", str(run / "config.json"), "--run-dir", str(run)])
    assert again.returncode == 0, again.stderr
