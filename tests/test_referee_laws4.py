"""Referee pass 4 over the laws, the optimizers and the audit, at settings the other tests do not use: each test fails
without the fix it names."""

from __future__ import annotations

import pytest

import zoo.param as P


@pytest.mark.parametrize("text, message", [
    ("hidden: [0, 0.5\n", "cannot be read as YAML or JSON"),  # was: unexpected ParserError and a traceback file
    ("hidden: [0, 0.5, 1, 1]\nhidden: [0, 0, 1, 1]\n", "given twice"),  # was: the last one, silently
    ("hidden: [0, 0.5, 1, true]\n", "four numbers"),  # was: d = True read as 1
    ("hidden: 1\n", "four numbers"),  # was: TypeError (len of an int)
])
def test_an_abcd_file_that_is_no_table_is_one_line(tmp_path, text, message):
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        P.get("abcd", file=str(path))


def test_an_abcd_file_reads_exponents_as_numbers(tmp_path):
    """1e0 is a number, as in config files (YAML 1.1's safe_load read it as the string '1e0' and refused the row)."""
    path = tmp_path / "rules.json"
    path.write_text('{"hidden": [0, 0.5, 1e0, 1], "output": [1, 0, 0, 1]}')
    plugin = P.get("abcd", file=str(path))
    assert plugin.table_for("hidden") == (0, 0.5, 1.0, 1) and plugin.table_for("output") == (1, 0, 0, 1)
    assert plugin.table_for("input") == (0, 0, 0, 0)  # not given: SP's
