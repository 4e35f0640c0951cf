"""Infinite-width signal propagation through the MLP-ResNet block (seed_partial_jacobians.md sections 1-2, eqs.
9-22): the theory the `critical` plugin takes its init from. Measuring (APJN, chi_hat) is zoo.diagnostics.jacobian.

The stream x has per-coordinate mean M and second moment Q (x^0 = U xi: M = 0, Q = |xi|^2 / d_in = 1). With
N the block's input map (LayerNorm or the identity), beta the branch multiplier and mu the skip multiplier:

    post-nonlin   x' = mu x + beta MS(phi(g)),   g ~ N(0, s),  s = sigma_w^2 E[N(x)^2] + sigma_b^2
                  chi = mu^2 + beta^2 sigma_w^2 E[phi'(g)^2] c_N
    pre-nonlin    x' = mu x + beta (W phi(N(x)) + b)    (x Gaussian with mean 0: the paper's eq. 1)
                  chi = mu^2 + beta^2 sigma_w^2 E[phi'(N(x))^2] c_N

with c_N = 1 / Var(x) under LayerNorm (its Jacobian) and 1 without; block depth 2 multiplies the branch factor by
sigma_w^2 E[phi'(g_2)^2]. chi is the one-block APJN J^{l,l+1}. The critical line is chi* = 1 (eq. 13); a
critical point also has chi_K* = 1, the kernel map marginal at its fixed point (eq. 12).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoo.activations import activation

_Z = np.linspace(-8.0, 8.0, 1600)  # quadrature nodes for z ~ N(0, 1) (no node at the kink of relu / abs)
_W = np.exp(-0.5 * _Z**2) * (_Z[1] - _Z[0]) / np.sqrt(2.0 * np.pi)
_LOG_X = np.logspace(-30, 30, 35000)  # table nodes for phi and phi': 0 and |x| in [1e-30, 1e30], each 0.4% from the
_X = np.concatenate([-_LOG_X[::-1], [0.0], _LOG_X])  # next, so pre-activation variances in [1e-58, 1e58] resolve
Q_MAX = 1e58  # beyond it the tables end: the recursion calls the stream overflowed
_TABLES: dict[str, tuple[np.ndarray, np.ndarray]] = {}
VAR_FLOOR = 1e-300  # Var(x) = Q - M^2 is clamped here: LayerNorm's Jacobian 1 / Var(x) stays finite
ONE_TOL = 1e-7  # |chi* - 1| the quadrature's rounding leaves where chi* = 1 exactly (8e-10 seen)


@dataclasses.dataclass(frozen=True)
class Block:
    """What the recursion needs from an MLP-ResNet config and a plugin."""

    activation: str = "relu"
    pre_ln: bool = False
    pre_nonlin: bool = False
    mean_subtract: bool = False
    block_depth: int = 1
    branch: float = 1.0

    @classmethod
    def of(cls, cfg: Any, branch: float = 1.0) -> Block:
        return cls(cfg.activation, cfg.pre_ln, cfg.pre_nonlin, cfg.mean_subtract, cfg.block_depth, branch)


def describes(cfg: Any) -> bool:
    """Whether a model's config says its blocks are the residual MLP this theory follows (a model tells with the
    config class attribute `mean_field_block = True`; the MLP-ResNet does)."""
    return bool(getattr(cfg, "mean_field_block", False))


def _tables(name: str) -> tuple[np.ndarray, np.ndarray]:
    """phi and phi' of a zoo activation on the table nodes, evaluated eagerly (also under a jax trace). Nodes where
    float32 overflows inside phi or phi' (GELU's tanh form cubes x: phi' is NaN past |x| ~ 1e19) take the value of
    the nearest finite node toward 0, the function's asymptote."""
    if name not in _TABLES:
        fn = activation(name)
        with jax.ensure_compile_time_eval():
            x = jnp.asarray(_X, jnp.float32)
            values = (np.asarray(fn(x), np.float64), np.asarray(jax.vmap(jax.grad(fn))(x), np.float64))
        _TABLES[name] = tuple(_finite(v) for v in values)
    return _TABLES[name]


def _finite(values: np.ndarray) -> np.ndarray:
    ok = np.isfinite(values)
    return values if ok.all() else np.interp(_X, _X[ok], values[ok])


def _at(name: str, var: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """g = sqrt(var) z on the quadrature nodes, phi(g) and phi'(g)."""
    f_tab, df_tab = _tables(name)
    g = np.sqrt(max(var, 0.0)) * _Z
    return g, np.interp(g, _X, f_tab), np.interp(g, _X, df_tab)


def moments(name: str, var: float) -> tuple[float, float, float]:
    """E phi(g), E phi(g)^2 and E phi'(g)^2 for g ~ N(0, var)."""
    _, f, df = _at(name, var)
    return float(_W @ f), float(_W @ f**2), float(_W @ df**2)


def moment_slopes(name: str, var: float) -> tuple[float, float]:
    """d/dvar of E phi(g) and E phi(g)^2, by Stein's lemma: E[phi'(g) g] / (2 var) and E[phi phi'(g) g] / var."""
    g, f, df = _at(name, var)
    return float(_W @ (df * g)) / (2.0 * var), float(_W @ (f * df * g)) / var


def step(block: Block, sigma_w: float, sigma_b: float, mu: float, m: float, q: float) -> tuple[float, float, float]:
    """One block of the recursion: (chi, M', Q') from the stream's (M, Q)."""
    name, beta = block.activation, block.branch
    sw2, sb2 = sigma_w**2, sigma_b**2
    var = max(q - m**2, VAR_FLOOR)
    norm_sq, c_n = (1.0, 1.0 / var) if block.pre_ln else (q, 1.0)
    if block.pre_nonlin:  # u = N(x) is Gaussian with mean 0 and variance norm_sq
        _, e2, d2 = moments(name, norm_sq)
        factor, out_var = sw2 * d2 * c_n, sw2 * e2 + sb2
        if block.block_depth == 2:
            _, e2, d2 = moments(name, out_var)
            factor, out_var = factor * sw2 * d2, sw2 * e2 + sb2
        out_mean, out_sq = 0.0, out_var
    else:
        out_mean, out_sq, d2 = moments(name, sw2 * norm_sq + sb2)
        factor = sw2 * d2 * c_n
        if block.block_depth == 2:
            out_mean, out_sq, d2 = moments(name, sw2 * out_sq + sb2)
            factor *= sw2 * d2
    if block.mean_subtract:
        out_sq, out_mean = out_sq - out_mean**2, 0.0
    return (mu**2 + beta**2 * factor, mu * m + beta * out_mean,
            mu**2 * q + 2 * mu * beta * m * out_mean + beta**2 * out_sq)


def recursion(block: Block, sigma_w: float, sigma_b: float, mu: float, depth: int, q0: float = 1.0,
              rtol: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """chi^l (l = 1..depth) and the stream's second moment Q^l (l = 0..depth) at infinite width, from Q^0 = q0.

    The arrays are shorter than that in two cases only: Q overflows (past Q_MAX, where the tables of phi end: the
    chaotic phase of an unbounded phi), and they end at that block with Q = inf; or rtol is given and chi has
    converged (its relative change stayed within rtol for 20 blocks in a row), and they end there."""
    m, q, chis, qs, still = 0.0, q0, [], [q0], 0
    for _ in range(depth):
        chi, m, q = step(block, sigma_w, sigma_b, mu, m, q)
        chis.append(chi)
        qs.append(q if q <= Q_MAX else np.inf)
        if not q <= Q_MAX:
            break
        if rtol is not None:
            still = still + 1 if len(chis) > 1 and abs(chis[-1] - chis[-2]) <= rtol * abs(chis[-1]) else 0
            if still >= 20:
                break
    return np.asarray(chis), np.asarray(qs)


def chi_star(block: Block, sigma_w: float, sigma_b: float, mu: float, depth: int = 2000) -> float:
    """chi_J* = lim chi^l (eq. 13) from Q^0 = 1: chi once it has converged (relative change within 1e-10 for 20
    blocks), once the stream has died out (Q < 1e-30: the fixed point Q* = 0, where chi is its Q -> 0 limit) or
    overflowed, or at `depth` blocks (a power-law approach, as at a critical point, is then 1 - O(1 / depth) away)."""
    m, q, chis = 0.0, 1.0, []
    for _ in range(depth):
        chi, m, q = step(block, sigma_w, sigma_b, mu, m, q)
        chis.append(chi)
        if not q <= Q_MAX or q < 1e-30 or (len(chis) > 20 and np.ptp(chis[-20:]) <= 1e-10 * abs(chi)):
            break
    return float(chis[-1])


def _slope_at_zero(name: str) -> float:
    return float(_tables(name)[1][len(_X) // 2])


def _smooth_zero(name: str) -> bool:
    f, df = _tables(name)
    i = len(_X) // 2
    return f[i] == 0 and df[i] != 0 and abs(df[i + 1] - df[i - 1]) < 1e-2 * abs(df[i])  # no kink at 0


def critical_sigma_w(block: Block, sigma_b: float, mu: float, lo: float = 1e-3, hi: float = 20.0,
                     tol: float = 1e-5) -> float:
    """The sigma_w with chi* = 1 at fixed (sigma_b, mu): chi* (from unit inputs, `chi_star`) must cross 1 there, not
    jump over it.

    At sigma_b = 0 without LayerNorm, for phi(0) = 0 with no kink (erf, tanh, GELU): the closed form at the fixed
    point Q* = 0, mu^2 + beta^2 (sigma_w^2 phi'(0)^2)^k = 1, holds when that fixed point attracts (phi''(0) = 0: erf,
    tanh). For GELU it repels, and unit inputs leave its basin at a smaller sigma_w already: there chi* jumps from
    its Q* = 0 value sigma_w^2 / 4 to the growing stream's sigma_w^2 / 2 (GELU is ReLU-like at large scale), over 1,
    and there is no critical sigma_w (plain MLP: at sigma_w = 1.468, not at the closed form's 2). Otherwise, and to
    find that jump, by bisection (chi* rises with sigma_w); the ValueError states where chi* jumps."""
    where = f"for sigma_b={sigma_b}, mu={mu} ({block.activation}, pre_ln={block.pre_ln})"
    why = ""
    if sigma_b == 0 and not block.pre_ln and _smooth_zero(block.activation) and mu**2 < 1:
        k = block.block_depth
        guess = (((1 - mu**2) / block.branch**2) ** (1 / k) / _slope_at_zero(block.activation) ** 2) ** 0.5
        q = 1e-3  # a small stream: one block must not grow it
        if step(block, guess, 0.0, mu, 0.0, q)[2] <= q:
            return guess
        why = f" (the fixed point Q* = 0, where chi* = 1 at sigma_w = {guess:.4g}, repels: phi''(0) != 0)"
    return _bisect(lambda s: chi_star(block, s, sigma_b, mu), lo, hi, tol, "sigma_w", where, why=why)


def critical_sigma_b(block: Block, sigma_w: float, mu: float, hi: float = 20.0, tol: float = 1e-5) -> float:
    """The sigma_b with chi* = 1 at fixed (sigma_w, mu), by bisection (chi* falls as sigma_b grows: a pre-LN block
    without a residual, whose chi* > 1 at sigma_b = 0, has its critical line at sigma_b / sigma_w = sqrt(a - b))."""
    where = f"for sigma_w={sigma_w}, mu={mu} ({block.activation}, pre_ln={block.pre_ln})"
    return _bisect(lambda s: chi_star(block, sigma_w, s, mu), 0.0, hi, tol, "sigma_b", where, rising=False)


def sigma_b_on_line(block: Block, sigma_w: float, mu: float, bias: bool = True) -> float:
    """The sigma_b that puts a given (sigma_w, mu) on the critical line where one does (`critical_sigma_b`: a pre-LN
    block without a residual at sigma_b / sigma_w = sqrt(a - b)); 0 where chi* <= 1 at sigma_b = 0 (on the line
    already, as ReLU at sigma_w^2 = 2, or below it, where no sigma_b helps: chi* falls as sigma_b grows, and the point
    stays where it was given), where no sigma_b brings chi* down to 1 (ReLU's chi* does not depend on it) and for a
    model without biases."""
    if not bias or chi_star(block, sigma_w, 0.0, mu) <= 1 + ONE_TOL:
        return 0.0
    try:
        return critical_sigma_b(block, sigma_w, mu)
    except ValueError:  # no sigma_b in reach: the point is off the line as given, a chaotic init
        return 0.0


def _bisect(chi: Callable[[float], float], lo: float, hi: float, tol: float, name: str, where: str,
            rising: bool = True, why: str = "") -> float:
    """Where chi(x) = 1 on [lo, hi], chi monotonic; a ValueError where it does not reach 1 or jumps over it (saying
    where, and `why`). An end where chi is 1 to within the quadrature's rounding (ONE_TOL) is that point: a
    scale-invariant phi under pre-LN without biases has chi* = 1 exactly (the quadrature gives 1 - 8e-10, which read
    as 'below 1' refused ReLU's critical sigma_b = 0); where both ends are, chi* = 1 all along: a ValueError."""
    sign = 1.0 if rising else -1.0
    chi_lo, chi_hi = chi(lo), chi(hi)
    at_one = [x for x, c in ((lo, chi_lo), (hi, chi_hi)) if abs(c - 1) <= ONE_TOL]
    if len(at_one) == 2:
        raise ValueError(f"chi* = 1 at every {name} {where} in [{lo:.4g}, {hi:.4g}]: each is critical; give {name}")
    if at_one:
        return at_one[0]
    if not (np.isfinite(chi_lo) and np.isfinite(chi_hi)) or sign * (chi_lo - 1) > 0 or sign * (chi_hi - 1) < 0:
        raise ValueError(f"no critical {name} {where} in [{lo:.4g}, {hi:.4g}]: chi* goes from {chi_lo:.3g} to "
                         f"{chi_hi:.3g}{why}")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        chi_mid = chi(mid)
        if sign * (chi_mid - 1) > 0:
            hi, chi_hi = mid, chi_mid
        else:
            lo, chi_lo = mid, chi_mid
    if max(abs(chi_lo - 1), abs(chi_hi - 1)) > 0.01:
        raise ValueError(f"no critical {name} {where}: from unit inputs (Q^0 = 1) chi* jumps from {chi_lo:.3g} to "
                         f"{chi_hi:.3g} at {name} = {0.5 * (lo + hi):.4g}{why}")
    return 0.5 * (lo + hi)


@functools.cache
def residual_sigma_w(block: Block, depth: int, sigma_b: float = 0.0, growth: float = 2.0, mu: float = 1.0) -> float:
    """sigma_w for pre-LN blocks with mu^2 = 1 (mu = 1, or -1), where every init is critical:
    chi^l = 1 + A / (K^0 + l B) and J^{0,l} ~ (K^l / K^0)^(A/B) (Thm 1.3). The sigma_w at which the stream's
    variance grows by `growth` over the `depth` blocks keeps the end-to-end APJN at about growth^(A/B) at any depth
    (at a fixed sigma_w it grows like depth^(A/B)), and chi^l <= 1 + (A/B) / depth; found by bisection on
    log sigma_w (the growth rises with it)."""
    if not block.pre_ln:
        raise ValueError("residual_sigma_w is for blocks with LayerNorm (mu = 1 is chaotic without)")

    def log_growth(log_sw: float) -> float:
        m, q = 0.0, 1.0
        for _ in range(depth):
            _, m, q = step(block, float(np.exp(log_sw)), sigma_b, mu, m, q)
        return float(np.log(max(q - m**2, VAR_FLOOR)))  # Var(x^0) = 1

    lo, hi = np.log(1e-3), np.log(1e2)
    give = "give sigma_w (with LayerNorm and mu^2 = 1 every init is critical)"
    if log_growth(lo) > np.log(growth):
        raise ValueError(f"the stream grows by more than {growth} over {depth} blocks at every sigma_w "
                         f"(sigma_b={sigma_b}); {give} or a smaller sigma_b")
    if log_growth(hi) < np.log(growth):  # a bounded phi adds at most beta^2 max phi^2 a block, whatever sigma_w
        raise ValueError(f"the stream grows by less than {growth} over {depth} blocks at every sigma_w up to "
                         f"{np.exp(hi):.0f} ({block.activation} is bounded, branch multiplier {block.branch:.3g}); "
                         f"{give}")
    while hi - lo > 1e-5:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if log_growth(mid) < np.log(growth) else (lo, mid)
    return float(np.exp(0.5 * (lo + hi)))


def kernel_fixed_point(block: Block, mu: float, s: float) -> tuple[float, float, float, float]:
    """The init whose kernel map has its fixed point at pre-activation variance K* = s with chi* = 1 (no LayerNorm,
    block depth 1): (sigma_w^2, sigma_b^2, Q*, chi_K*), Q* the stream's second moment there and chi_K* the map's
    largest eigenvalue (eq. 12; < 1: the fixed point attracts).

    sigma_w^2 = (1 - mu^2) / (beta^2 E phi'(g)^2); sigma_b^2 closes the fixed point (negative: no such init). With
    the branch output's mean and second moment (m_phi, q_phi) at s, M* = beta m_phi / (1 - mu) and
    Q* = (2 mu beta M* m_phi + beta^2 q_phi) / (1 - mu^2), s = sigma_w^2 Q* + sigma_b^2 (post-nonlin); or Q* = s
    with Q* (1 - mu^2) = beta^2 (sigma_w^2 E phi^2 + sigma_b^2) (pre-nonlin)."""
    beta = block.branch
    e1, e2, d2 = moments(block.activation, s)
    de1, de2 = moment_slopes(block.activation, s)
    sw2 = (1 - mu**2) / (beta**2 * d2)
    if block.pre_nonlin:
        return sw2, s * (1 - mu**2) / beta**2 - sw2 * e2, s, mu**2 + beta**2 * sw2 * de2
    if block.mean_subtract:
        mean, sq, dmean, dsq = 0.0, e2 - e1**2, 0.0, de2 - 2 * e1 * de1
    else:
        mean, sq, dmean, dsq = e1, e2, de1, de2
    m = beta * mean / (1 - mu)
    q = (2 * mu * beta * m * mean + beta**2 * sq) / (1 - mu**2)
    jacobian = np.array([[mu, beta * dmean * sw2],  # d(M', Q') / d(M, Q), through s = sigma_w^2 Q + sigma_b^2
                         [2 * mu * beta * mean, mu**2 + (2 * mu * beta * m * dmean + beta**2 * dsq) * sw2]])
    return sw2, s - sw2 * q, q, float(np.max(np.abs(np.linalg.eigvals(jacobian))))


def line_point(block: Block, mu: float, q0: float = 1.0) -> tuple[float, float]:
    """A point (sigma_w, sigma_b) of the critical line chi* = 1 with sigma_b > 0 (no LayerNorm, block depth 1).

    The half-stable point, chi_K* = 1 at K* > 0 (eq. 12), the smallest such K* that a real sigma_b reaches: without
    mean subtraction that is E[phi phi''] = 0 at K*, for GELU K* = (3 + sqrt 17) / 2 and (sigma_w, sigma_b) =
    (1.408, 0.416), both times sqrt(1 - mu^2) with a residual in the paper's pre-nonlin block (eqs. 157-158,
    179-180). Where chi_K* < 1 all along the line (mean subtraction takes away the mean that GELU's K* = 0 point
    grows from), every line point attracts: the one whose stream fixed point Q* is the input's q0, so each block
    starts at it. A ValueError where neither exists."""
    if block.pre_ln or block.block_depth != 1 or not 0 <= mu < 1:
        raise ValueError("critical points with sigma_b > 0 are worked out for blocks of depth 1 without LayerNorm "
                         "and 0 <= mu < 1")
    grid = np.log(np.logspace(-3, 3, 241))
    rows = np.array([kernel_fixed_point(block, mu, np.exp(t)) for t in grid])  # (sigma_w^2, sigma_b^2, Q*, chi_K*)
    for column, target, stable in ((3, 1.0, False), (2, q0, True)):
        f = rows[:, column] - target
        ok = (rows[:, 1] >= 0) & (~stable | (rows[:, 3] <= 1))
        for i in np.flatnonzero(ok[:-1] & ok[1:] & (f[:-1] * f[1:] <= 0)):
            lo, hi = grid[i], grid[i + 1]
            for _ in range(50):
                mid = 0.5 * (lo + hi)
                if (kernel_fixed_point(block, mu, np.exp(mid))[column] - target) * f[i] > 0:
                    lo = mid
                else:
                    hi = mid
            sw2, sb2, _, _ = kernel_fixed_point(block, mu, np.exp(0.5 * (lo + hi)))
            return float(np.sqrt(sw2)), float(np.sqrt(max(sb2, 0.0)))
    raise ValueError(f"no critical point with sigma_b > 0 for {block.activation} (mean_subtract="
                     f"{block.mean_subtract}, pre_nonlin={block.pre_nonlin}, mu={mu}): along chi* = 1, sigma_b^2 < 0 "
                     "or the fixed point repels")


@functools.cache
def critical_point(block: Block, mu: float, sigma_b: float | None = None, bias: bool = True) -> tuple[float, float]:
    """(sigma_w, sigma_b) of a critical init at skip multiplier mu. With sigma_b given: the sigma_w on the critical
    line there. Otherwise sigma_b = 0 where the critical line reaches it continuously (ReLU sigma_w^2 = 2; erf, tanh
    sigma_w^2 phi'(0)^2 = 1, a closed form that needs phi(0) = phi''(0) = 0), else a point with sigma_b > 0 (GELU:
    `line_point`; pre-LN without a residual: sigma_w = 1 and the sigma_b on its line), which needs biases (`bias`):
    without them there is no critical point, a ValueError."""
    if mu**2 > 1 or (not block.pre_ln and mu**2 == 1):
        raise ValueError(f"no critical sigma_w for mu={mu}{'' if block.pre_ln else ' without LayerNorm'}: chi = "
                         "mu^2 + beta^2 sigma_w^2 E phi'^2 c_N > 1 for every sigma_w > 0")
    if sigma_b is not None:
        return critical_sigma_w(block, sigma_b, mu), sigma_b
    try:
        return critical_sigma_w(block, 0.0, mu), 0.0
    except ValueError as at_zero:
        if not block.pre_ln and block.block_depth != 1:
            raise
        reason = str(at_zero)
    if block.pre_ln:  # LayerNorm fixes the scale: the critical line is a ratio sigma_b / sigma_w; take sigma_w = 1
        sigma_w, sigma_b = 1.0, critical_sigma_b(block, 1.0, mu)
    else:
        sigma_w, sigma_b = line_point(block, mu)
    if not bias and sigma_b > 0:
        raise ValueError(f"{reason}; the critical point (sigma_w, sigma_b) = ({sigma_w:.3f}, {sigma_b:.3f}) needs "
                         "biases: build the model with bias=true (or give sigma_w)")
    return sigma_w, sigma_b
