"""The neural tangent kernel under a plugin's learning rates, and how one SGD step changes it and the features
(Yaida's meta-principled family; seed_yaida_and_lecture.md sections 1.3 and 3.D).

For a model with one output f and one input x, with eta_mu = lr * m^d * m^-c (* r^alpha r^-gamma) the SGD
learning rate zoo's optimizer gives parameter mu (zoo.optim.rules: gradient pre-scale times LR multiplier),

    Theta = sum_mu eta_mu (d f / d w_mu)^2                      (the gauge-invariant eta H of Yaida's note)

so one SGD step on the linear loss c f moves f by -c Theta to first order. After that step with c = +1 and c = -1,

    even part  E = [Theta(+1) + Theta(-1) - 2 Theta] / (2 Theta)   the ddNTK's share, ~ gamma = L / n^(1-s)
    odd part   O = [Theta(+1) - Theta(-1)] / (2 Theta)             the dNTK's share, ~ n^(s/2 - 1)
    feature    RMS of the change of the last block's pre-activation after the c = +1 step, ~ n^(-(1-s)/2)

Plugin options may be traced: `ntk_change` runs every (option set, seed) of one model shape in one program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from zoo import models, optim
from zoo.diagnostics.inputs import random_inputs
from zoo.param.base import Parametrization

SGD = optim.OptimConfig("sgd")  # the step Theta predicts: plain SGD, no weight decay, constant LR
INPUT_STREAM = 1 << 30  # the default input's key: fold_in(key, this), the same for any seed count


def sgd_rates(plugin: Parametrization, params: Any, lr: Any) -> Any:
    """eta per parameter leaf: lr times the gradient pre-scale times the LR multiplier of SGD's family (SGD's
    effective LR; a plugin may give the sgd family other LR exponents than the adam family)."""
    grad_scale, lr_mult, _ = optim.rules(plugin, params, SGD)
    return jax.tree.map(lambda g, m: lr * g * m, nnx.to_pure_dict(grad_scale), nnx.to_pure_dict(lr_mult))


def one_step(model_name: str, cfg: Any, plugin: Parametrization, lr: Any, x: jax.Array, key: jax.Array,
             feature: str = "pre") -> dict[str, jax.Array]:
    """Theta at init, E, O and the feature change for one initialization (key); jit-able, options may be traced."""
    graphdef, params, rest = nnx.split(models.create(model_name, cfg, plugin, nnx.Rngs(key)), nnx.Param, ...)
    tx = optim.build(SGD, plugin, params)
    etas = sgd_rates(plugin, params, lr)

    def forward(p):
        logits, inter = nnx.merge(graphdef, p, rest)(x)
        return logits.reshape(-1)[0], inter[feature][-1]

    def theta(p):
        g = nnx.to_pure_dict(jax.grad(lambda q: forward(q)[0])(p))
        return sum(jnp.sum(e * jnp.square(gi)) for e, gi in zip(jax.tree.leaves(etas), jax.tree.leaves(g),
                                                                 strict=True))

    def step(c):
        grads = jax.grad(lambda q: c * forward(q)[0])(params)
        updates, _ = tx.update(grads, optim.set_lr(tx.init(params), lr), params)
        return optax.apply_updates(params, updates)

    t0, plus, minus = theta(params), step(1.0), step(-1.0)
    t_plus, t_minus = theta(plus), theta(minus)
    moved = forward(plus)[1] - forward(params)[1]
    return {"ntk": t0, "even": (t_plus + t_minus - 2 * t0) / (2 * t0), "odd": (t_plus - t_minus) / (2 * t0),
            "feature": jnp.sqrt(jnp.mean(jnp.square(moved))), "f_change": forward(plus)[0] - forward(params)[0]}


def ntk_change(model_name: str, cfg: Any, plugin: Callable[[dict[str, Any]], Parametrization],
               options: dict[str, Any] | None = None, lr: Any = 1e-3, x: jax.Array | None = None, seeds: int = 1,
               key: int = 0) -> dict[str, np.ndarray]:
    """`one_step` for every option set and seed: name -> [K, seeds] arrays. options: name -> one value or K values
    (None or {}: the plugin's defaults); lr: one value or K; K is the length they share (1 when all are single).
    x: one input (default: one N(0, 1) draw of the model's input shape, or random tokens, from `key`). The seeds are
    common to every option set (the same initial draws)."""
    opts = {k: jnp.atleast_1d(jnp.asarray(v, jnp.float32)) for k, v in (options or {}).items()}
    count = option_sets({**{f"option {k}": v.shape for k, v in opts.items()}, "lr": np.atleast_1d(lr).shape})
    if not isinstance(seeds, (int, np.integer)) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
    if not np.all(np.isfinite(lr)) or np.any(np.asarray(lr) <= 0):
        raise ValueError(f"the lr must be positive and finite (Theta and its changes are ratios over it), got {lr}")
    if x is None:
        x = random_inputs(cfg, 1, jax.random.fold_in(jax.random.key(key), INPUT_STREAM))
    opts = {k: jnp.broadcast_to(v, (count,)) for k, v in opts.items()}
    keys = jax.random.split(jax.random.key(key), seeds)
    lrs = jnp.broadcast_to(jnp.asarray(lr, jnp.float32), (count,))

    @jax.jit
    def run(opts, lrs, keys):
        def per_option(args):
            o, lr_k = args
            return jax.lax.map(lambda k: one_step(model_name, cfg, plugin(o), lr_k, x, k), keys)

        return jax.lax.map(per_option, (opts, lrs))

    return {k: np.asarray(v, np.float64) for k, v in run(opts, lrs, keys).items()}


def option_sets(shapes: dict[str, tuple[int, ...]]) -> int:
    """K, the length the options and the LR share (each one value or a list of K >= 1 values): 1 when all are
    single values (an empty options dict used to end in StopIteration)."""
    try:
        shape = np.broadcast_shapes((1,), *shapes.values())
    except ValueError:
        shape = ()
    if len(shape) != 1 or shape[0] == 0:
        raise ValueError("the options and the lr must each be one value or a list of K >= 1 values, got lengths "
                         + ", ".join(f"{k}: {s[0] if len(s) == 1 else s}" for k, s in shapes.items()))
    return shape[0]
