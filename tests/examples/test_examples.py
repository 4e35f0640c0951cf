"""The examples/ scripts run as documented: each trains its model on the bundled data under a zoo plugin and prints
its loss (a few steps at small widths here); a bad flag or size is one line with exit status 1 or 2, before any model
is built."""

from __future__ import annotations

import numpy as np
import pytest
from param_helpers import example

RUNS = {
    "haiku_mlp": ["--width", "64", "--base-width", "32", "--depth", "1", "--batch-size", "32"],
    "linen_mlp": ["--width", "64", "--base-width", "32", "--depth", "1", "--batch-size", "32"],
    "equinox_mlp": ["--width", "64", "--base-width", "32", "--depth", "1", "--batch-size", "32"],
    "haiku_transformer": ["--width", "64", "--base-width", "32", "--depth", "4", "--base-depth", "2",
                          "--batch-size", "4"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_example_trains_and_prints_its_loss(name, capsys):
    """Five steps: a line per step with the train loss, finite, and below the first step's loss (ln 10 = 2.30 for
    CIFAR-10, ln 65 = 4.17 for the characters at init)."""
    loss = example(name).main([*RUNS[name], "--steps", "5"])
    lines = [line for line in capsys.readouterr().out.splitlines() if "train loss" in line]
    first = float(lines[0].split("train loss ")[1].split()[0])
    assert len(lines) == 5 and np.isfinite(loss) and loss < first, lines


def test_an_example_given_a_bad_flag_says_one_line():
    """The examples are commands a user runs: `--param foo` printed a traceback (zoo.registry's ValueError at its
    end); they now run in zoo's error boundary, one line on stderr and exit status 1."""
    import subprocess
    import sys

    from cli_utils import ROOT

    script = ROOT / "examples" / "haiku_mlp.py"
    done = subprocess.run([sys.executable, str(script), "--param", "foo", "--steps", "1"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.startswith("error: unknown parametrization 'foo'"), done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr


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
