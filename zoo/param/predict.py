"""Predicted coordinate-check slopes from the abcd exponents (TP IVb section 2.8; seed_tp4b_adam.md section 3).

Feature-learning exponents, per kind (fan-in fixed for input, vector and scalar kinds):

    r = c + a         (input, vector, scalar)         r = c + a - 1     (hidden, output)

with c the Adam LR exponent; SGD uses its LR exponent c - d plus the faithful gradient exponent d* of the kind
(d* = a + a_out + b_out for parameters before the readout, one less for scalar kind whose gradient sums over
the width, d* = a_out for the readout), i.e. c -> c - d + d* (Yang-Hu abc form). The predicted sizes:

    Delta h (input layer)  ~ n^-r_in
    Delta h (hidden)       ~ n^-r,  r = min of r over the kinds before the readout
    Delta f                ~ n^max(-r_out, 1 - a_out - b_out - r)
    Delta attention logits ~ n^(s (1 - e) - r)   for logits q.k / d_head^e with d_head ~ n^s

In depth (TP VI section 7, branch multiplier L^-alpha, branch updates L^-gamma): the hidden activations and the
output move like L^max(1 - alpha - gamma, -gamma); the input layer is not in a branch (L^0).

These hold while the parametrization is stable (every r >= 0 and a_out + b_out + r >= 1, TP IVb Thm 2.8.12).
Past that the change blows up and compounds, so the coordinate check compares against min(prediction, 0):
a parametrization whose raw prediction is positive is unstable, and its check must fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

GROUPS = ("input", "hidden", "output", "attention")
SGD_LIKE = ("sgd", "momentum")
ADAM_LIKE = ("adam", "adamw", "lion", "adafactor")


def _effective_c(abcd: tuple, kind: str, out: tuple, optimizer: str) -> float:
    a, _, c, d = (float(v) for v in abcd)
    if optimizer in ADAM_LIKE:
        return c
    if optimizer not in SGD_LIKE:
        raise ValueError(f"unknown optimizer family {optimizer!r}; choose from {', '.join(ADAM_LIKE + SGD_LIKE)}")
    a_out, b_out = float(out[0]), float(out[1])
    faithful = a_out if kind == "output" else a + a_out + b_out - (1.0 if kind == "scalar" else 0.0)
    return c - d + faithful


def feature_exponents(abcd: Callable[[str], tuple], optimizer: str, kinds: Iterable[str]) -> dict[str, float]:
    """Kind -> r (TP IVb Def 2.8.5) for the kinds present, the output included."""
    out = abcd("output")
    r = {}
    for kind in {*kinds, "output"}:
        a = float(abcd(kind)[0])
        c = _effective_c(abcd(kind), kind, out, optimizer)
        r[kind] = c + a - (1.0 if kind in ("hidden", "output") else 0.0)
    return r


def width_slopes(abcd: Callable[[str], tuple], optimizer: str = "adam",
                 kinds: Iterable[str] = ("input", "vector", "hidden"), attn_exponent: float = 0.5,
                 head_dim_slope: float = 1.0) -> dict[str, float]:
    """Group -> raw predicted log-log slope of the change of its activations against width."""
    r = feature_exponents(abcd, optimizer, kinds)
    body = [v for k, v in r.items() if k != "output"]
    r_body = min(body) if body else 0.0
    a_out, b_out = float(abcd("output")[0]), float(abcd("output")[1])
    return _clean({
        "input": -r.get("input", r_body),
        "hidden": -r_body,
        "output": max(-r["output"], 1.0 - a_out - b_out - r_body),
        "attention": head_dim_slope * (1.0 - float(attn_exponent)) - r_body,
    })


def depth_slopes(alpha: float, gamma: float) -> dict[str, float]:
    """Group -> raw predicted log-log slope of the change against depth (TP VI section 7)."""
    branch = max(1.0 - float(alpha) - float(gamma), -float(gamma))
    return _clean({"input": 0.0, "hidden": branch, "output": branch, "attention": branch})


def stable(slopes: dict[str, float]) -> dict[str, float]:
    """The slopes a stable parametrization would show: min(prediction, 0) (growth means instability)."""
    return {k: min(v, 0.0) for k, v in slopes.items()}


def _clean(slopes: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 9) + 0.0 for k, v in slopes.items()}
