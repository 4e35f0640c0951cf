"""The core correctness of a sweep: K members vmapped in one program = K separate runs of Program.train_step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo.data
import zoo.models
import zoo.param
from zoo.optim import OptimConfig
from zoo.sweeps.engine import MemberTrainer
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


def separate_run(prog, data, lr, seed):
    """One member the plain way: Program.init and a jitted Program.train_step per step."""
    arrays = data.device_arrays("train")
    step = jax.jit(prog.train_step)
    state = jax.jit(prog.init)(jax.random.PRNGKey(seed), jnp.float32(lr))
    losses = []
    for t in range(STEPS):
        state, metrics = step(state, data.gather(arrays, jnp.asarray(data.indices("train", t, BATCH, 0))))
        losses.append(float(metrics["loss"]))
    test = data.device_arrays(data.eval_split)
    evals = [jax.jit(prog.eval_step)(state, data.gather(test, jnp.asarray(i))) for i in data.eval_indices(500)]
    sizes = np.array([len(i) for i in data.eval_indices(500)])
    eval_loss = float(np.sum([float(e["loss"]) * n for e, n in zip(evals, sizes, strict=True)]) / sizes.sum())
    return np.array(losses), state, eval_loss


@pytest.mark.long
def test_vmapped_members_equal_separate_runs(setup):
    data, prog = setup
    lrs, seeds = members([2.0**-12, 2.0**-10], seeds=2)  # K = 4: two LRs x two seeds
    trainer = MemberTrainer(prog, data, BATCH, eval_batch_size=500, chunk=4)  # 10 steps: chunks 4, 4, 2 (+2 off)
    states, losses = trainer.train(trainer.init(lrs, seeds), STEPS)
    evals = trainer.evaluate(states)
    assert losses.shape == (STEPS, 4) and trainer.compile_s > 0 and trainer.run_s > 0
    for k in range(4):
        ref_losses, ref_state, ref_eval = separate_run(prog, data, lrs[k], int(seeds[k]))
        np.testing.assert_allclose(losses[:, k], ref_losses, rtol=1e-5)
        np.testing.assert_allclose(evals["loss"][k], ref_eval, rtol=1e-5)
        for a, b in zip(jax.tree.leaves(states["params"]), jax.tree.leaves(ref_state["params"]), strict=True):
            assert np.linalg.norm(a[k] - b) <= 1e-4 * np.linalg.norm(b)  # Adam: entrywise, tiny grads may flip
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
