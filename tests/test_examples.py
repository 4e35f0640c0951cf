"""The examples/ scripts run as documented: each trains its model on the bundled data under a zoo plugin and prints
its loss (a few steps at small widths here)."""

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
