"""The audit's verdicts: each quantity's log-log slope across sizes, measured against the slope of its law
(zoo.audit.laws), one PASS/FAIL per parameter.

A quantity is judged when theory gives it a law for the parameter's family and it was measurable at every size:
a zero init (biases) has no init law to test, a null direction (a gradient that is rounding noise, as the key bias's
under softmax) no update law. A weight decay that is zero at every size is width-independent (no decay); zero at
some sizes and not at others is not.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

NULL_GRADIENT = 1e-6  # a gradient RMS below this fraction of the largest one at that size is a null direction
NO_DECAY = 1e-12  # a per-step shrink below this is none
SAMPLING_Z = 3.0  # standard errors of sampling noise an init-RMS slope is allowed on top of the tolerance


@dataclasses.dataclass
class Check:
    """One quantity of one parameter along one axis: the values at each size, the fitted slope, the law's slope."""

    quantity: str
    values: list[float | None]
    measured: float | None
    expected: float | None
    passed: bool | None  # None: reported, not judged
    note: str = ""


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(np.asarray(xs, np.float64)), np.log(np.asarray(ys, np.float64)), 1)[0])


def law_slope(xs: Sequence[float], logs: Sequence[float]) -> float:
    """Least-squares slope of a law's log values against log x."""
    return float(np.polyfit(np.log(np.asarray(xs, np.float64)), np.asarray(logs, np.float64), 1)[0])


def sampling_slack(xs: Sequence[float], entries: Sequence[int]) -> float:
    """SAMPLING_Z standard errors of the least-squares log-log slope of the RMS of `entries` i.i.d. Gaussian draws at
    each size: log RMS over N draws has standard error 1/sqrt(2N) (delta method on the chi distribution), and the
    slope is sum_i w_i log y_i with w_i = (log x_i - mean) / sum (log x - mean)^2. A small table (a ViT's 1 x n
    class token at n = 24, 48) draws a slope of 0.15 from a width-independent std; a 64 x 64 matrix, 0.03."""
    lx = np.log(np.asarray(xs, np.float64))
    w = (lx - lx.mean()) / np.sum((lx - lx.mean()) ** 2)
    return SAMPLING_Z * float(np.sqrt(np.sum(w**2 / (2.0 * np.asarray(entries, np.float64)))))


def check(quantity: str, xs: Sequence[float], values: Sequence[float | None], logs: Sequence[float] | None,
          tol: float, why_missing: str = "", judged: bool = True, slack: float = 0.0) -> Check:
    """The verdict on one quantity: `logs` is the law's log value at each size (None: theory gives none here);
    a quantity that is not `judged` is reported with its slopes and no verdict; `slack` widens the tolerance by the
    quantity's sampling noise (sampling_slack)."""
    values = list(values)
    expected = None if logs is None else law_slope(xs, logs)
    judged = judged and logs is not None
    if quantity == "wd_shrink" and all(v is not None and abs(v) < NO_DECAY for v in values):
        return Check(quantity, values, None, expected, True if judged else None, "no decay")
    if judged and any(v is not None and not math.isfinite(v) for v in values):  # inf or NaN: no law measured
        return Check(quantity, values, None, expected, False, "not finite at some size, the step diverged: give a "
                     "smaller --lr")
    if any(v is None or not math.isfinite(v) or v <= 0 for v in values):
        note = why_missing if any(v is None for v in values) else "zero or negative at some size"
        return Check(quantity, values, None, expected, False if judged and quantity == "wd_shrink" else None, note)
    measured = slope(xs, values)
    passed = abs(measured - expected) <= tol + slack if judged else None
    return Check(quantity, values, measured, expected, passed, f"sampling noise: tol +{slack:.2f}" if slack >= 0.01
                 else "")


def frozen_check(numbers: Sequence[dict[str, float]]) -> Check:
    """A parameter the plugin freezes keeps its init: its step's gradient-driven update and its decay shrink are 0 at
    every size (their RMS below NO_DECAY); a frozen parameter that moves fails, whatever its slope."""
    moves = [max(abs(n.get("update_rms", 0.0)), abs(n.get("wd_shrink", 0.0))) for n in numbers]
    passed = all(m < NO_DECAY for m in moves)
    return Check("frozen", moves, None, None, passed, "frozen" if passed else
                 f"the plugin freezes it, yet it moves (update RMS or decay shrink up to {max(moves):.3g})")


def null_directions(grad_rms: dict[str, float]) -> set[str]:
    """Parameters whose gradient is rounding noise next to the largest one (NULL_GRADIENT)."""
    top = max(grad_rms.values(), default=0.0)
    return {p for p, g in grad_rms.items() if g <= NULL_GRADIENT * top}


def failures(checks: Sequence[Check]) -> list[str]:
    """The quantities that failed, with their slopes (a check of no slope, as the tag's kind or a frozen parameter's
    stillness, with its note)."""
    out = []
    for c in checks:
        if c.passed is False and c.measured is None and c.expected is None and c.note:
            out.append(f"{c.quantity}: {c.note}")
        elif c.passed is False:
            got = "n/a" if c.measured is None else f"{c.measured:+.2f}"
            want = "n/a" if c.expected is None else f"{c.expected:+.2f}"
            out.append(f"{c.quantity} slope {got}, theory {want}" + (f" ({c.note})" if c.note else ""))
    return out
