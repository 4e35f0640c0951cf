"""The learning rate's schedule: the factor in [0, 1] that zoo.optim's last transform multiplies the peak LR by at
each step (linear warmup, then constant, cosine, linear or warmup-stable-decay), and the warmup's arithmetic that the
config's checks, the run's notes and the scaling policies read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import jax
import jax.numpy as jnp

SCHEDULES = ("constant", "cosine", "linear", "wsd")
WARMUP_PEAKS = ("last", "after")  # the warmup's ramp (t + 1) / W peaks on its last step; (t + 1) / (W + 1) after it
COOLDOWN = 0.2  # wsd's default: the last 20% of the run decays (nanochat's warmdown_ratio)


class Settings(Protocol):
    """What a schedule reads of the optimizer's settings (zoo.optim.OptimConfig)."""

    schedule: str
    warmup: int
    warmup_peak: str
    min_lr_ratio: float

    @property
    def cooldown_fraction(self) -> float: ...


def schedule_shape(cfg: Settings, horizon: int | None = None) -> Callable[[jax.Array], jax.Array]:
    """LR factor in [0, 1] at step t: linear warmup (t + 1) / D over steps 0..W-1 (D = warmup_span: W, or W + 1
    under warmup_peak "after", nanoGPT's get_lr), then constant, or cosine or linear decay in f = (t - W) / (horizon
    - W) from 1 at step W to min_lr_ratio at step `horizon` (a decaying schedule needs it; `chain` gives a run's
    last step), or wsd: constant up to step S = W + round((1 - cooldown) (horizon - W)), then linear in (t - S) /
    (horizon - S) down to min_lr_ratio (warmup-stable-decay, Hu et al. 2024; a cooldown of 0 never decays). Past
    the warmup the cosine and linear ones are optax's warmup_cosine_decay_schedule (and linear_schedule) with
    decay_steps = horizon; its warmup t / D is ours a step later, without its step at LR 0.
    A decay of one step (horizon = W > 0) ends at min_lr_ratio at once, the warmup having reached the peak at W - 1
    (under "after" the peak is that step, and nothing decays); a horizon before the warmup's end leaves no step to
    decay."""
    if cfg.schedule != "constant" and horizon is None:
        raise ValueError(f"the {cfg.schedule} schedule needs the run's length (its horizon)")
    warm, span = max(cfg.warmup, 0), warmup_span(cfg)
    peak = max(span - 1, 0)  # the first step at the peak

    def shape(t):
        t = jnp.asarray(t, jnp.float32)
        up = jnp.minimum((t + 1.0) / span, 1.0) if warm else 1.0
        frac = decay_fraction(t, warm, horizon or 0, peak)
        if cfg.schedule == "cosine":
            down = cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + jnp.cos(jnp.pi * frac))
        elif cfg.schedule == "linear":
            down = 1.0 - (1 - cfg.min_lr_ratio) * frac
        elif cfg.schedule == "wsd" and cfg.cooldown_fraction > 0:
            stable = warm + round((1 - cfg.cooldown_fraction) * max((horizon or 0) - warm, 0))
            down = 1.0 - (1 - cfg.min_lr_ratio) * decay_fraction(t, stable, horizon or 0, peak)
        else:
            down = 1.0
        return up * down

    return shape


def warmup_span(cfg: Settings) -> int:
    """D, the warmup ramp's (t + 1) / D: it reaches the peak on step D - 1 (W - 1, or W under warmup_peak "after");
    0 without a warmup."""
    return cfg.warmup + (cfg.warmup_peak == "after") if cfg.warmup > 0 else 0


def longest_warmup(cfg: Settings, steps: int) -> int:
    """The longest warmup under cfg's warmup_peak whose peak falls within a run of `steps` (its span D <= steps):
    `steps`, or steps - 1 under "after"."""
    return steps - (cfg.warmup_peak == "after")


def decay_fraction(t: jax.Array, start: int, end: int, peak: int) -> jax.Array:
    """How far the decay is at step t, in [0, 1]: (t - start) / (end - start) clipped; with end = start, 1 from step
    `start` on where the LR reached its peak before it (peak, the first step at the peak, < start: one step left
    after it), else 0 (no step follows the peak)."""
    if end > start:
        return jnp.clip((t - start) / (end - start), 0.0, 1.0)
    if end == start > peak:
        return (t >= start).astype(jnp.float32)
    return jnp.zeros_like(t)


def last_step(steps: int | None) -> int | None:
    """The index of a run's last step, where a decaying schedule reaches min_lr_ratio (steps 0..steps-1)."""
    return None if steps is None else max(steps - 1, 0)


def outlasts(warmup: int, steps: int) -> str:
    """How a warmup whose peak no step reaches outlasts a run of `steps`."""
    if warmup > steps:
        return f"is longer than the run's {steps} steps"
    return f"reaches its peak on step {warmup} (--warmup-peak after), after the run's {steps} steps"
