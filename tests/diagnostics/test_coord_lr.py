"""zoo.diagnostics.coord_lr: the learning rate a coordinate check chooses (shared by `python -m zoo.coord_check` and
zoo.diagnostics.coord_any), on measurements built by hand."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.diagnostics.coord import Changes
from zoo.diagnostics.coord_lr import FIRST_LR, HIGHEST_LR, LOWEST_LR, LR_STEP, choose_lr, linear_change


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


@pytest.mark.parametrize("per_lr, expected", [(0.5, FIRST_LR * LR_STEP**4), (1e-6, HIGHEST_LR),
                                              (50.0, FIRST_LR)])
def test_choose_lr_goes_up_where_the_first_lr_barely_moves_anything(per_lr, expected):
    """SGD on a zero readout moved the activations by 1e-5 of their RMS at 1e-3, the top of the search: changes that
    float32 rounds away in places, judged FAIL. Below limit / 10 at FIRST_LR the search goes up by sqrt(10) to the
    last LR within the limit (at most HIGHEST_LR); a change within the limit but not that far inside stays."""
    asked = []

    def measure(lr):
        asked.append(lr)
        return measurement(lr, per_lr)

    lr, _, change = choose_lr(measure, 0.1)
    assert lr == pytest.approx(expected) and change == pytest.approx(per_lr * lr) and change <= 0.1
    np.testing.assert_allclose(asked, FIRST_LR * LR_STEP ** np.arange(len(asked)))
    assert asked[-1] == pytest.approx(expected) or per_lr * asked[-1] > 0.1


def test_choose_lr_refuses_in_one_line():
    """No rung down to 1e-7 is linear enough, or nothing can be measured: a ValueError that says to give an LR."""
    with pytest.raises(ValueError, match=f"no learning rate down to {LOWEST_LR:g} .*give a learning rate"):
        choose_lr(lambda lr: measurement(lr, 1e9), 0.1)
    with pytest.raises(ValueError, match="cannot be measured; give a learning rate"):
        choose_lr(lambda lr: Changes({"output": np.ones((1, 1))}, {}, {"output": np.ones(1)}), 0.1)
    with pytest.raises(ValueError, match="must be positive"):
        choose_lr(measurement, 0.0)


@pytest.mark.parametrize("diverged", ["embed", "pre.0"])
def test_the_coordinate_check_lr_counts_a_diverged_layer(diverged):
    """choose_lr's linear regime: a layer whose change is NaN (its steps diverged) is beyond any limit. Python's max
    over the layers kept or dropped a NaN by its place: second, it was dropped and lr 1e-3 accepted with a diverged
    layer; first, the search stopped with 'no ... layer is nonzero at init'. Now both lower the LR to 1e-7 and
    say that none keeps the change within the limit."""
    from zoo.diagnostics.coord import Changes
    from zoo.diagnostics.coord_lr import choose_lr, linear_change

    total = {"embed": np.full((2, 3), 0.05), "pre.0": np.full((2, 3), 0.05)}
    total[diverged] = np.full((2, 3), np.nan)
    changes = Changes(total=total, branch={}, init={"embed": np.ones(2), "pre.0": np.ones(2)})
    assert linear_change(changes) == np.inf
    with pytest.raises(ValueError, match="no learning rate down to 1e-07 keeps every activation's change within 0.1"):
        choose_lr(lambda lr: changes)


def test_the_coordinate_check_lr_search_reaches_its_lowest_lr():
    """choose_lr tries FIRST_LR / sqrt(10)^k down to LOWEST_LR = 1e-7, nine rates. Dividing by sqrt(10) eight times
    gives 9.999999999999994e-08, below 1e-7, so the search stopped at 3.16e-7 and said that no rate 'down to 1e-07'
    kept the changes linear without trying 1e-7; a model linear only there is now measured at it."""
    from zoo.diagnostics.coord import Changes
    from zoo.diagnostics.coord_lr import LOWEST_LR, choose_lr

    tried = []

    def measure(lr):
        tried.append(lr)
        change = 0.05 if lr < 2 * LOWEST_LR else 1.0
        return Changes(total={"embed": np.full((1, 3), change)}, branch={}, init={"embed": np.ones(1)})

    lr, _, change = choose_lr(measure)
    assert lr == pytest.approx(LOWEST_LR, rel=1e-9) and change == pytest.approx(0.05) and len(tried) == 9
