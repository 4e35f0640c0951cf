"""Referee checks of the models, "Bring your own model" tagging and the diagnostics, fourth round: images that patches
do not divide, tables whose row count equals the depth, rules that give a leaf its layout, at shapes the other tests
do not use."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv,flag", [(["--width", "100"], "--width"), (["--base-width", "48"], "--base-width"),
                                       (["--width", "16", "--base-width", "32"], "--width")])
def test_the_haiku_transformer_example_refuses_a_width_of_partial_heads_in_one_line(argv, flag, capsys):
    """The example cuts the width into heads of 32: --width 100 (3 heads and 4 left over), --base-width 48 or
    --width 16 ended in 'unexpected TypeError: cannot reshape array of shape (1, 64, 100) into shape
    (1, 64, 3, 32)' with a traceback file. Now the flag is refused: one line, exit status 2."""
    from param_helpers import example

    with pytest.raises(SystemExit) as done:
        example("haiku_transformer").main([*argv, "--steps", "1"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: argument {flag}: expected a multiple of the head dim 32, got"), err
