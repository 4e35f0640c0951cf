"""Referee checks of "Bring your own model", third round: gains and biases named as such over size-1 axes (Haiku's
BatchNorm NCHW and NHWC, a stack of one layer's gain), a depth equal to a conv kernel's size, tied embeddings, and
layer types the other tests do not use (GRU and LSTM cells, fused and separate attention, grouped convs, small
vocabularies, a readout to one output), at widths and depths the other tests do not use."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("name,argv,needle", [
    ("haiku_mlp", ["--steps", "0"], "error: argument --steps: expected a positive integer, got '0'"),
    ("linen_mlp", ["--batch-size", "-1"], "error: argument --batch-size: expected a positive integer, got '-1'"),
    ("equinox_mlp", ["--base-width", "-4"], "error: argument --base-width: expected a positive integer, got '-4'"),
    ("haiku_transformer", ["--depth", "0"], "error: argument --depth: expected a positive integer, got '0'"),
    ("haiku_mlp", ["--stepz", "3"], "error: unrecognized arguments: --stepz 3"),
    ("equinox_mlp", ["--depth", "-1"], "error: argument --depth: expected a positive integer, got '-1'"),
    ("linen_mlp", ["--lr", "nan"], "error: argument --lr: expected a finite number, got 'nan'"),
    ("haiku_mlp", ["--lr=-1e-3"], "error: argument --lr: expected a positive number, got '-1e-3'"),
])
def test_an_example_given_a_bad_size_says_one_line_before_it_builds_anything(name, argv, needle, capsys):
    """--steps 0 (or -3) trained nothing, printed nothing and exited 0 (its mean loss of no steps NaN);
    --base-width -4 ended in "unexpected TypeError: Only non-negative indices are allowed when broadcasting static
    shapes" (Haiku building the model at width -4); a bad flag printed argparse's usage over several lines. Now
    zoo's command-line parser: one line, exit status 2."""
    from param_helpers import example

    with pytest.raises(SystemExit) as done:
        example(name).main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(needle) and err.count("\n") == 1, err
