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
