"""The learning rate of a coordinate check: the largest that keeps every activation's change in the linear regime.

A coordinate check fits log RMS(h_t - h_0) against log size. Theory's slopes (TP IVb section 3) are those of the
changes while they stay small against the activations themselves; once an activation moves by a sizable fraction
of its RMS at the smallest size, saturating nonlinearities (tanh, LayerNorm) bend the changes and the slopes drift
at the sizes a CPU can run. So the LR is chosen from a first measurement at the smallest size: the largest of

    FIRST_LR, FIRST_LR / sqrt(10), FIRST_LR / 10, ...   (down to LOWEST_LR)

at which max over layers and steps of RMS(h_t - h_0) / RMS(h_0) <= limit, over the embedding, the pre-activations
and the residual stream (geometric mean over seeds). Where FIRST_LR moves them by less than limit / LR_STEP^2 (SGD
on a zero readout: 1e-5 of the activations, changes float32 rounds away in places), the search goes up instead,
FIRST_LR * LR_STEP, ... (up to HIGHEST_LR), to the last LR within the limit. `python -m zoo.coord_check` and
zoo.diagnostics.coord_any.coord_check both choose it here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from zoo.diagnostics.coord import Changes
from zoo.diagnostics.verdict import group_of

FIRST_LR, LR_STEP, LOWEST_LR, HIGHEST_LR = 1e-3, 10**0.5, 1e-7, 10.0
LINEAR_LIMIT = 0.1  # the default largest relative change at the smallest size
TRIES = 1 + round(np.log(FIRST_LR / LOWEST_LR) / np.log(LR_STEP))  # FIRST_LR down to LOWEST_LR: 9 learning rates


def linear_change(changes: Changes) -> float:
    """The largest RMS(h_t - h_0) / RMS(h_0) over the embedding, pre-activation and residual-stream layers and the
    steps (geometric mean over seeds); layers that are zero at init are left out (NaN when no layer is left). A
    change that is NaN (the steps diverged) counts as inf: Python's max would keep or drop it by its place."""
    with np.errstate(divide="ignore"):  # a layer that did not move at a step (zero readout, t = 1): log 0
        ratios = [np.exp(np.mean(np.log(changes.total[k]), 0)).max() / np.exp(np.mean(np.log(v)))
                  for k, v in changes.init.items() if group_of(k) in ("input", "hidden", "stream") and np.all(v > 0)]
    return float(max((np.nan_to_num(r, nan=np.inf) for r in ratios), default=np.nan))


def choose_lr(measure: Callable[[float], Changes], limit: float = LINEAR_LIMIT) -> tuple[float, Changes, float]:
    """(lr, its measurement, its linear_change): the largest lr of FIRST_LR * LR_STEP^k whose linear_change stays
    within `limit`, k <= 0 unless FIRST_LR's is below limit / LR_STEP^2; `measure(lr)` runs the smallest size at lr.
    A ValueError when none down to LOWEST_LR does."""
    if not limit > 0:
        raise ValueError(f"the linear limit must be positive, got {limit}")
    lr = FIRST_LR
    changes, change = _measured(measure, lr)
    if change < limit / LR_STEP**2:  # far inside: the largest within the limit lies above
        while lr * LR_STEP <= HIGHEST_LR * (1 + 1e-9):
            up, up_change = _measured(measure, lr * LR_STEP)
            if not up_change <= limit:
                break
            lr, changes, change = lr * LR_STEP, up, up_change
        return lr, changes, change
    for _ in range(TRIES - 1):  # counted: LOWEST_LR itself is tried (FIRST_LR / sqrt(10)^8 rounds just below it)
        if change <= limit:
            return lr, changes, change
        lr /= LR_STEP
        changes, change = _measured(measure, lr)
    if change <= limit:
        return lr, changes, change
    raise ValueError(f"no learning rate down to {LOWEST_LR:g} keeps every activation's change within "
                     f"{limit:g} of its RMS (at lr {lr:.3g}: {change:.3g}); give a learning rate")


def _measured(measure: Callable[[float], Changes], lr: float) -> tuple[Changes, float]:
    """`measure(lr)` and its linear_change; a ValueError where no layer it reads is nonzero at init."""
    changes = measure(lr)
    change = linear_change(changes)
    if np.isnan(change):
        raise ValueError("no embedding, pre-activation or residual-stream layer is nonzero at init, so the linear "
                         "regime cannot be measured; give a learning rate")
    return changes, change
