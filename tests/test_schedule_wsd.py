"""--schedule wsd: warmup, stable at the peak, then a linear decay over the last --cooldown of the run after the
warmup to --min-lr-ratio at its last step; --cooldown is read by wsd only."""

import numpy as np
import pytest

from zoo.config import resolve
from zoo.optim import OptimConfig
from zoo.schedule import schedule_shape


def test_wsd_shape():
    """12 steps (last step 11), warmup 2, cooldown 1/2: stable from step 1 to S = 2 + round(0.5 * 9) = 6, then
    linear from 1 at S to 0.1 at step 11."""
    shape = schedule_shape(OptimConfig(schedule="wsd", warmup=2, cooldown=0.5, min_lr_ratio=0.1), horizon=11)
    want = [0.5, 1, 1, 1, 1, 1, 1, 0.82, 0.64, 0.46, 0.28, 0.1]
    np.testing.assert_allclose([float(shape(t)) for t in range(12)], want, atol=1e-6)
    default = schedule_shape(OptimConfig(schedule="wsd"), horizon=10)  # cooldown 0.2: the last 2 of 10 steps
    np.testing.assert_allclose([float(default(t)) for t in range(11)], [1] * 9 + [0.5, 0.0], atol=1e-6)



def test_a_cooldown_of_zero_never_decays():
    """--cooldown 0 is warmup then stable to the last step: the LR does not fall to --min-lr-ratio on the last step
    (a one-step cliff, at LR 0 by default)."""
    shape = schedule_shape(OptimConfig(schedule="wsd", warmup=3, cooldown=0.0), horizon=99)
    np.testing.assert_allclose([float(shape(t)) for t in (0, 2, 50, 98, 99)], [1 / 3, 1, 1, 1, 1], atol=1e-6)


def test_cooldown_is_read_by_wsd_only():
    assert resolve({"schedule": "wsd", "cooldown": 0.3}).optim.cooldown_fraction == 0.3
    with pytest.raises(ValueError, match="--cooldown is read by --schedule wsd; --schedule cosine does not read it"):
        resolve({"schedule": "cosine", "cooldown": 0.3})
