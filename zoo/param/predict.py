"""Predicted coordinate-check slopes from the abcd exponents (TP IVb section 2.8; seed_tp4b_adam.md section 3).

Feature-learning exponents, per kind (fan-in fixed for input, vector and scalar kinds):

    r = c + a         (input, vector, scalar)         r = c + a - 1     (hidden, output)

with c the Adam LR exponent. Muon (the spectral family of zoo.param.families) uses its LR exponent plus k/2 (k width
axes: a spectral update has ||dW||_* ~ lr, an entrywise one m^(k/2) lr): c again under the spectral map, k/2 under
sp's one global LR. SGD uses its LR exponent c - d plus the faithful gradient exponent d* of the kind (d* = a +
a_out + b_out for parameters before the readout, less max(1/2, 1 - r) for scalar kind whose gradient sums over the
width, coherently only over the features' part aligned with the readout, n^-r; d* = a_out for the readout), i.e.
c -> c - d + d* (Yang-Hu abc form). The predicted sizes:

    Delta h (input layer)  ~ n^-r_in
    Delta h (hidden)       ~ n^-r,  r = min of r over the kinds before the readout
    Delta f                ~ n^max(-r_out, 1 - a_out - b_out - r, 1/2 - a_out - b_out - r_scalar)
                           (n^-r_out from a zero readout V0 = 0; r here over the kinds but scalar, whose change of h
                           is the same map on every coordinate, so not aligned with V0: a CLT sum, not an LLN one)
    Delta attention logits ~ n^(s (1 - e) - r)   for logits q.k / d_head^e with d_head ~ n^s

In depth (TP VI section 7, branch multiplier L^-alpha, branch updates L^-gamma): the change caused by the
residual-branch parameters alone moves the residual stream and the output like L^(1 - alpha - gamma) and the
pre-activations inside a branch (and attention logits) like L^max(1 - alpha - gamma, -gamma) (their own weights
move by L^-gamma); with every parameter trained, the input and readout layers add a Theta(1) change, so the totals
are L^max(0, branch part) (the input layer's is L^0).

These hold while the parametrization is stable (TP IVb Thm 2.8.12: every r >= 0 and a_out + b_out + r >= 1, the
init stable, L2.8.10: a + b = 0 on the input, 1/2 on hidden and >= 1/2 on the output layer; in depth, TP VI
Claims 7.1-7.2: alpha >= 1/2 and alpha + gamma >= 1). A positive predicted slope is the signature of instability:
the change blows up and compounds, so no measured slope can vouch for such a plugin; the init and depth
conditions are `init_instabilities` and `depth_instabilities`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable

from zoo.param import families

GROUPS = ("input", "hidden", "stream", "output", "attention")
NAN = math.nan  # the predicted slope of a group that does not move (every parameter that would move it is frozen)


def _effective_c(abcd: tuple, kind: str, out: tuple, family: str, muon_c: float, r_aligned: float = 0.0) -> float:
    """The Adam LR exponent that scales this kind's update as its optimizer family does: c itself (adam); the Muon
    exponent plus k/2 (spectral: ||dW||_* ~ lr, an entrywise update's is m^(k/2) lr); c - d + d* (sgd). A scalar's
    gradient sums the backprop (n^-(a_out + b_out)) times the features over the width: the part of the features aligned
    with the readout (n^-r_aligned, r_aligned of the other kinds) sums coherently, the rest as a CLT sum, so d* = a +
    a_out + b_out - max(1/2, 1 - r_aligned) (muP: 1, as a coherent sum; NTK: 1/2)."""
    a, _, c, d = (float(v) for v in abcd)
    if family == "adam":
        return c
    if family == "spectral":
        return muon_c + families.WIDTH_AXES[kind] / 2
    a_out, b_out = float(out[0]), float(out[1])
    summed = max(0.5, 1.0 - r_aligned) if kind == "scalar" else 0.0
    faithful = a_out if kind == "output" else a + a_out + b_out - summed
    return c - d + faithful


def feature_exponents(abcd: Callable[[str], tuple], optimizer: str, kinds: Iterable[str],
                      spectral_c: Callable[[str], float] | None = None, muon_io: bool = False,
                      frozen: Collection[str] = (), zero_readout: bool = False,
                      at_init: bool = False) -> dict[str, float]:
    """Kind -> r (TP IVb Def 2.8.5) for the kinds present that train (not `frozen`), the output included unless
    frozen; `spectral_c` gives the plugin's Muon LR exponent of a kind (default: the spectral map c - k/2).

    `at_init`: the first update's, from the gradient at init, where the features are independent of the readout V0
    (no part of them is aligned with it yet), so an SGD-like scalar's gradient is a CLT sum over the width (d* with
    1/2, muP's r_scalar = 1/2); its coherent part grows with the features' change along V0 from the second step on.

    `zero_readout`: V0 = 0, so the readout the backprop goes through is its own update, entries n^-c_out (c_out its
    effective LR exponent), not n^-b_out: the SGD-like kinds' gradients, whose size the backprop sets, use c_out in
    place of b_out (NTK: hidden and input change like n^-1, not n^-1/2; muP's c_out = b_out = 0 is unchanged); the
    normalised optimizers' (Adam, Muon) updates do not depend on it."""
    out = abcd("output")
    if zero_readout:
        out = (out[0], _effective_c(out, "output", out, families.family(optimizer, "output", muon_io),
                                    _muon_c(abcd, "output", spectral_c)), *out[2:])
    r: dict[str, float] = {}
    trained = {*kinds, "output"} - set(frozen)
    for kind in sorted(trained, key=lambda k: k == "scalar"):  # scalar last: it reads the others' r
        a = float(abcd(kind)[0])
        aligned = math.inf if at_init else min((v for k, v in r.items() if k != "output"), default=0.0)
        ce = _effective_c(abcd(kind), kind, out, families.family(optimizer, kind, muon_io),
                          _muon_c(abcd, kind, spectral_c), aligned)
        r[kind] = ce + a - (1.0 if kind in ("hidden", "output") else 0.0)
    return r


def _muon_c(abcd: Callable[[str], tuple], kind: str, spectral_c: Callable[[str], float] | None) -> float:
    """The Muon LR exponent of a kind: the plugin's (`spectral_c`), or the spectral map c - k/2."""
    return spectral_c(kind) if spectral_c else families.spectral_exponent(float(abcd(kind)[2]), kind)


def width_slopes(abcd: Callable[[str], tuple], optimizer: str = "adam",
                 kinds: Iterable[str] = ("input", "vector", "hidden"), attn_exponent: float = 0.5,
                 head_dim_slope: float = 1.0, spectral_c: Callable[[str], float] | None = None,
                 muon_io: bool = False, zero_readout: bool = False, frozen: Collection[str] = ()) -> dict[str, float]:
    """Group -> raw predicted log-log slope of the change of its activations against width (the residual stream
    moves like the hidden pre-activations). `zero_readout`: the readout starts at V0 = 0, so Delta f = Delta V h
    alone, n^-r_out (the V0 Delta h term is gone). `frozen` kinds do not train: r runs over the others, and a group
    that nothing trained moves (the input layer's when input is frozen) does not change: NaN."""
    if zero_readout and "output" in frozen:  # V0 = 0 for good: no gradient reaches anything
        return dict.fromkeys(GROUPS, NAN)
    r = feature_exponents(abcd, optimizer, kinds, spectral_c, muon_io, frozen, zero_readout)
    body = [v for k, v in r.items() if k != "output"]
    r_body = min(body) if body else math.inf
    a_out, b_out = float(abcd("output")[0]), float(abcd("output")[1])
    # V0 . Delta h: a change a matrix or vector update causes carries the backprop, so it lines up with V0 (a law of
    # large numbers, n^(1 - a_out - b_out - r)); a scalar's acts alike on every coordinate and does not (a central
    # limit sum, n^(1/2 - a_out - b_out - r))
    aligned = [1.0 - a_out - b_out - v for k, v in r.items() if k not in ("output", "scalar")]
    unaligned = [0.5 - a_out - b_out - r["scalar"]] if "scalar" in r else []
    readout = [-r["output"]] if "output" in r else []
    return _clean({
        "input": NAN if "input" in frozen else -r.get("input", r_body),
        "hidden": -r_body,
        "stream": -r_body,
        "output": max(readout if zero_readout else [*readout, *aligned, *unaligned], default=-math.inf),
        "attention": head_dim_slope * (1.0 - float(attn_exponent)) - r_body,
    })


READOUT_BIAS = "readout_bias"  # the part of the readout's bias (a scalar kind after every hidden activation)


def part_slopes(abcd: Callable[[str], tuple], part: str, optimizer: str = "adam",
                kinds: Iterable[str] = ("input", "vector", "hidden"), attn_exponent: float = 0.5,
                head_dim_slope: float = 1.0, spectral_c: Callable[[str], float] | None = None,
                muon_io: bool = False, zero_readout: bool = False, frozen: Collection[str] = (),
                at_init: bool = False) -> dict[str, float]:
    """Group -> raw predicted log-log slope against width of the change that the parameters of one `part` cause
    alone (`at_init`: after the first update, `feature_exponents`), every other parameter kept at its init (the
    coordinate check's own-parameter parts; the groups the part does not reach, as the input layer for the hidden
    kind, are not measured). `part` is a kind before the readout, "output" (the readout's weight) or READOUT_BIAS:

        kind k       every layer it reaches  n^-r_k: its own layers' W_t - W_0 applied to their input (TP IVb's
                     Delta W^l x^(l-1) = Theta(n^-r_l)), and the layers above them, which that change reaches
                     through init weights, the same order (a layer does not rescale a change it passes on);
                     attention logits n^(s (1 - e) - r_k); the logits V0 . Delta h, n^(1 - a_out - b_out - r_k)
                     (a change that carries the backprop lines up with V0), n^(1/2 - a_out - b_out - r_k) for the
                     scalar kind (a central-limit sum), nothing under a zero readout (V0 = 0 while the readout is
                     kept at its init); the coordinate check judges this term in the total only
                     (zoo.diagnostics.coord.reached_layers)
        output       the logits n^-r_out (Delta V x)
        readout_bias the logits n^-r_b: its update itself, r_b its effective LR exponent as a scalar kind's (its
                     gradient is the logits' backprop, Theta(1), so SGD's is c - d; Muon leaves 1-D parameters to
                     Adam)

    The own part of a layer, Delta W x with x its Theta(1) input (fan-in coordinates: n for hidden and output
    weights, fixed for input ones) and Delta W the effective update (multiplier m^-a included), per family:

        adam     entries lr m^-(c + a), their signs lined up with x (the gradient is delta x^T), so each output
                 coordinate sums fan-in aligned terms: r = c + a (input, vector, scalar), c + a - 1 (hidden, output)
        muon     Delta W = lr m^-(c_muon + a) O, O's singular values about 1 on the gradient's row space, which
                 holds x: |Delta W x| ~ lr m^-(c_muon + a) |x| over fan-out coordinates, so a coordinate moves by
                 m^-(c_muon + a) sqrt(fan_in / fan_out): r = c_muon + k/2 + a (input), c_muon + k/2 + a - 1
                 (hidden, output), k the width axes; the spectral map c_muon = c - k/2 gives Adam's r
        sgd      c - d + d* in place of Adam's c (the Yang-Hu abc form; d* the faithful pre-scale)

    (`feature_exponents`). Under muP every r is 0 under every family, so every part moves every layer it reaches by
    n^0, and a rule off by a power of n shows in its own part whatever the others do: a hidden Muon (or Adam) LR
    with an extra 1/m moves the hidden part by n^-1 while the total keeps the input layer's n^0."""
    nan = dict.fromkeys(GROUPS, NAN)
    if part in frozen or (zero_readout and "output" in frozen):
        return nan
    if part == READOUT_BIAS:
        a, _, c, d = (float(v) for v in abcd("scalar"))
        entrywise = families.family(optimizer, "scalar", muon_io) == "adam"
        return _clean({**nan, "output": -((c if entrywise else c - d) + a)})
    r = feature_exponents(abcd, optimizer, {*kinds, part} - {"output"}, spectral_c, muon_io, frozen, zero_readout,
                          at_init)
    if part == "output":
        return _clean({**nan, "output": -r["output"]})
    a_out, b_out = float(abcd("output")[0]), float(abcd("output")[1])
    lift = 0.5 if part == "scalar" else 1.0
    return _clean({"input": -r[part], "hidden": -r[part], "stream": -r[part],
                   "output": -math.inf if zero_readout else lift - a_out - b_out - r[part],
                   "attention": head_dim_slope * (1.0 - float(attn_exponent)) - r[part]})


def depth_slopes(alpha: float, gamma: float, branch_only: bool = False, outside_trained: bool = True,
                 input_trained: bool = True) -> dict[str, float]:
    """Group -> raw predicted log-log slope of the change against depth (TP VI section 7): of the change caused
    by the residual-branch parameters alone (branch_only; the input layer does not move), or with every parameter
    that trains: the parameters outside the branches (unless none of them trains: TP VI's experiments freeze the
    input and output layers) add a Theta(1) change; the input layer's own change is L^0, none when it is frozen
    (NaN)."""
    stream = 1.0 - float(alpha) - float(gamma)
    inside = max(stream, -float(gamma))
    branch = {"hidden": inside, "stream": stream, "output": stream, "attention": inside}
    if branch_only:
        return _clean(branch)
    floor = 0.0 if outside_trained else -math.inf
    return _clean({"input": 0.0 if input_trained else NAN, **{g: max(v, floor) for g, v in branch.items()}})


def init_instabilities(abcd: Callable[[str], tuple], kinds: Iterable[str]) -> list[str]:
    """Why the init blows up with width (TP IVb L2.8.10): a + b < 0 on input-kind weights, < 1/2 on hidden and
    output weights (their outputs grow like n^(bound - a - b))."""
    bounds = {"input": 0.0, "hidden": 0.5, "output": 0.5}
    out = []
    for kind in sorted({*kinds, "output"} & set(bounds)):
        a, b = (float(v) for v in abcd(kind)[:2])
        if a + b < bounds[kind]:
            out.append(f"{kind} weights have a + b = {a + b:g} < {bounds[kind]:g}: their outputs grow like "
                       f"n^{bounds[kind] - a - b:g} at init")
    return out


def depth_instabilities(alpha: float, gamma: float) -> list[str]:
    """Why a depth scaling blows up (TP VI Claims 7.1, 7.2): alpha < 1/2 at init, alpha + gamma < 1 in training."""
    out = []
    if float(alpha) < 0.5:
        out.append(f"alpha = {float(alpha):g} < 1/2: the residual stream grows without bound with depth at init")
    if float(alpha) + float(gamma) < 1.0:
        out.append(f"alpha + gamma = {float(alpha) + float(gamma):g} < 1: the updates grow like "
                   f"L^{1.0 - float(alpha) - float(gamma):g}")
    return out


def _clean(slopes: dict[str, float]) -> dict[str, float]:
    """Rounded; a change that nothing causes (an infinite exponent) is NaN: the group does not move."""
    return {k: round(v, 9) + 0.0 if math.isfinite(v) else NAN for k, v in slopes.items()}
