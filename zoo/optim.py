"""The optimizer builder (design.md section 4): one optax chain from the plugin and the parameter tags.

    g -> g * m^d r^alpha            faithful gradient pre-scale (= Adam epsilon * m^-d r^-alpha; TP IVb Def 2.2.1)
      -> [clip global norm]         on the faithful gradients, which are Theta(1) in width
      -> base                       adam | sgd | momentum | lion | adafactor (entrywise Q of TP IVb 2.1)
      -> [clip update RMS]          per-parameter RMS threshold, width-independent (TP IVb 2.10.2)
      -> * m^-c r^-gamma            per-parameter LR multiplier
      -> + wd * w                   decoupled weight decay: a per-step shrink lr*wd, width-independent (2.10.1)
      -> * -lr * schedule(t)        the global learning rate, kept in the optimizer state (vmappable)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from zoo.param.base import Parametrization

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "lion", "adafactor")
SCHEDULES = ("constant", "cosine", "linear")


@dataclasses.dataclass
class OptimConfig:
    name: str = "adam"
    lr: float = 1e-3
    schedule: str = "constant"
    warmup: int = 0
    steps: int = 1000  # horizon of the decaying schedules
    min_lr_ratio: float = 0.0  # final LR / peak LR of cosine and linear
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    momentum: float = 0.9
    weight_decay: float | None = None  # None: 0.1 for adamw, 0 otherwise
    clip_norm: float | None = None
    clip_rms: float | None = None

    def __post_init__(self):
        if self.name not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.name!r}; choose from {', '.join(OPTIMIZERS)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose from {', '.join(SCHEDULES)}")

    @property
    def decay(self) -> float:
        if self.weight_decay is not None:
            return self.weight_decay
        return 0.1 if self.name == "adamw" else 0.0


def schedule_shape(cfg: OptimConfig) -> Callable[[jax.Array], jax.Array]:
    """LR factor in [0, 1] at step t: linear warmup, then constant, cosine or linear decay to min_lr_ratio."""
    warm = max(cfg.warmup, 0)
    decay_steps = max(cfg.steps - warm, 1)

    def shape(t):
        t = jnp.asarray(t, jnp.float32)
        up = jnp.minimum((t + 1.0) / warm, 1.0) if warm else 1.0
        frac = jnp.clip((t - warm) / decay_steps, 0.0, 1.0)
        if cfg.schedule == "cosine":
            down = cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + jnp.cos(jnp.pi * frac))
        elif cfg.schedule == "linear":
            down = 1.0 - (1 - cfg.min_lr_ratio) * frac
        else:
            down = 1.0
        return up * down

    return shape


class LRState(NamedTuple):
    count: jax.Array
    lr: jax.Array  # the peak LR: state, so a sweep can give each vmapped member its own


def scale_by_lr(lr: float, shape: Callable[[jax.Array], jax.Array]) -> optax.GradientTransformation:
    """u -> -lr * shape(t) * u, with lr held in the state."""

    def init(params):
        del params
        return LRState(jnp.zeros([], jnp.int32), jnp.asarray(lr, jnp.float32))

    def update(updates, state, params=None):
        del params
        f = -state.lr * shape(state.count)
        return jax.tree.map(lambda u: u * f.astype(u.dtype), updates), LRState(state.count + 1, state.lr)

    return optax.GradientTransformation(init, update)


def scale_by_tree(factors: Any) -> optax.GradientTransformation:
    """u -> u * factor, one factor per parameter leaf."""

    def update(updates, state, params=None):
        del params
        return jax.tree.map(lambda u, f: u * jnp.asarray(f, u.dtype), updates, factors), state

    return optax.GradientTransformation(lambda p: optax.EmptyState(), update)


def add_decayed_weights_tree(decay: Any) -> optax.GradientTransformation:
    """u -> u + decay * w, one decay coefficient per parameter leaf."""

    def update(updates, state, params=None):
        return jax.tree.map(lambda u, w, c: u + jnp.asarray(c, u.dtype) * w, updates, params, decay), state

    return optax.GradientTransformation(lambda p: optax.EmptyState(), update)


def per_param(params: nnx.State, fn: Callable[[Any], Any]) -> Any:
    """A tree shaped like `params` holding fn(tag) for each tagged parameter."""
    return jax.tree.map(lambda v: v.replace(fn(v.get_metadata()["tag"])), params,
                        is_leaf=lambda x: isinstance(x, nnx.Variable))


def base_transform(cfg: OptimConfig) -> optax.GradientTransformation:
    if cfg.name in ("adam", "adamw"):
        return optax.scale_by_adam(b1=cfg.b1, b2=cfg.b2, eps=cfg.eps)
    if cfg.name == "momentum":
        return optax.trace(decay=cfg.momentum)
    if cfg.name == "lion":
        return optax.scale_by_lion(b1=cfg.b1, b2=cfg.b2)
    if cfg.name == "adafactor":
        return optax.chain(optax.scale_by_factored_rms(epsilon=cfg.eps), optax.clip_by_block_rms(1.0))
    return optax.identity()


class Rules(NamedTuple):
    """The plugin's per-parameter numbers, trees shaped like the params: gradient pre-scale m^d r^alpha, LR
    multiplier m^-c r^-gamma and decoupled weight decay wd * wd_mult (None without weight decay)."""

    grad_scale: Any
    lr_mult: Any
    decay: Any


def rules(cfg: OptimConfig, plugin: Parametrization, params: nnx.State) -> Rules:
    """The per-parameter rules of `plugin` for `params` (a state of tagged nnx.Params, possibly abstract)."""
    decay = per_param(params, lambda t: cfg.decay * plugin.wd_mult(t)) if cfg.decay else None
    return Rules(per_param(params, plugin.grad_scale), per_param(params, plugin.lr_mult), decay)


def chain(cfg: OptimConfig, r: Rules) -> optax.GradientTransformation:
    """The optax chain from per-parameter rules (numbers, or arrays traced inside jit so one compiled step serves
    every plugin of one shape)."""
    parts = [scale_by_tree(r.grad_scale)]
    if cfg.clip_norm:
        parts.append(optax.clip_by_global_norm(cfg.clip_norm))
    parts.append(base_transform(cfg))
    if cfg.clip_rms:
        parts.append(optax.clip_by_block_rms(cfg.clip_rms))
    parts.append(scale_by_tree(r.lr_mult))
    if r.decay is not None:
        parts.append(add_decayed_weights_tree(r.decay))
    parts.append(scale_by_lr(cfg.lr, schedule_shape(cfg)))
    return optax.chain(*parts)


def build(cfg: OptimConfig, plugin: Parametrization, params: nnx.State) -> optax.GradientTransformation:
    """The optax chain for `params` (a state of tagged nnx.Params, possibly abstract) under `plugin`."""
    return chain(cfg, rules(cfg, plugin, params))


def set_lr(opt_state: Any, lr: jax.Array) -> Any:
    """The optimizer state with its peak learning rate replaced (used by vmapped sweeps)."""
    return optax.tree_utils.tree_set(opt_state, lr=jnp.asarray(lr, jnp.float32))
