"""zoo.diagnostics.coord_lr: the learning rate a coordinate check chooses (shared by `python -m zoo.coord_check` and
zoo.diagnostics.coord_any), on measurements built by hand."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.diagnostics.coord import Changes
from zoo.diagnostics.coord_lr import FIRST_LR, LOWEST_LR, LR_STEP, choose_lr, linear_change


def measurement(lr: float, per_lr: float = 100.0) -> Changes:
    """Two seeds and two steps: the pre-activation (RMS 2 at init) moves by per_lr * lr * 2 at its larger step (the
    seeds' geometric mean), the logits (not judged) and a layer that is zero at init by far more."""
    change = per_lr * lr * 2.0
    total = {"pre/0": np.array([[0.5, 2.0], [0.5, 0.5]]) * change, "output": np.full((2, 2), 1e3),
             "zero": np.full((2, 2), 1e3)}
    return Changes(total, {}, {"pre/0": np.array([2.0, 2.0]), "output": np.ones(2), "zero": np.zeros(2)})


def test_linear_change_reads_activations_only():
    """max over steps of the seeds' geometric mean of RMS(h_t - h_0), over RMS(h_0): the logits and layers that are
    zero at init are left out (NaN when nothing is left)."""
    assert linear_change(measurement(1e-3)) == pytest.approx(100 * 1e-3)
    only_logits = Changes({"output": np.ones((1, 1))}, {}, {"output": np.ones(1)})
    assert np.isnan(linear_change(only_logits))


@pytest.mark.parametrize("per_lr, limit, expected", [(100.0, 0.1, FIRST_LR), (100.0, 0.05, FIRST_LR / LR_STEP),
                                                     (1e4, 0.1, FIRST_LR / LR_STEP**4)])
def test_choose_lr_takes_the_largest_step_within_the_limit(per_lr, limit, expected):
    """The largest of 1e-3 / sqrt(10)^k whose relative change per_lr * lr stays within the limit, with its
    measurement; every larger rung was measured first and exceeded it."""
    asked = []

    def measure(lr):
        asked.append(lr)
        return measurement(lr, per_lr)

    lr, changes, change = choose_lr(measure, limit)
    assert lr == pytest.approx(expected) and change == pytest.approx(per_lr * lr) and change <= limit
    np.testing.assert_array_equal(changes.total["pre/0"], measurement(lr, per_lr).total["pre/0"])
    np.testing.assert_allclose(asked, FIRST_LR / LR_STEP ** np.arange(len(asked)))
    assert all(per_lr * a > limit for a in asked[:-1])


def test_choose_lr_refuses_in_one_line():
    """No rung down to 1e-7 is linear enough, or nothing can be measured: a ValueError that says to give an LR."""
    with pytest.raises(ValueError, match=f"no learning rate down to {LOWEST_LR:g} .*give a learning rate"):
        choose_lr(lambda lr: measurement(lr, 1e9), 0.1)
    with pytest.raises(ValueError, match="cannot be measured; give a learning rate"):
        choose_lr(lambda lr: Changes({"output": np.ones((1, 1))}, {}, {"output": np.ones(1)}), 0.1)
    with pytest.raises(ValueError, match="must be positive"):
        choose_lr(measurement, 0.0)
