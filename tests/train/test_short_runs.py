"""A run of at most SHORT_RUN steps compiles its programs with RUN_ONCE (zoo.train.step.Program.compile_options): its
horizon, however it was given, sets the options, for train.py and a sweep's members alike."""

from __future__ import annotations

import pytest

import zoo.data
from zoo.config import resolve
from zoo.sweeps.engine import MemberTrainer
from zoo.train.setup import setup
from zoo.train.step import RUN_ONCE, SHORT_RUN

DATA = zoo.data.load("synthetic")


def program(**settings):
    return setup(resolve({"model": "mlp_resnet", "width": 16, "depth": 2, "data": "synthetic", "batch_size": 8,
                          **settings}), DATA).program


@pytest.mark.parametrize("steps,expected", [(1, RUN_ONCE), (SHORT_RUN, RUN_ONCE), (SHORT_RUN + 1, None)])
def test_the_horizon_sets_the_compile_options(steps, expected):
    prog = program(steps=steps)
    assert prog.horizon == steps and prog.compile_options == expected
    assert MemberTrainer(prog, DATA, 8)._options == expected


def test_a_horizon_in_epochs_counts_its_steps():
    """One epoch of the synthetic set at batch 8 is more than SHORT_RUN steps: compiled for speed of running."""
    prog = program(epochs=1)
    assert prog.horizon > SHORT_RUN and prog.compile_options is None
