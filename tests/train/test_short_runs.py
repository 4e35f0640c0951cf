"""A run of at most SHORT_RUN_FLOPS of training (its horizon times one step's floating-point operations, as XLA
counts them) compiles its train and eval programs with RUN_ONCE (zoo.train.step.Program.compile_options), train.py
and a sweep's members by the same count."""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
import pytest

import zoo.data
from zoo.config import resolve
from zoo.sweeps.engine import MemberTrainer
from zoo.train.compiled import abstract_batch
from zoo.train.setup import setup
from zoo.train.step import RUN_ONCE, SHORT_RUN_FLOPS, flops_of

DATA = zoo.data.load("synthetic")


def run_setup(**settings):
    return setup(resolve({"model": "mlp_resnet", "width": 16, "depth": 2, "data": "synthetic", "batch_size": 8,
                          **settings}), DATA)


def step_flops(s) -> float:
    state = jax.eval_shape(s.program.init, jax.random.PRNGKey(0))
    return flops_of(jax.jit(s.program.train_step).lower(state, abstract_batch(s)))


def test_the_horizon_times_a_steps_flops_sets_the_options():
    """At the threshold RUN_ONCE, one step past it none; accumulation counts each microbatch; no count, no horizon:
    none."""
    s = run_setup(steps=3)
    flops = step_flops(s)
    assert flops > 0
    last = math.floor(SHORT_RUN_FLOPS / flops)
    short, long = (dataclasses.replace(s.program, horizon=h) for h in (last, last + 1))
    assert short.compile_options(flops) == RUN_ONCE and long.compile_options(flops) is None
    assert dataclasses.replace(short, grad_accum=2).compile_options(flops) is None
    assert short.compile_options(None) is None and dataclasses.replace(s.program, horizon=None).compile_options(1) \
        is None


@pytest.mark.parametrize("vmapped", [False, True])
def test_a_sweep_member_counts_the_step_as_train_py_does(vmapped):
    """The members' train program (a loop over a group of vmapped members) takes RUN_ONCE for a short run and not for a
    long one (5% past the threshold), as the count of train.py's step says (the two counts differ by less: the loop
    and the vmap add or fold a few operations)."""
    flops = step_flops(run_setup(steps=3))
    for steps, expected in ((3, RUN_ONCE), (int(SHORT_RUN_FLOPS / flops * 1.05), None)):
        trainer = MemberTrainer(run_setup(steps=steps).program, DATA, 8, chunk=2, vmapped=vmapped)
        members = 4 if vmapped else 1
        trainer.prepare(np.full(members, 1e-3), np.zeros(members, int), steps, evaluate=False)
        assert trainer._options == expected, steps
