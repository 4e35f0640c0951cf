"""The run-start report: what theory says of a plugin on a model, and what the diagnostics measure of it."""

from __future__ import annotations

from typing import Any

from zoo.diagnostics import jacobian
from zoo.param.base import Parametrization
from zoo.param.critical import Critical


def run_report(model_name: str, model_cfg: Any, plugin: Parametrization, *, seeds: int = 2, batch: int = 4,
               probes: int = 1) -> dict[str, float]:
    """plugin.report (the `critical` plugin: its sigma_w, sigma_b, mu and infinite-width chi) and, under `critical`,
    the measured one-block APJN at the last block chi_hat ~ chi_J* (Prop. 2.6) over `seeds` initializations, its
    standard error, the correlation length xi = 1 / |ln chi_hat| (eq. 17) and the trainable depth ~ 28 xi (App. L)."""
    out = plugin.report(model_name, model_cfg)
    if isinstance(plugin, Critical):
        chi, err = jacobian.chi_hat(model_name, model_cfg, plugin, seeds=seeds, batch=batch, probes=probes)
        out.update(chi=chi, chi_stderr=err, xi=jacobian.correlation_length(chi),
                   trainable_depth=jacobian.trainable_depth(chi))
    return out
