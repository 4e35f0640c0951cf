"""A scaling policy audited: the run measured at two or more batch sizes (or horizons), each under the settings the
policy maps the proxy's to (zoo.policy), every parameter's realised quantities fitted against the batch size (or the
steps) and judged against the law the policy states, as zoo.audit judges the plugin's across width and depth.

Per parameter, at batch B and horizon T under the policy's (lr', wd', b2', eps', warmup'), with s(0) the schedule's
first factor (the warmup's 1/W', or 1/(W' + 1) under --warmup-peak after):

    judged
    lr            lr' s(0) (its family's realised step: Adam's first update RMS, SGD's step per unit gradient, Muon's
                  per unit of its Newton-Schulz output), each times the plugin's constant multiplier at this width
    wd_shrink     lr' s(0) wd'                   the decoupled decay's per-step shrink (0 where no decay)
    timescale     B / (lr' wd' D)                the EMA timescale in epochs of the budget D = B T, at the peak LR:
                                                 the measured shrink over the schedule's first factor s(0)
    b2_half_life  B ln(1/2) / ln(b2)             Adam's second moment's half-life in examples (b2 realised: its v
                                                 after a zero-gradient update over its v before)
    eps_scale     eps'                           Adam's epsilon in raw-gradient units, eps' |g| / sqrt(v)
    reported
    eps_ratio     eps' / sqrt(v)                 beside the batch's gradient: constant under sde where the noise
                                                 dominates the gradient (its RMS ~ B^-1/2), no law stated

At a width other than the base the plugin's factors are constant along the axis, so a factor applied twice (a policy
that rescaled a per-parameter rule, a decay multiplied by the LR multiplier) fails here or in the width table.
"""

from __future__ import annotations

import dataclasses
import math

from zoo.audit import judge
from zoo.audit.laws import ADAM_EPSILON
from zoo.audit.sweep import Axis, ParamResult, Run, measure_size, value
from zoo.optim import OptimConfig
from zoo.param import families
from zoo.policy import Change, ScalingPolicy
from zoo.schedule import last_step, schedule_shape

QUANTITIES = ("lr", "wd_shrink", "timescale", "b2_half_life", "eps_scale", "eps_ratio")
STEP = {"adam": "update_rms", "sgd": "step_size", "spectral": "spectral_step"}
HALF = math.log(0.5)


def stated(optim: OptimConfig, change: Change) -> dict[str, float | None]:
    """The policy's law of each quantity at one point (log, None where it has none)."""
    lr = optim.lr * first_factor(optim, change)
    shrink = lr * optim.decay
    peak = optim.lr * optim.decay
    return {"lr": math.log(lr), "wd_shrink": math.log(shrink) if shrink > 0 else None,
            "timescale": math.log(change.batch / (peak * change.batch * change.steps)) if shrink > 0 else None,
            "b2_half_life": math.log(change.batch * HALF / math.log(optim.b2)) if 0 < optim.b2 < 1 else None,
            "eps_scale": math.log(optim.eps), "eps_ratio": None}


def first_factor(optim: OptimConfig, change: Change) -> float:
    """The schedule's factor at the first step, s(0) (the warmup's 1 / D, zoo.schedule.warmup_span)."""
    return float(schedule_shape(optim, last_step(change.steps))(0))


def measured(q: str, n: dict[str, float], family: str, optim: OptimConfig, change: Change, null: bool
             ) -> float | None:
    """The realised value of `q` at one point (None where not measurable there)."""
    if q == "lr":
        return value(STEP[family], n, optim.eps, null)
    if q == "wd_shrink":
        return n.get("wd_shrink")
    if q == "timescale":
        shrink = n.get("wd_shrink", 0.0)
        peak = shrink / first_factor(optim, change)
        return change.batch / (peak * change.batch * change.steps) if shrink > judge.NO_DECAY else None
    if q == "b2_half_life":
        b2 = n.get("b2")
        return change.batch * HALF / math.log(b2) if b2 is not None and 0 < b2 < 1 else None
    return value(q, n, optim.eps, null)


def policy_axis(run: Run, policy: ScalingPolicy, axis: str, points: list[int], proxy: tuple[int, int], width: int,
                depth: int, base_width: int, base_depth: int, tol: float, seed: int) -> Axis:
    """The run at each batch size (axis batch_size) or horizon (steps) of `points`, at one width and depth, under the
    settings `policy` maps from the proxy's (batch, steps) = `proxy`; each parameter judged against the policy."""
    changes = [Change(proxy[0], p if axis == "batch_size" else proxy[0], proxy[1], p if axis == "steps" else proxy[1])
               for p in points]
    optims = [policy.apply(run.optim, c)[0] for c in changes]
    sizes = [measure_size(dataclasses.replace(run, optim=o, batch_size=c.batch, horizon=c.steps), width, depth,
                          base_width, base_depth, seed) for o, c in zip(optims, changes, strict=True)]
    laws = [stated(o, c) for o, c in zip(optims, changes, strict=True)]
    nulls = [judge.null_directions({p: n.get("grad_rms", 0.0) for p, n in s.numbers.items()}) for s in sizes]
    out = {}
    for path, tag in sizes[-1].tags.items():
        family = families.family(run.optim.name, tag.kind, run.optim.muon_io)
        checks = []
        for q in QUANTITIES:
            if q in ("b2_half_life", "eps_scale", "eps_ratio") and (family != "adam" or run.optim.name not in
                                                                     ADAM_EPSILON):
                continue
            values = [measured(q, s.numbers.get(path, {}), family, o, c, path in null)
                      for s, o, c, null in zip(sizes, optims, changes, nulls, strict=True)]
            logs = [law[q] for law in laws]
            no_law = any(v is None for v in logs)
            if q == "timescale" and all(v is None for v in values) and no_law:
                checks.append(judge.Check(q, values, None, None, True, "no decay"))
                continue
            checks.append(judge.check(q, points, values, None if no_law else logs, tol, "null direction",
                                      judged=q != "eps_ratio"))
        out[path] = ParamResult(tag.kind, tag.kind, family, tag.branch, checks)
    return Axis(axis, points, out)


def audit_policy(run: Run, policy: ScalingPolicy, batch_sizes: list[int], horizons: list[int],
                 proxy: tuple[int | None, int | None], width: int, depth: int, base_width: int, tol: float = 0.1,
                 seed: int = 0) -> list[Axis]:
    """The policy's axes: batch sizes (at the proxy's steps) and horizons (at the proxy's batch), at `width` over
    `base_width` and `depth` (its own base); the proxy defaults to the smallest batch size and horizon."""
    b0 = proxy[0] or (min(batch_sizes) if batch_sizes else run.batch_size)
    t0 = proxy[1] or (min(horizons) if horizons else run.horizon or 1)
    return [policy_axis(run, policy, axis, sorted(points), (b0, t0), width, depth, base_width, depth, tol, seed)
            for axis, points in (("batch_size", batch_sizes), ("steps", horizons)) if points]
