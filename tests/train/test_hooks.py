"""The loop's periodic work shares one schedule (zoo.train.hooks.due): every N steps and the last."""

from __future__ import annotations

from zoo.train.hooks import due


def test_due_is_every_n_steps_and_the_last():
    assert [s for s in range(1, 12) if due(s, 4, 11)] == [4, 8, 11]
    assert [s for s in range(1, 6) if due(s, None, 5)] == [5]
