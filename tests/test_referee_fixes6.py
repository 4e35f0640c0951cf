"""Referee fixes, round 6: LR schedules, optimizer settings, the transfer report's statistics, the coord-check
hints."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from zoo.optim import OptimConfig, chain


def lr_factors(schedule: str, warmup: int, steps: int, ratio: float = 0.1) -> np.ndarray:
    """The LR factor of each of a run's `steps` SGD updates, read from the chain a run of that length builds."""
    cfg = OptimConfig("sgd", lr=1.0, schedule=schedule, warmup=warmup, min_lr_ratio=ratio)
    params = {"w": jnp.ones([])}
    tx = chain(cfg, {"w": 1.0}, {"w": 1.0}, {"w": 0.0}, horizon=steps)
    state, out = tx.init(params), []
    for _ in range(steps):
        u, state = tx.update({"w": jnp.ones([])}, state, params)
        out.append(-float(u["w"]))
    return np.array(out)


@pytest.mark.parametrize("warmup, steps", [(0, 7), (3, 10), (10, 40)])
def test_decay_reaches_min_lr_on_the_last_step_as_optax(warmup, steps):
    """A run of `steps` updates (t = 0..steps-1) decays to min_lr_ratio on its last step: the decay ended at
    t = steps, a step never taken (cosine at 0 + 7 steps ended at 0.160 of the peak for a min_lr_ratio of 0.1).
    Past the warmup the factors are optax's warmup_cosine_decay_schedule / linear with decay_steps = steps - 1;
    zoo's warmup (t + 1) / W is optax's t / W a step later."""
    for schedule in ("cosine", "linear"):
        got = lr_factors(schedule, warmup, steps)
        if schedule == "cosine":
            ref = optax.warmup_cosine_decay_schedule(0.0, 1.0, warmup, steps - 1, 0.1)
        else:
            ref = optax.join_schedules([optax.linear_schedule(0.0, 1.0, warmup),
                                        optax.linear_schedule(1.0, 0.1, steps - 1 - warmup)], [warmup])
        want = [float(ref(t + 1 if t < warmup else t)) for t in range(steps)]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
        assert got[-1] == pytest.approx(0.1) and got[min(warmup, steps - 1) - (warmup > 0)] == pytest.approx(1.0)


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_one_step_after_the_warmup_decays(schedule):
    """--warmup steps - 1 leaves one step after the warmup's peak: it is at min_lr_ratio (it was at the peak, the
    decay never began and --min-lr-ratio went unused). With no step after the warmup, or a one-step run without
    one, the LR stays at the warmup's value: the run trains at the peak rather than at min_lr_ratio."""
    np.testing.assert_allclose(lr_factors(schedule, 4, 5), [0.25, 0.5, 0.75, 1.0, 0.1], rtol=1e-6)
    np.testing.assert_allclose(lr_factors(schedule, 4, 4), [0.25, 0.5, 0.75, 1.0], rtol=1e-6)
    np.testing.assert_allclose(lr_factors(schedule, 0, 1), [1.0], rtol=1e-6)
    np.testing.assert_allclose(lr_factors(schedule, 0, 2), [1.0, 0.1], rtol=1e-6)
