"""A short run of a small model (at most SHORT_RUN steps of at most SMALL_STEP_FLOPS each, as XLA counts the lowered
step) compiles its train and eval programs with run_once_options() (zoo.train.step.Program.compile_options), train.py
and a sweep's members by the same count."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import zoo.data
from zoo.config import resolve
from zoo.sweeps.engine import MemberTrainer
from zoo.train.compiled import abstract_batch
from zoo.train.setup import setup
from zoo.train.step import SHORT_RUN, SMALL_STEP_FLOPS, flops_of, run_once_options

DATA = zoo.data.load("synthetic")


def run_setup(**settings):
    return setup(resolve({"model": "mlp_resnet", "width": 16, "depth": 2, "data": "synthetic", "batch_size": 8,
                          **settings}), DATA)


def step_flops(s) -> float:
    state = jax.eval_shape(s.program.init, jax.random.PRNGKey(0))
    return flops_of(jax.jit(s.program.train_step).lower(state, abstract_batch(s)))


def test_the_horizon_and_a_steps_flops_set_the_options():
    """SHORT_RUN steps of a small step: run_once_options(); one step more, a step past SMALL_STEP_FLOPS (accumulation
    counts each microbatch), no count or no horizon: none. A long run never counts its step (the count converts the
    program to HLO)."""
    prog = run_setup(steps=SHORT_RUN).program
    flops = step_flops(run_setup(steps=3))
    assert 0 < flops <= SMALL_STEP_FLOPS / 2

    def options(p, count):
        return p.compile_options(lambda: count)

    def never() -> float:
        raise AssertionError("a long run counted its step")

    assert options(prog, flops) == run_once_options()
    assert dataclasses.replace(prog, horizon=SHORT_RUN + 1).compile_options(never) is None
    assert dataclasses.replace(prog, horizon=None).compile_options(never) is None
    assert options(prog, SMALL_STEP_FLOPS) == run_once_options() and options(prog, SMALL_STEP_FLOPS * 1.01) is None
    assert options(dataclasses.replace(prog, grad_accum=2), SMALL_STEP_FLOPS / 1.9) is None
    assert options(prog, None) is None


def test_the_run_once_options_are_the_backends_own(monkeypatch):
    """XLA's CPU-only option (its elemental fusion emitters) is asked for on the CPU alone: a GPU's compiler refuses an
    option it does not know ("No such compile option: 'xla_cpu_use_fusion_emitters'", the H200, jax 0.11.2)."""
    assert run_once_options() == {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
    for backend in ("gpu", "cuda", "tpu"):
        monkeypatch.setattr(jax, "default_backend", lambda b=backend: b)
        assert run_once_options() == {"xla_backend_optimization_level": 0}


def test_a_backend_that_cannot_count_a_lowered_program_counts_none():
    """On a backend behind the PJRT C API, Lowered.cost_analysis raises NotImplementedError: the run compiles with
    the default options instead of failing."""

    class Uncounted:
        def cost_analysis(self):
            raise NotImplementedError("Lowered.cost_analysis not implemented on platform 'x'")

    assert flops_of(Uncounted()) is None
    assert run_setup(steps=3).program.compile_options(lambda: flops_of(Uncounted())) is None


@pytest.mark.parametrize("vmapped", [False, True])
def test_a_sweep_member_decides_as_train_py_does(vmapped):
    """The members' train program (a loop over a group of vmapped members) counts one member's step: run_once_options()
    for a short run, none for a longer one, as for train.py's step."""
    for steps, expected in ((3, run_once_options()), (SHORT_RUN + 1, None)):
        trainer = MemberTrainer(run_setup(steps=steps).program, DATA, 8, chunk=2, vmapped=vmapped)
        members = 4 if vmapped else 1
        trainer.prepare(np.full(members, 1e-3), np.zeros(members, int), steps, evaluate=False)
        assert trainer._options == expected, steps
