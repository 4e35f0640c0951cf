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
from zoo.train.setup import setup
from zoo.train.step import run_once_options

DATA = zoo.data.load("synthetic")
STEPS, BATCH = 3, 8
KEY, LR = jax.random.PRNGKey(0), jnp.float32(2.0**-6)
SETTINGS = {"sp": ("sp", {}), "mup": ("mup", {}),
            "mup_decayed": ("mup", {"weight_decay": 0.05, "param_opt": {"init_mult": 2.0}}),
            "mup_zero": ("mup", {"param_opt": {"zero_init": True}})}


def program(param: str, **settings):
    cfg = resolve({"model": "mlp_resnet", "width": 16, "depth": 2, "base_width": 8, "data": "synthetic", "steps": STEPS,
                   "batch_size": BATCH, "optimizer": "adamw", "param": param, **settings})
    return setup(cfg, DATA).program


def batch():
    return DATA.gather(DATA.device_arrays("train"), jnp.arange(BATCH))


def lowered(prog):
    """The init and train-step programs of `prog` around its numbers as arguments, lowered."""
    init = jax.jit(lambda k, r, v: prog.with_numbers(v).init(k, r))
    state = jax.eval_shape(init, KEY, LR, prog.numbers.values)
    step = jax.jit(lambda s, v, b: prog.with_numbers(v).train_step(s, b))
    return init.lower(KEY, LR, prog.numbers.values), step.lower(state, prog.numbers.values, batch())


@pytest.fixture(scope="module")
def lowerings():
    out = {}
    for name, (param, settings) in SETTINGS.items():
        prog = program(param, **settings)
        out[name] = (prog, *lowered(prog))
    return out


def test_plugins_at_one_shape_lower_to_one_program(lowerings):
    """SP; muP; muP with another init scale and weight decay: other numbers (the test could fail), the same init and
    train-step programs. A zero-initialised readout fills it with 0 instead of drawing it: another init program, the
    same train step."""
    flat = {k: np.concatenate([np.ravel(v) for v in jax.tree.leaves(p.numbers.values)]) for k, (p, *_) in
            lowerings.items()}
    assert not np.array_equal(flat["sp"], flat["mup"]) and not np.array_equal(flat["mup"], flat["mup_decayed"])
    texts = {k: (init.as_text(), step.as_text()) for k, (_, init, step) in lowerings.items()}
    assert texts["sp"] == texts["mup"] == texts["mup_decayed"]
    assert texts["mup_zero"][0] != texts["mup"][0] and texts["mup_zero"][1] == texts["mup"][1]


def test_numbers_as_data_train_as_numbers_as_constants(lowerings):
    """muP with weight decay and another init scale, its numbers as arguments against the same program holding them
    as constants: the same initial state bit for bit and the same losses (rtol 1e-6)."""
    prog, init, step = lowerings["mup_decayed"]
    constant = dataclasses.replace(prog, numbers=None)
    values, b = prog.numbers.values, batch()
    reference = jax.jit(constant.init).lower(KEY, LR).compile(run_once_options())(KEY, LR)  # as train.py's init
    state = init.compile(run_once_options())(KEY, LR, values)
    assert all(np.array_equal(a, c) for a, c in zip(jax.tree.leaves(reference), jax.tree.leaves(state), strict=True))
    train, const_train = step.compile(), jax.jit(constant.train_step)
    for _ in range(STEPS):
        state, metrics = train(state, values, b)
        reference, expected = const_train(reference, b)
        np.testing.assert_allclose(metrics["loss"], expected["loss"], rtol=1e-6)


@pytest.mark.slow
def test_train_py_reruns_from_the_cache_and_a_sweep_member_is_its_run(tmp_path):
    """train.py twice with the same shapes and the default cache folder ($JAX_COMPILATION_CACHE_DIR, fresh): the
    first stores its programs there, the second adds none (every program came from the cache) and logs the same
    losses. train.py takes the plugin's numbers as arguments too: a one-member sweep of its LR and seed has its
    losses, step for step. (Held as constants, XLA folds and contracts them otherwise: Depth-muP's Adam moments of
    the embedding and readout differed from the second step, the losses from the third.) train.py runs in processes
    of its own, on one device: this session's devices may be several, and a batch split over them sums otherwise."""
    from zoo.train.logger import read_metrics

    cache, steps = tmp_path / "jax-cache", 4
    settings = {"param": "depth_mup", "width": 16, "depth": 4, "base_width": 16, "base_depth": 1, "optimizer": "adam",
                "lr": 2.0**-8, "seed": 3, "steps": steps}
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**settings, "model": "mlp_resnet", "data": "synthetic",
                                                          "batch_size": BATCH, "eval_every": 1000}.items()]
    logged, stored = [], []
    for run in (tmp_path / "first", tmp_path / "second"):
        trained = run_train([*flags, "--log-every", "1", "--run-dir", str(run)],
                            env={"JAX_COMPILATION_CACHE_DIR": str(cache)})
        assert trained.returncode == 0, trained.stderr
        logged.append([row["loss"] for row in read_metrics(run) if row.get("split") == "train"])
        stored.append(sorted(f.name for f in cache.rglob("*") if f.is_file()))
    assert stored[0] and stored[1] == stored[0], stored
    assert len(logged[0]) == steps and logged[1] == logged[0]
    member = MemberTrainer(program(**settings), DATA, BATCH, chunk=steps, data_seed=3)
    _, losses = member.train(member.init(np.array([2.0**-8]), np.array([3])), steps)
    assert np.array_equal(losses[:, 0], np.float32(logged[0]))
