"""Checkpoints that verify their step (zoo.train.checkpoint): one copied or renamed under another step's name is not
read as that step; a resume falls back to the newest checkpoint whose state is its own step's."""

from __future__ import annotations

import pytest


def _saved(run, steps):
    """A run dir with a small checkpoint at each step (its metadata recording the step, as the loop's does)."""
    import jax.numpy as jnp

    from zoo.train.checkpoint import Checkpoints

    with Checkpoints(run, keep=10) as ckpts:
        for step in steps:
            ckpts.save(step, {"step": jnp.int32(step), "w": jnp.full((3,), float(step))}, {"step": step})


def test_a_checkpoint_copied_under_another_step_is_not_resumed_as_that_step(tmp_path):
    """checkpoints/200 copied to checkpoints/300 resumed at step 300 with step 200's state: orbax takes the folder's
    name as the step and records no other. zoo's metadata records it: the copy is refused (moved aside), and the
    run resumes from the newest checkpoint whose state is its step's."""
    import shutil

    from zoo.errors import CheckpointError
    from zoo.train.checkpoint import Checkpoints

    run = tmp_path / "run"
    _saved(run, [2, 4])
    shutil.copytree(run / "checkpoints" / "2", run / "checkpoints" / "7")
    with Checkpoints(run, read_only=True) as ckpts, pytest.raises(CheckpointError, match="holds the state of step 2"):
        ckpts.restore_at(7)  # a reader (export, sample, --fork-from RUN:7) is refused at that step
    said = []
    with Checkpoints(run) as ckpts:
        state, meta, step = ckpts.restore_latest(report=said.append)
    assert step == 4 and int(state["step"]) == 4 and meta["step"] == 4
    assert "not of step 7" in said[0] and (run / "corrupt" / "7").is_dir()


def test_a_checkpoint_renamed_alone_is_one_line(tmp_path):
    import shutil

    from zoo.errors import CheckpointError
    from zoo.train.checkpoint import Checkpoints

    run = tmp_path / "run"
    _saved(run, [3])
    shutil.move(run / "checkpoints" / "3", run / "checkpoints" / "5")
    with Checkpoints(run) as ckpts, pytest.raises(CheckpointError, match="no checkpoint in .* can be read"):
        ckpts.restore_latest(report=lambda line: None)
    assert (run / "checkpoints" / "5").is_dir()  # nothing moved when none reads


def test_checksums_summed_in_numpy_equal_the_compiled_programs():
    """On the CPU a state's checksums are summed in numpy (no program to compile); elsewhere one compiled program
    sums them where the arrays live. A checkpoint saved by one is verified by the other, so the two must give the
    same pairs for every kind of array a state holds, over sizes where the uint32 sums wrap many times."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from zoo.train import checkpoint
    from zoo.tree import key_path

    rng = np.random.default_rng(7)
    tree = {"f32": jnp.asarray(rng.normal(size=(37, 129)), jnp.float32),
            "bf16": jnp.asarray(rng.normal(size=(3, 1001)), jnp.bfloat16),
            "i32": jnp.asarray(rng.integers(-2**31, 2**31 - 1, size=(4099,)), jnp.int32),
            "u8": jnp.asarray(rng.integers(0, 256, size=(2, 3, 5)), jnp.uint8),
            "mask": jnp.asarray(rng.random(17) < 0.5), "key": jax.random.key(3),
            "keys": jax.random.split(jax.random.key(1), 4), "scalar": jnp.float32(-2.5), "empty": jnp.zeros((0, 3))}
    host = checkpoint.checksums(tree)
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    compiled = np.asarray(checkpoint._checksums([v for _, v in flat]))
    assert host == {key_path(p): [int(a), int(b)] for (p, _), (a, b) in zip(flat, compiled, strict=True)}
    with jax.enable_x64(True):  # 8-byte entries: two words each, low word first in both
        wide = {"f64": jnp.asarray(rng.normal(size=(11, 13)), jnp.float64), "i64": jnp.arange(-50, 50) * 2**40}
        assert checkpoint.checksums(wide) == {k: [int(a), int(b)] for k, (a, b) in zip(
            sorted(wide), np.asarray(checkpoint._checksums([wide[k] for k in sorted(wide)])), strict=True)}
    # numpy and Python leaves are summed as the JAX arrays they become (float64 -> float32 without x64), as before
    plain = {"f64": np.asarray(rng.normal(size=(3, 4))), "step": 7, "i64": np.arange(5)}
    assert checkpoint.checksums(plain) == checkpoint.checksums(jax.tree.map(jnp.asarray, plain))
    flipped = np.asarray(tree["f32"]).copy()
    flipped.view(np.uint32)[5, 60] ^= 1 << 17
    assert checkpoint.checksums({"f32": flipped})["f32"][0] != host["f32"][0]
