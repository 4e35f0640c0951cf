"""Averaged partial Jacobian norms of any zoo model (Doshi, He, Gromov; seed_partial_jacobians.md sections 1, 3).

With h^0 the input of the block stack (intermediates["embed"]) and h^l the residual stream after block l,

    J^{l0,l} = (1/N_l) E ||d h^l / d h^{l0}||_F^2        (Def. 1.2, eq. 3; N_l = tokens x channels)

estimated per example by Hutchinson's trace estimator, ||J u||^2 / N_l with Rademacher probes u (one jvp each),
and averaged over inputs x ~ N(0, 1) (random tokens for language models), probes and initializations. The
one-block APJN at the last block chi_hat = J^{L-1,L} approximates chi_J* (Prop. 2.6); off criticality
J ~ exp(+-l / xi) with the correlation length xi = 1 / |ln chi| (eq. 17), and about 28 xi layers train (App. L).

Sweeps over (sigma_w, sigma_b, mu) build `critical`-plugin models inside one jitted program, with the same
seeds at every grid point (common random numbers), so `find_critical` bisects a smooth function.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from flax import nnx

from zoo import models
from zoo.diagnostics.inputs import random_inputs
from zoo.models.layers import Stack
from zoo.models.transformer import jvp
from zoo.param.base import Parametrization
from zoo.param.critical import Critical, check_option
from zoo.train import memory

Values = dict[str, Any]
AXES = ("sigma_w", "sigma_b", "mu")


def apjn_from(model: nnx.Module, x: jax.Array, l0: int, key: jax.Array, probes: int) -> jax.Array:
    """J^{l0,l} for l = l0..L of one model on inputs x: mean over examples and probes of ||J u||^2 / N_l; NaN from
    the first block l whose stream h^l (or h^{l0}) overflowed float32: through inf the jvp gives 0 or nan, not a
    Jacobian (a ReLU MLP at sigma_w = 3, depth 200 measured chi_hat = 0, the chaotic phase read as ordered)."""
    stack = model.stack
    h = model(x)[1]["embed"]
    if l0:
        h = stack(h, stop=l0)[0]

    def one(k):
        u = jax.random.rademacher(k, h.shape, h.dtype)
        y, t = jvp(lambda h: stack(h, start=l0)[1]["blocks"], (h,), (u,))
        j = jnp.mean(jnp.square(t.astype(jnp.float32)), axis=tuple(range(2, t.ndim))).mean(1)
        finite = jnp.cumprod(jnp.all(jnp.isfinite(y), axis=tuple(range(1, y.ndim)))) & jnp.all(jnp.isfinite(h))
        return jnp.where(finite.astype(bool), j, jnp.nan)

    tail = jax.lax.map(one, jax.random.split(key, probes)).mean(0)
    return jnp.concatenate([jnp.ones([1], tail.dtype), tail])


def has_blocks(model_name: str, cfg: Any) -> bool:
    """Whether the model runs its blocks through a `Stack` at `model.stack` (zoo.models.layers), which the partial
    Jacobians slice (blocks l0..L). Built abstractly: nothing is allocated."""
    plugin = Critical(sigma_w=1.0, sigma_b=0.0, mu=1.0)  # any bound point: only the structure counts
    abstract = nnx.eval_shape(lambda: models.create(model_name, cfg, plugin, nnx.Rngs(0)))
    return isinstance(getattr(abstract, "stack", None), Stack)


def check_blocks(model_name: str, cfg: Any) -> None:
    """Refuse a model the partial Jacobians cannot slice into blocks (`has_blocks`)."""
    if not has_blocks(model_name, cfg):
        raise ValueError(f"the partial Jacobians run a model's residual blocks l0..L one slice at a time through its "
                         f"`stack` (a zoo.models.layers.Stack); {model_name} has none, so its APJN cannot be measured")


def check_fits(model_name: str, cfg: Any, batch: int) -> None:
    """Refuse a model whose parameters and one forward pass's intermediates on `batch` inputs, the least the APJN
    programs hold at once (they build one initialization at a time), exceed the memory free on this device. Both
    grow linearly in depth: measured abstractly (jax.eval_shape, nothing allocated) at depths 2 and 3 and
    extrapolated, so any depth is checked at once, before the infinite-width recursion or a compile that would run
    for hours on a model that cannot be built."""
    two, three = (_model_bytes(model_name, dataclasses.replace(cfg, depth=d), batch) for d in (2, 3))
    needed, free = two + (cfg.depth - 2) * (three - two), memory.free_memory()
    if free and needed > free:
        raise ValueError(f"{model_name} at width {cfg.width} and depth {cfg.depth} needs at least "
                         f"{needed / memory.GB:,.1f} GB (its parameters and one forward pass of {batch} inputs), more "
                         f"than the {free / memory.GB:,.1f} GB free here: lower --depth, --width or --batch")


def _model_bytes(model_name: str, cfg: Any, batch: int) -> int:
    """Bytes of a model's state and of its outputs and intermediates on `batch` random inputs, from their shapes."""
    plugin = Critical(sigma_w=1.0, sigma_b=0.0, mu=1.0)  # any bound point: only the shapes count

    def build_and_run():
        model = models.create(model_name, cfg, plugin, nnx.Rngs(0))
        return nnx.state(model), model(random_inputs(cfg, batch, jax.random.key(0)))

    leaves = jax.tree.leaves(jax.eval_shape(build_and_run))
    return sum(math.prod(a.shape) * a.dtype.itemsize for a in leaves)  # Python ints: np.prod wraps past 2^63


def _program(model_name: str, cfg: Any, make_plugin: Callable[[Values], Parametrization], l0: int, batch: int,
             probes: int) -> Callable[[Values, jax.Array], jax.Array]:
    """A jitted (values with a leading grid axis G, keys (S,)) -> (S, G, L - l0 + 1) APJN profiles."""

    def run(values, keys):
        def per_seed(key):
            k_init, k_x, k_u = jax.random.split(key, 3)
            x = random_inputs(cfg, batch, k_x)

            def per_value(v):
                model = models.create(model_name, cfg, make_plugin(v), nnx.Rngs(k_init))
                return apjn_from(model, x, l0, k_u, probes)

            return jax.lax.map(per_value, values)

        return jax.lax.map(per_seed, keys)

    return jax.jit(run)


def _keys(seeds: int, key: int) -> jax.Array:
    return jax.random.split(jax.random.key(key), seeds)


def _mean_err(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over seeds (axis 0) and its standard error (NaN from one seed, where it is undefined)."""
    s = samples.shape[0]
    return samples.mean(0), samples.std(0, ddof=1) / np.sqrt(s) if s > 1 else np.full_like(samples[0], np.nan)


def _check(cfg: Any, l0: int) -> None:
    if not 0 <= l0 < cfg.depth:
        raise ValueError(f"l0 must be in [0, depth={cfg.depth}), got {l0}")


def apjn(model_name: str, cfg: Any, plugin: Parametrization, l0: int = 0, *, seeds: int = 8, batch: int = 8,
         probes: int = 2, key: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """J^{l0,l} for l = l0..L averaged over `seeds` initializations, and its standard error."""
    _check(cfg, l0)
    bound = plugin.for_model(model_name, cfg)
    run = _program(model_name, cfg, lambda _: bound, l0, batch, probes)
    out = np.asarray(run({"_": jnp.zeros([1])}, _keys(seeds, key)), np.float64)[:, 0]
    return _mean_err(out)


def chi_hat(model_name: str, cfg: Any, plugin: Parametrization, **estimate: Any) -> tuple[float, float]:
    """The one-block APJN at the last block, J^{L-1,L} (~ chi_J*), and its standard error. Under `critical` through
    the grid program of the model config, shared with its phase diagrams and bisections."""
    if isinstance(plugin, Critical):
        bound = plugin.for_model(model_name, cfg)
        mean, err = chi_grid(model_name, cfg, {k: [float(getattr(bound, k))] for k in AXES}, base=bound, **estimate)
        return float(mean[0]), float(err[0])
    mean, err = apjn(model_name, cfg, plugin, cfg.depth - 1, **estimate)
    return float(mean[1]), float(err[1])


def chi_grid(model_name: str, cfg: Any, values: Values, *, seeds: int = 8, batch: int = 8, probes: int = 2,
             key: int = 0, base: Critical | None = None) -> tuple[np.ndarray, np.ndarray]:
    """chi_hat of `critical`-plugin models at each grid point: values maps sigma_w / sigma_b / mu to arrays of one
    shape (missing ones keep base's, else are held at the model's critical point: `held_fixed`). Returns mean and
    stderr, that shape."""
    unknown = sorted(set(values) - set(AXES))
    if unknown:
        raise ValueError(f"grid over {', '.join(unknown)}: only sigma_w, sigma_b and mu can vary")
    for name, v in values.items():
        check_option(name, v)
    base = held_fixed(model_name, cfg, base or Critical(), {k: float(np.ravel(v)[0]) for k, v in values.items()})
    arrays = {k: np.asarray(values.get(k, getattr(base, k)), np.float32) for k in AXES}
    shape = np.broadcast_shapes(*(a.shape for a in arrays.values()))
    flat = {k: jnp.asarray(np.broadcast_to(a, shape).ravel()) for k, a in arrays.items()}
    run = _critical_program(model_name, cfg, base, cfg.depth - 1, batch, probes)
    out = np.asarray(run(flat, _keys(seeds, key)), np.float64)[..., 1]
    mean, err = _mean_err(out)
    return mean.reshape(shape), err.reshape(shape)



def held_fixed(model_name: str, cfg: Any, base: Critical, varied: dict[str, float]) -> Critical:
    """base bound to the model with the options it leaves unset held at one value across a grid or bisection over
    `varied` (name -> one of its values). The plugin's default sigma_w is the critical one at the point's sigma_b and
    mu (chi* = 1 on the critical line, eq. 13), so left to follow a varied sigma_b or mu it would put every point on
    that line: chi_hat = 1 everywhere, and a bisection would find noise. So when sigma_w is unset and not varied, all
    three unset options take the model's critical point at base's own options, and the varied ones override them;
    otherwise the varied options are set first (the others need no critical point: sigma_b 0, mu the model's)."""
    if base.sigma_w is None and "sigma_w" not in varied:
        return base.for_model(model_name, cfg)
    fill = {k: v for k, v in varied.items() if getattr(base, k) is None}
    if base.sigma_b is None and "sigma_b" not in varied:  # not the sigma_b on the line at the first point's sigma_w
        fill["sigma_b"] = 0.0
    return dataclasses.replace(base, **fill).for_model(model_name, cfg)


_PROGRAMS: dict[tuple, Callable[[Values, jax.Array], jax.Array]] = {}


def _critical_program(model_name: str, cfg: Any, base: Critical, l0: int, batch: int, probes: int):
    """The jitted program over `critical`-plugin grids of (sigma_w, sigma_b, mu), each point `base` with those three
    replaced (its other options, a branch multiplier's alpha or branch_mult, kept), built once per model config and
    other options (bisection steps reuse it)."""
    rest = dataclasses.replace(base, sigma_w=None, sigma_b=None, mu=None)
    key = (model_name, repr(cfg), repr(rest), l0, batch, probes)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = _program(model_name, cfg, lambda v: dataclasses.replace(rest, **v), l0, batch, probes)
    return _PROGRAMS[key]


def find_critical(model_name: str, cfg: Any, param: str = "sigma_w", lo: float = 0.05, hi: float = 4.0,
                  tol: float = 0.005, fixed: Values | None = None, **estimate: Any) -> float:
    """The value of `param` (sigma_w, sigma_b or mu) where chi_hat = 1, by bisection on log chi_hat with the other
    options at `fixed`, else held at the model's critical point (`held_fixed`). chi_hat must be monotonic in
    `param` on [lo, hi]. The bisection stops at `tol` or at 1/256 of the range, whichever is finer (a range
    narrower than tol would otherwise return its midpoint unbisected)."""
    if not lo < hi:
        raise ValueError(f"the range of {param} to search needs lo < hi, got {lo}:{hi}")
    check_option(param, [lo, hi])
    base = held_fixed(model_name, cfg, Critical(**(fixed or {})), {param: lo})

    def side(v: float) -> float:
        """The sign of log chi_hat at param = v; a ValueError where chi_hat cannot be measured."""
        chi = chi_grid(model_name, cfg, {param: [v]}, base=base, **estimate)[0][0]
        if np.isnan(chi):
            raise ValueError(f"chi_hat cannot be measured at {param}={v:.6g}: the float32 forward pass overflows "
                             "before the last block (search a narrower range)")
        return float(np.sign(np.log(chi)))

    sign_lo, sign_hi = side(lo), side(hi)
    if sign_lo == sign_hi:
        raise ValueError(f"chi_hat - 1 has the same sign at {param}={lo} and {param}={hi}: no critical point between")
    tol = min(tol, (hi - lo) / 256)
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if side(mid) == sign_lo:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def critical_interval(model_name: str, cfg: Any, param: str, value: float, span: tuple[float, float],
                      fixed: Values | None = None, level: float = 0.95, **estimate: Any) -> tuple[float, float]:
    """The `level` interval over the seeds of `value`, find_critical's over `span`, by the delta method: chi_hat's
    standard error there over its slope in `param` (on the same seeds, at value -+ 1% of the span), widened by
    Student's t with seeds - 1 degrees of freedom (NaN from one seed, where chi_hat has no error)."""
    lo, hi = span
    base = held_fixed(model_name, cfg, Critical(**(fixed or {})), {param: lo})  # find_critical's
    at = [max(lo, value - (hi - lo) / 100), value, min(hi, value + (hi - lo) / 100)]
    chi, err = chi_grid(model_name, cfg, {param: at}, base=base, **estimate)
    slope = abs(np.log(chi[2] / chi[0]) / (at[2] - at[0]))
    seeds = estimate.get("seeds", 8)
    half = scipy.special.stdtrit(seeds - 1, 0.5 + level / 2) * err[1] / chi[1] / slope if seeds > 1 else np.nan
    return float(value - half), float(value + half)


def correlation_length(chi: float) -> float:
    """xi = 1 / |ln chi| (eq. 17): J^{0,l} ~ exp(+-l / xi); infinite at chi = 1."""
    return float("inf") if chi == 1.0 else float(1.0 / abs(np.log(chi)))


def trainable_depth(chi: float) -> float:
    """About 28 xi layers train (the paper's App. L, NTK regression)."""
    return 28.0 * correlation_length(chi)


def loglog_slope(profile: Sequence[float], lo: int, hi: int, l0: int = 0) -> float:
    """Least-squares slope of log J^{l0,l} against log l over lo <= l <= hi (the exponent -zeta, Thm 2.7)."""
    ls = np.arange(lo, hi + 1)
    return float(np.polyfit(np.log(ls), np.log(np.asarray(profile)[ls - l0]), 1)[0])
