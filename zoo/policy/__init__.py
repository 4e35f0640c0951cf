"""Scaling policies and their registry: a proxy's tuned optimizer settings mapped to a target's when the batch
size, the horizon or the data change (issue 42); the plugin (zoo.param) keeps width and depth (zoo.policy.base states
how the two compose).

    policy = zoo.policy.get("sde")                                 # none | sde | timescale | fitted (law=PATH)
    target, rules = policy.apply(cfg.optim, Change(proxy_batch=16, batch=256, proxy_steps=500, steps=500))
    zoo.policy.register(MyPolicy)                                  # or an entry point in group zoo.policies

A policy is one small file and one line below; outside packages add theirs as plugins are added (zoo.registry).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.policy.base import SETTINGS, Change, Rule, ScalingPolicy
from zoo.policy.fitted import Fitted
from zoo.policy.none import NoPolicy
from zoo.policy.registry import POLICIES, get, names, register
from zoo.policy.sde import SDE
from zoo.policy.timescale import Timescale


def mapped_run(run: Any, policy: ScalingPolicy, change: Change) -> tuple[Any, float]:
    """A run config (zoo.config.RunConfig, the proxy's) at the change's batch size and steps under the settings
    `policy` maps its own to, and the policy's LR factor lr' / lr (an LR sweep's grid, in the proxy's units, times
    it: every policy's LR rule is a factor, and the rest of its map does not depend on the LR's value)."""
    optim, rules = policy.apply(dataclasses.replace(run.optim, lr=1.0), change)
    settings = {r.setting: getattr(optim, r.setting) for r in rules if r.setting != "lr"}
    return run.replace(batch_size=change.batch, steps=change.steps, **settings), optim.lr


for _cls in (NoPolicy, SDE, Timescale, Fitted):
    register(_cls)

__all__ = ["POLICIES", "SETTINGS", "Change", "Rule", "ScalingPolicy", "get", "mapped_run", "names", "register"]
