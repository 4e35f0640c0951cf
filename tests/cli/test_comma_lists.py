"""A comma list with an empty entry (`1e-3,,2e-3`, `16,32,`) is refused in one line wherever one is read: a value
left out there was dropped silently, and the sweep trained fewer members than the user listed."""

from __future__ import annotations

import pytest
from cli_utils import TINY, one_line_error

from zoo.cli import coord_check as coord_check_cli
from zoo.cli import sweep as sweep_cli
from zoo.cli import train as train_cli
from zoo.sweeps.grid import parse_ints, parse_lrs


@pytest.mark.parametrize("text", ["1e-3,,2e-3", "1e-3,2e-3,", ",2^-8", " , "])
def test_learning_rates_with_a_gap_are_refused(text):
    with pytest.raises(ValueError, match="the learning rates .* has an empty entry"):
        parse_lrs(text)


def test_widths_with_a_gap_are_refused():
    with pytest.raises(ValueError, match="--widths must be a comma list of integers"):
        parse_ints("16,,32", "--widths")
    assert parse_ints(" 32, 16 ", "--widths") == [16, 32]


def test_the_command_lines_refuse_a_gap(capsys, tmp_path):
    line = one_line_error(sweep_cli.main, ["--out", str(tmp_path / "s"), "--lrs", "2^-8,,2^-6"], capsys)
    assert "error: the learning rates '2^-8,,2^-6' has an empty entry" in line
    line = one_line_error(coord_check_cli.main, ["--widths", "16,,32", "--out", str(tmp_path / "c")], capsys)
    assert "argument --widths: expected comma-separated integers, got '16,,32'" in line
    line = one_line_error(train_cli.main, [*TINY, "--param", "mup", "--param-opt", "freeze=readout,,embedding",
                                           "--run-dir", str(tmp_path / "r")], capsys)
    assert "freeze 'readout,,embedding' has an empty entry" in line
    line = one_line_error(sweep_cli.main, ["--out", str(tmp_path / "s"), "--lrs", "1e-3", "--widths", ""], capsys)
    assert "--widths must be a comma list of integers, got ''" in line  # was the model's width, as if not given
    assert not any(tmp_path.iterdir())
