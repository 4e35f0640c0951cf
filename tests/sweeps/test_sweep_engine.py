"""The core correctness of a sweep: K members vmapped in one program = K separate runs of Program.train_step."""

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_utils import child_env

import zoo.data
import zoo.models
import zoo.param
from zoo.optim import OptimConfig
from zoo.sweeps.engine import MemberTrainer, _cpu_count, cache_share_bytes, default_group
from zoo.sweeps.grid import members
from zoo.train.step import build_program

STEPS, BATCH = 10, 32


@pytest.fixture(scope="module")
def setup():
    data = zoo.data.load("synthetic")
    plugin = zoo.param.get("depth_mup")
    cfg = zoo.models.config("mlp_resnet", width=32, depth=3, base_width=16, base_depth=2, in_shape=data.in_shape,
                            num_classes=data.num_classes)
    prog = build_program(lambda r: zoo.models.create("mlp_resnet", cfg, plugin, r), plugin, OptimConfig("adam"))
    return data, prog


def separate_run(prog, data, lr, seed, jitted):
    """One member the plain way: Program.init and a jitted Program.train_step per step (`jitted`: the jitted init,
    train_step and eval_step, made once for all members so each is traced once)."""
    init, step, eval_step = jitted
    arrays = data.device_arrays("train")
    state = init(jax.random.PRNGKey(seed), jnp.float32(lr))
    losses = []
    for t in range(STEPS):
        state, metrics = step(state, data.gather(arrays, jnp.asarray(data.indices("train", t, BATCH, 0))))
        losses.append(float(metrics["loss"]))
    test = data.device_arrays(data.eval_split)
    evals = [eval_step(state, data.gather(test, jnp.asarray(i))) for i in data.eval_indices(500)]
    sizes = np.array([len(i) for i in data.eval_indices(500)])
    eval_loss = float(np.sum([float(e["loss"]) * n for e, n in zip(evals, sizes, strict=True)]) / sizes.sum())
    return np.array(losses), state, eval_loss


@pytest.mark.long
def test_vmapped_members_equal_separate_runs(setup):
    """Four members vmapped as one group, and trained one by one inside the same program (the two ways a device
    trains its members), each equal to its own run."""
    data, prog = setup
    lrs, seeds = members([2.0**-12, 2.0**-10], seeds=2)  # K = 4: two LRs x two seeds
    jitted = jax.jit(prog.init), jax.jit(prog.train_step), jax.jit(prog.eval_step)
    refs = [separate_run(prog, data, lrs[k], int(seeds[k]), jitted) for k in range(4)]
    for group in (4, 1):
        trainer = MemberTrainer(prog, data, BATCH, eval_batch_size=500, chunk=4, group=group)  # steps 4, 4, 2 (+2)
        states, losses = trainer.train(trainer.init(lrs, seeds), STEPS)
        evals = trainer.evaluate(states)
        assert losses.shape == (STEPS, 4) and trainer.compile_s > 0 and trainer.run_s > 0
        for k, (ref_losses, ref_state, ref_eval) in enumerate(refs):
            np.testing.assert_allclose(losses[:, k], ref_losses, rtol=1e-5)
            np.testing.assert_allclose(evals["loss"][k], ref_eval, rtol=1e-5)
            mine = trainer.member(states, k)["params"]
            for a, b in zip(jax.tree.leaves(mine), jax.tree.leaves(ref_state["params"]), strict=True):
                assert np.linalg.norm(a - b) <= 1e-4 * np.linalg.norm(b)  # Adam: entrywise, tiny grads may flip
    # the members really differ: by LR (same seed) and by seed (same LR)
    assert abs(losses[-1, 0] - losses[-1, 2]) > 1e-3 and abs(losses[0, 0] - losses[0, 1]) > 1e-3
    # the one-by-one path (the benchmark's baseline) runs the same program per member
    one = MemberTrainer(prog, data, BATCH, chunk=4, vmapped=False)
    _, one_losses = one.train(one.init(lrs[3:], seeds[3:]), STEPS)
    np.testing.assert_allclose(one_losses, losses[:, 3], rtol=1e-5)


def test_members_with_their_own_plugin_options_equal_their_own_programs():
    """A program family (options -> Program): members that differ in plugin options (here the (alpha, gamma, a) of
    Depth-muP and of the ODE scaling, and their LRs) train in ONE vmapped program exactly as each option set's own
    Program does (losses to rtol 1e-5); and an eval on a fixed random subset of `limit` examples."""
    data = zoo.data.load("synthetic:teacher")
    cfg = zoo.models.config("mlp_resnet", width=16, depth=4, base_width=16, base_depth=2, in_shape=data.in_shape,
                            num_classes=data.num_classes)

    def family(options):
        plugin = zoo.param.get("depth_mup", **options)
        return build_program(lambda r: zoo.models.create("mlp_resnet", cfg, plugin, r), plugin, OptimConfig("adam"))

    options = {"alpha": [0.5, 1.0], "gamma": [0.5, 0.0], "branch_mult": [2.0, 0.7]}
    lrs, seeds = np.array([2.0**-6, 2.0**-5]), np.array([0, 1])
    trainer = MemberTrainer(family, data, 16, chunk=4)
    states, losses = trainer.train(trainer.init(lrs, seeds, options), 4)
    whole, first = trainer.evaluate(states), trainer.evaluate(states, limit=40)
    np.testing.assert_allclose(trainer.evaluate(states, limit=10**6)["loss"], whole["loss"], rtol=1e-6)
    np.testing.assert_allclose(first["accuracy"] * 40, np.round(first["accuracy"] * 40), atol=1e-4)
    assert np.all(np.abs(first["loss"] - whole["loss"]) > 1e-4)
    for k in range(2):
        own = MemberTrainer(family({o: v[k] for o, v in options.items()}), data, 16, chunk=4)
        _, ref = own.train(own.init(lrs[k:k + 1], seeds[k:k + 1]), 4)
        np.testing.assert_allclose(losses[:, k], ref[:, 0], rtol=1e-5)
    assert abs(losses[-1, 0] - losses[-1, 1]) > 1e-3
    with pytest.raises(ValueError, match="options go with a program family"):
        trainer.init(lrs, seeds)


def test_members_padded_to_whole_groups_train_as_their_own_runs(setup):
    """Three members in groups of two: the states hold a fourth (a copy of the last member), the losses and evals
    only the three asked for, each equal to the member trained alone (rtol 1e-5)."""
    data, prog = setup
    lrs, seeds = np.array([2.0**-12, 2.0**-10, 2.0**-8]), np.array([0, 1, 2])
    trainer = MemberTrainer(prog, data, BATCH, eval_batch_size=96, chunk=3, group=2)
    states, losses = trainer.train(trainer.init(lrs, seeds), 5)
    assert trainer.held(states) == 4 and losses.shape == (5, 3)
    assert trainer.evaluate(states, limit=96)["loss"].shape == (3,)
    one = MemberTrainer(prog, data, BATCH, chunk=4, vmapped=False)  # the one-by-one program of the test above
    for k in range(3):
        _, ref = one.train(one.init(lrs[k:k + 1], seeds[k:k + 1]), 5)
        np.testing.assert_allclose(losses[:, k], ref, rtol=1e-5)


def test_an_eval_batch_beyond_the_eval_set_is_cut_to_it(setup, monkeypatch):
    """Two members asking for 100,000 eval rows each over the 1,024 test images: one batch of 1,024 rows (padding
    to the rows asked would cost memory for no example), the same losses as batches of 96."""
    data, prog = setup
    lrs, seeds = members([2.0**-10], seeds=2)
    shapes = []
    evals = []
    for rows in (2 * 100_000, 2 * 96):
        trainer = MemberTrainer(prog, data, BATCH, eval_batch_size=rows, chunk=2, group=2)  # one group of 2
        call = trainer._call
        monkeypatch.setattr(trainer, "_call", lambda name, fn, *args, call=call, **kw: (
            shapes.append(np.shape(args[2])) if name == "eval" else None, call(name, fn, *args, **kw))[1])
        evals.append(trainer.evaluate(trainer.train(trainer.init(lrs, seeds), 2)[0])["loss"])
    assert shapes == [(1, 1024), (11, 96)]
    np.testing.assert_allclose(evals[0], evals[1], rtol=1e-5)


def test_default_group_fits_the_train_states_in_half_a_cores_cache_share():
    """On a CPU: as many members per group as half of one core's share of the last-level cache holds the train
    states of, a divisor of the device's members; one member when it alone overflows it."""
    half = cache_share_bytes() // 2
    assert half >= 32 << 10
    assert default_group(half + 1, 8) == 1
    assert default_group(half // 4, 8) == 4
    assert default_group(half // 3, 8) == 2  # 3 fit, 2 divides 8
    assert default_group(1, 7) == 7


@pytest.mark.parametrize("cpus, count", [("0", 1), ("0-1", 2), ("0-3,8,10-11", 7), ("2,4\n", 2)])
def test_cpus_sharing_a_cache_are_counted_from_sysfs_lists(cpus, count):
    assert _cpu_count(cpus) == count


@pytest.mark.slow
def test_members_split_over_cpu_devices_equal_one_device():
    """A command that takes one CPU device per core (zoo.train.backend.cpu_cores_as_devices, here 2 by XLA_FLAGS)
    splits the members over them, padding 3 members to 4, and trains one member on one device: the same losses as
    on one device (rtol 1e-5)."""
    script = """
import json, sys
from zoo.train import backend
backend.cpu_cores_as_devices()
import jax, numpy as np, zoo.data, zoo.models, zoo.param
from zoo.optim import OptimConfig
from zoo.sweeps.engine import MemberTrainer
from zoo.train.step import build_program
data = zoo.data.load("synthetic")
plugin = zoo.param.get("mup")
cfg = zoo.models.config("mlp_resnet", width=32, depth=2, in_shape=data.in_shape, num_classes=data.num_classes)
prog = build_program(lambda r: zoo.models.create("mlp_resnet", cfg, plugin, r), plugin, OptimConfig("adam"))
trainer = MemberTrainer(prog, data, 16, chunk=3)
states, losses = trainer.train(trainer.init(np.array([2.0**-10, 2.0**-8, 2.0**-6]), np.array([0, 0, 1])), 4)
out = {"devices": jax.device_count(), "members": trainer.held(states), "losses": losses.tolist()}
if jax.device_count() > 1:  # fewer members than devices: one device, no padding
    alone = MemberTrainer(prog, data, 16, chunk=3)
    solo, solo_losses = alone.train(alone.init(np.array([2.0**-10]), np.array([0])), 4)
    out["solo"] = [alone.held(solo), solo_losses[:, 0].tolist()]
print(json.dumps(out))
"""
    out = {}
    for devices in (1, 2):
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                              env=child_env({"XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}))
        assert proc.returncode == 0, proc.stderr
        out[devices] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (out[1]["devices"], out[2]["devices"], out[2]["members"], out[2]["solo"][0]) == (1, 2, 4, 1)
    np.testing.assert_allclose(out[2]["losses"], out[1]["losses"], rtol=1e-5)
    np.testing.assert_allclose(out[2]["solo"][1], np.array(out[1]["losses"])[:, 0], rtol=1e-5)
    assert np.array(out[1]["losses"]).shape == (4, 3)


def test_cpu_cores_as_devices_keeps_a_device_count_asked_for():
    """One CPU device per core the process may use, unless XLA_FLAGS already asks for a count."""
    script = ("from zoo.train import backend; backend.cpu_cores_as_devices(); import jax, os; "
              "print(jax.device_count(), len(os.sched_getaffinity(0)))")
    env = {k: v for k, v in child_env().items() if k != "XLA_FLAGS"}
    mine = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    devices, cores = mine.stdout.split()
    assert devices == cores, mine.stderr
    asked = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                           env=child_env({"XLA_FLAGS": "--xla_force_host_platform_device_count=3"}))
    assert asked.stdout.split()[0] == "3", asked.stderr
