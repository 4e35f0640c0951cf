"""Infinite-width recursions for the MLP-ResNet block (seed_partial_jacobians.md section 1, eqs. 9-22).

The stream x has per-coordinate mean M and second moment Q (x^0 = U xi: M = 0, Q = |xi|^2 / d_in = 1). With
N the block's input map (LayerNorm or the identity), beta the branch multiplier and mu the skip multiplier:

    post-nonlin   x' = mu x + beta MS(phi(g)),   g ~ N(0, s),  s = sigma_w^2 E[N(x)^2] + sigma_b^2
                  chi = mu^2 + beta^2 sigma_w^2 E[phi'(g)^2] c_N
    pre-nonlin    x' = mu x + beta (W phi(N(x)) + b)    (x Gaussian with mean 0: the paper's eq. 1)
                  chi = mu^2 + beta^2 sigma_w^2 E[phi'(N(x))^2] c_N

with c_N = 1 / Var(x) under LayerNorm (its Jacobian) and 1 without; block depth 2 multiplies the branch factor by
sigma_w^2 E[phi'(g_2)^2]. chi is the one-block APJN J^{l,l+1}; chi* = 1 is criticality (eq. 13).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoo.models.layers import activation

_Z = np.linspace(-8.0, 8.0, 1600)  # quadrature nodes for z ~ N(0, 1) (no node at the kink of relu / abs)
_W = np.exp(-0.5 * _Z**2) * (_Z[1] - _Z[0]) / np.sqrt(2.0 * np.pi)
_X = np.sinh(np.linspace(-9.0, 9.0, 40001))  # table nodes for phi and phi', dense near 0, up to |x| ~ 4000
_TABLES: dict[str, tuple[np.ndarray, np.ndarray]] = {}


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


def _tables(name: str) -> tuple[np.ndarray, np.ndarray]:
    """phi and phi' of a zoo activation on the table nodes, evaluated eagerly (also under a jax trace)."""
    if name not in _TABLES:
        fn = activation(name)
        with jax.ensure_compile_time_eval():
            x = jnp.asarray(_X, jnp.float32)
            _TABLES[name] = (np.asarray(fn(x), np.float64), np.asarray(jax.vmap(jax.grad(fn))(x), np.float64))
    return _TABLES[name]


def moments(name: str, var: float) -> tuple[float, float, float]:
    """E phi(g), E phi(g)^2 and E phi'(g)^2 for g ~ N(0, var)."""
    f_tab, df_tab = _tables(name)
    g = np.sqrt(max(var, 0.0)) * _Z
    f, df = np.interp(g, _X, f_tab), np.interp(g, _X, df_tab)
    return float(_W @ f), float(_W @ f**2), float(_W @ df**2)


def recursion(block: Block, sigma_w: float, sigma_b: float, mu: float, depth: int,
              q0: float = 1.0, rtol: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """chi^l (l = 1..depth) and the stream's second moment Q^l (l = 0..depth) at infinite width; with rtol > 0 it
    stops early once chi has converged (relative change below rtol over 20 blocks)."""
    name = block.activation
    sw2, sb2, beta2 = sigma_w**2, sigma_b**2, block.branch**2
    m, q, chis, qs, still = 0.0, q0, [], [q0], 0
    for _ in range(depth):
        var = max(q - m**2, 1e-300)
        norm_sq, c_n = (1.0, 1.0 / var) if block.pre_ln else (q, 1.0)
        if block.pre_nonlin:  # u = N(x) is Gaussian with mean 0 and variance norm_sq
            _, e2, d2 = moments(name, norm_sq)
            factor, out_var, out_mean = sw2 * d2 * c_n, sw2 * e2 + sb2, 0.0
            if block.block_depth == 2:
                _, e2, d2 = moments(name, out_var)
                factor, out_var = factor * sw2 * d2, sw2 * e2 + sb2
            out_sq = out_var
        else:
            mean, e2, d2 = moments(name, sw2 * norm_sq + sb2)
            factor = sw2 * d2 * c_n
            if block.block_depth == 2:
                mean, e2, d2 = moments(name, sw2 * e2 + sb2)
                factor *= sw2 * d2
            out_mean, out_sq = mean, e2
        if block.mean_subtract:
            out_sq, out_mean = out_sq - out_mean**2, 0.0
        chis.append(mu**2 + beta2 * factor)
        q = mu**2 * q + 2 * mu * block.branch * m * out_mean + beta2 * out_sq
        m = mu * m + block.branch * out_mean
        qs.append(q)
        still = still + 1 if len(chis) > 1 and abs(chis[-1] - chis[-2]) <= rtol * chis[-1] else 0
        if not np.isfinite(q) or still >= 20:
            break
    return np.asarray(chis), np.asarray(qs)


def chi_star(block: Block, sigma_w: float, sigma_b: float, mu: float, depth: int = 2000) -> float:
    """chi_J* = lim chi^l (eq. 13), iterated to convergence (at most `depth` blocks).

    At sigma_b = 0 without LayerNorm, an activation with phi(0) = 0 and phi'(0) != 0 (erf, tanh, GELU) has the
    fixed point Q* = 0 on the ordered side, where chi* = mu^2 + beta^2 (sigma_w^2 phi'(0)^2)^k (k = block depth):
    the closed form is used there (the recursion converges only as a power law at the critical point)."""
    chis, qs = recursion(block, sigma_w, sigma_b, mu, depth, rtol=1e-10)
    if sigma_b == 0 and not block.pre_ln and _smooth_zero(block.activation) and qs[-1] < 1e-6:
        slope = _tables(block.activation)[1][len(_X) // 2] ** 2  # phi'(0)^2
        return mu**2 + block.branch**2 * (sigma_w**2 * slope) ** block.block_depth
    return float(chis[-1])


def _smooth_zero(name: str) -> bool:
    f, df = _tables(name)
    i = len(_X) // 2
    return f[i] == 0 and df[i] != 0 and abs(df[i + 1] - df[i - 1]) < 1e-2 * abs(df[i])  # no kink at 0


def critical_sigma_w(block: Block, sigma_b: float, mu: float, lo: float = 1e-3, hi: float = 20.0,
                     tol: float = 1e-5) -> float:
    """The sigma_w with chi* = 1 at fixed (sigma_b, mu), by bisection (chi* rises with sigma_w)."""
    if sigma_b == 0 and not block.pre_ln and _smooth_zero(block.activation) and mu**2 < 1:
        slope = _tables(block.activation)[1][len(_X) // 2] ** 2
        return float((((1 - mu**2) / block.branch**2) ** (1 / block.block_depth) / slope) ** 0.5)
    f_lo, f_hi = (chi_star(block, s, sigma_b, mu) - 1.0 for s in (lo, hi))
    if f_lo > 0 or f_hi < 0:
        raise ValueError(f"no critical sigma_w in [{lo}, {hi}] for sigma_b={sigma_b}, mu={mu} ({block.activation}, "
                         f"pre_ln={block.pre_ln}): chi* goes from {f_lo + 1:.3g} to {f_hi + 1:.3g}")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if chi_star(block, mid, sigma_b, mu) > 1.0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)
