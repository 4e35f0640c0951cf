"""Model and plugin options given at their defaults are no other setting: `--param-opt alpha=0.5` where the plugin's
alpha is 0.5 anyway, or `--model-opt activation=relu` on a model whose activation is relu, trains the run that left
them out, so a resume or a sweep's rerun takes it. So are the optimizer's settings whose default is computed, given
at the value they take: `--weight-decay 0` under Adam, whose unset weight decay is 0."""

from __future__ import annotations

import dataclasses
from typing import Any

OPTIONS = {"model_opt": "model", "param_opt": "param"}  # an identity's option mapping, and the setting naming whose


def changed_settings(before: dict[str, Any], now: dict[str, Any]) -> set[str]:
    """The settings of two identities (flat, as config.json holds them) whose values differ, options given at their
    defaults aside (same_up_to_defaults)."""
    before, now = computed_defaults(before), computed_defaults(now)
    return {k for k in set(before) | set(now) if before.get(k) != now.get(k)} - same_up_to_defaults(before, now)


def computed_defaults(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with weight_decay and cooldown left unset (null) as the values the optimizer takes for them
    (OptimConfig.decay: 0.1 for adamw, else 0; cooldown_fraction)."""
    from zoo.optim import OptimConfig

    unset = [k for k in ("weight_decay", "cooldown") if k in settings and settings[k] is None]
    if not unset:
        return settings
    try:
        optim = OptimConfig(settings.get("optimizer", OptimConfig.name))
    except (ValueError, TypeError):  # an unknown optimizer: it differs, and the run's own checks say why
        return settings
    taken = {"weight_decay": optim.decay, "cooldown": optim.cooldown_fraction}
    return {**settings, **{k: taken[k] for k in unset}}


def same_up_to_defaults(before: dict[str, Any], now: dict[str, Any]) -> set[str]:
    """The option settings (OPTIONS) of two identities (flat, as config.json holds them) that differ, but only by
    options given at their defaults: the same model or plugin, with every option at the same value."""
    return {key for key, owner in OPTIONS.items()
            if before.get(key) != now.get(key) and before.get(owner) == now.get(owner)
            and _resolved(key, now.get(owner), before.get(key)) == _resolved(key, now.get(owner), now.get(key)) != {}}


def _resolved(key: str, name: Any, options: Any) -> dict[str, Any]:
    """Every option of model or plugin `name` built from `options`; {} where they build none (an unknown name or
    option, a value it refuses: those differ, and the run's own checks say why)."""
    import zoo.models
    import zoo.param

    if not isinstance(name, str) or not isinstance(options, dict):
        return {}
    try:
        built = zoo.models.config(name, **options) if key == "model_opt" else zoo.param.get(name, **options)
    except (ValueError, TypeError, ImportError):
        return {}
    return {f.name: getattr(built, f.name) for f in dataclasses.fields(built)}
