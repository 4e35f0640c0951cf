"""The diagnostics a training run can carry, as loop hooks (zoo.train.hooks) the command line adds: the
run-start report (what theory says of the plugin on the model and, under `critical`, the measured chi) and the
feature-diversity probe (--diversity LAMBDA, logged with every eval)."""

from __future__ import annotations

import jax.numpy as jnp

import zoo.models
from zoo.config import RunConfig
from zoo.diagnostics.diversity import default_eps, diversity_probe
from zoo.diagnostics.report import describe, run_report
from zoo.train.hooks import Hook, LoopView

PROBE_INPUTS = 256


def diagnostics_hooks(cfg: RunConfig) -> list[Hook]:
    """The run-start report, and with --diversity the diversity probe (a too-shallow model is refused here, before
    anything is written)."""
    hooks = [Hook("run_report", _report, at_start=True)]
    if cfg.loop.diversity is not None:
        depth = cfg.model.depth or zoo.models.config(cfg.model.name, **cfg.model.options).depth
        default_eps(depth, cfg.loop.diversity)
        hooks.append(Hook("diversity", _Diversity(cfg.loop.diversity), every=cfg.loop.eval_every))
    return hooks


def _report(loop: LoopView, step: int) -> None:
    """Before the first step of a fresh run: the plugin's report, said and kept in the summary."""
    s = loop.s
    report = run_report(s.cfg.model.name, s.model_cfg, s.plugin, seeds=2, batch=4, probes=1)
    if report:
        loop.logger.say(f"{s.cfg.param.name}: " + describe(report))
        loop.evals.extra["plugin_report"] = report


class _Diversity:
    """The log-log slope of the residual stream's feature diversity d(eps) at depth fraction `lam` (Depth-muP;
    zoo.diagnostics.diversity) on the first (up to) 256 eval inputs, logged as an eval metric."""

    def __init__(self, lam: float):
        self.lam, self.probe, self.x = lam, None, None

    def __call__(self, loop: LoopView, step: int) -> None:
        if self.probe is None:
            s = loop.s
            idx = next(iter(s.data.eval_indices(min(PROBE_INPUTS, s.cfg.loop.eval_batch_size))))
            self.x = jnp.asarray(s.data.read(s.data.eval_split, idx)["x"])
            self.probe = diversity_probe(s.program, self.lam)
        loop.evals.add(step, {"diversity_slope": self.probe(loop.state, self.x)[1]})
