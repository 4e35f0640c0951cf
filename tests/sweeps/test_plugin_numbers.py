"""One program per shape (issue 44): a program built with its plugin's numbers as data (zoo.param.scalars,
Program.with_numbers) trains exactly as the program holding them as constants, and SP, muP, another init scale or
weight decay at the same shapes lower to the same program, so none of them compiles anything another compiled."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_utils import run_train

import zoo.data
from zoo.config import resolve
from zoo.sweeps.engine import MemberTrainer
from zoo.sweeps.grid import members
from zoo.train.setup import setup

DATA = zoo.data.load("synthetic")
STEPS, BATCH = 3, 8


def program(param: str, **settings):
    cfg = resolve({"model": "mlp_resnet", "width": 16, "depth": 2, "base_width": 8, "data": "synthetic", "steps": STEPS,
                   "batch_size": BATCH, "optimizer": "adamw", "param": param, **settings})
    return setup(cfg, DATA).program


def lowered(prog) -> tuple[str, str]:
    """The init and train-step programs of `prog` around its numbers as arguments, as text."""
    values, key, lr = prog.numbers.values, jax.random.PRNGKey(0), jnp.float32(1e-3)
    init = jax.jit(lambda k, r, v: prog.with_numbers(v).init(k, r))
    state = jax.eval_shape(init, key, lr, values)
    batch = DATA.gather(DATA.device_arrays("train"), jnp.arange(BATCH))
    step = jax.jit(lambda s, v, b: prog.with_numbers(v).train_step(s, b))
    return init.lower(key, lr, values).as_text(), step.lower(state, values, batch).as_text()


def test_plugins_at_one_shape_lower_to_one_program():
    """SP; muP; muP with another init scale and weight decay: other numbers (the test could fail), the same init and
    train-step programs. A zero-initialised readout fills it with 0 instead of drawing it: another init program, the
    same train step."""
    progs = [program("sp"), program("mup"), program("mup", weight_decay=0.05, param_opt={"init_mult": 2.0})]
    flat = [np.concatenate([np.ravel(v) for v in jax.tree.leaves(p.numbers.values)]) for p in progs]
    assert not np.array_equal(flat[0], flat[1]) and not np.array_equal(flat[1], flat[2])
    texts = [lowered(p) for p in progs]
    assert texts[0] == texts[1] == texts[2]
    zeroed = lowered(program("mup", param_opt={"zero_init": True}))
    assert zeroed[0] != texts[0][0] and zeroed[1] == texts[0][1]


@pytest.mark.slow
def test_numbers_as_data_train_as_numbers_as_constants():
    """Members of a program with its numbers (per member, traced) against the same program with them as constants,
    vmapped: the same initial states bit for bit and the same losses (rtol 1e-6)."""
    prog = program("mup", weight_decay=0.1)
    lrs, seeds = members([2.0**-8, 2.0**-6], seeds=1)
    constant = MemberTrainer(dataclasses.replace(prog, numbers=None), DATA, BATCH, chunk=STEPS, group=1)
    states = constant.init(lrs, seeds)
    start = [np.asarray(a) for a in jax.tree.leaves(states)]
    _, reference = constant.train(states, STEPS)  # donates the states
    traced = MemberTrainer(prog, DATA, BATCH, chunk=STEPS, group=2)
    states = traced.init(lrs, seeds)
    own = jax.tree.leaves({k: v for k, v in states.items() if k != "options"})
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(start, own, strict=True))
    _, losses = traced.train(states, STEPS)
    np.testing.assert_allclose(losses, reference, rtol=1e-6)


@pytest.mark.slow
def test_a_sweep_member_is_the_train_py_run(tmp_path):
    """train.py takes the plugin's numbers as arguments too: a one-member sweep of its LR and seed has its losses,
    step for step. (Held as constants, XLA folds and contracts them otherwise: Depth-muP's Adam moments of the
    embedding and readout differed from the second step, the losses from the third.) train.py runs in a process of
    its own, on one device: this session's devices may be several, and a batch split over them sums otherwise."""
    from zoo.train.logger import read_metrics

    run, steps = tmp_path / "run", 6
    settings = {"param": "depth_mup", "width": 16, "depth": 4, "base_width": 16, "base_depth": 1, "optimizer": "adam",
                "lr": 2.0**-8, "seed": 3, "steps": steps}
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**settings, "model": "mlp_resnet", "data": "synthetic",
                                                          "batch_size": BATCH}.items()]
    trained = run_train([*flags, "--log-every", "1", "--run-dir", str(run)])
    assert trained.returncode == 0, trained.stderr
    logged = [row["loss"] for row in read_metrics(run) if row.get("split") == "train"]
    member = MemberTrainer(program(**settings), DATA, BATCH, chunk=steps, data_seed=3)
    _, losses = member.train(member.init(np.array([2.0**-8]), np.array([3])), steps)
    assert np.array_equal(losses[:, 0], np.float32(logged))
