"""The run-start report: what theory says of a plugin on a model, and what the diagnostics measure of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from zoo.diagnostics import jacobian
from zoo.param.base import Parametrization
from zoo.param.critical import Critical

DEEP = 10  # the slow-approach note compares chi at the last block with chi at DEEP times the depth
OFF_ONE = 0.01  # |chi^L - 1| beyond which a critical point's finite depth is worth a note
APPROACH = 0.99  # |chi - 1| at DEEP times the depth over at the depth, below which chi still tends to 1
SETTLED = 1e-10  # chi's relative change per block (20 in a row) at which it has converged (mean_field_theory.chi_star)
RESOLVED = 1e-50  # the smallest Q whose per-block factor the recursion resolves (its tables of phi start at 1e-30)
ON_LINE = 0.05  # |chi^L - 1| within which the point is on the critical line chi_J* = 1 (the fading note's premise)
FADES = 10.0  # the factor by which the stream's second moment falls or grows over the model's blocks worth a note


def run_report(model_name: str, model_cfg: Any, plugin: Parametrization, *, seeds: int = 2, batch: int = 4,
               probes: int = 1) -> dict[str, float | str]:
    """plugin.report (the `critical` plugin: its sigma_w, sigma_b, mu and infinite-width chi) and, under `critical`,
    the measured one-block APJN at the last block chi_hat ~ chi_J* (Prop. 2.6) over `seeds` initializations, its
    standard error, the correlation length xi = 1 / |ln chi_hat| (eq. 17), the trainable depth ~ 28 xi (App. L), and
    a "note" where the point reaches chi = 1 only far deeper than the model (`slow_approach`), or where a model has
    no block stack to measure."""
    out: dict[str, float | str] = dict(plugin.report(model_name, model_cfg))
    if isinstance(plugin, Critical) and not jacobian.has_blocks(model_name, model_cfg):
        out["note"] = f"chi_hat not measured: {model_name} runs no block stack (zoo.models.layers.Stack) to slice"
    elif isinstance(plugin, Critical):
        chi, err = jacobian.chi_hat(model_name, model_cfg, plugin, seeds=seeds, batch=batch, probes=probes)
        out.update(chi=chi, chi_stderr=err, xi=jacobian.correlation_length(chi),
                   trainable_depth=jacobian.trainable_depth(chi))
        notes = [overflow(chi) or slow_approach(plugin, model_name, model_cfg, chi, err), unresolved(chi, err),
                 fading_stream(plugin, model_name, model_cfg)]
        if any(notes):
            out["note"] = "; ".join(n for n in notes if n)
    return out


def unresolved(chi: float, err: float) -> str | None:
    """The note where chi_hat is 1 within 2 standard errors: xi = 1 / |ln chi| then says how near 1 this estimate
    fell, not the network's correlation length, which is only bounded below, by 1 / |ln(1 - 2 err)|. From one seed
    (err NaN) nothing bounds it."""
    if np.isnan(err) and not np.isnan(chi):
        return (f"chi_hat {chi:.4f} is from one initialization, which gives no standard error: how near 1 it is, and "
                "so xi and the trainable depth, carry no error bar (--seeds 2 or more)")
    if not (err > 0 and abs(chi - 1) <= 2 * err < 1):
        return None
    xi = jacobian.correlation_length(1 - 2 * err)
    return (f"chi_hat is 1 within 2 standard errors ({chi:.4f} +- {err:.4f}): xi >= {xi:.3g} and the trainable depth "
            f">= {28 * xi:.3g} are all it resolves (more --seeds or a larger width narrow it)")


def overflow(chi: float) -> str | None:
    """The note where chi_hat is NaN: the float32 forward pass overflowed before the last block, so the network
    computes no Jacobian there (zoo.diagnostics.jacobian.apjn_from)."""
    if not np.isnan(chi):
        return None
    return ("chi_hat is nan: the stream overflows float32 before the last block at this init (deep in the chaotic "
            "phase), where the network computes no Jacobian; lower sigma_w or the depth")


def slow_approach(plugin: Critical, model_name: str, cfg: Any, chi: float, err: float) -> str | None:
    """A critical point has chi_J* = 1 in the limit of depth (eq. 13); where its kernel map is marginal there
    (chi_K* = 1, eq. 12: erf and tanh at Q* = 0, GELU's half-stable point, pre-LN with mu = 1) chi^l tends to 1 only as
    a power law in l, so at the model's depth L the infinite-width chi^L may still sit visibly off 1. The note says so,
    with chi^L, chi^(DEEP L) and the measured chi_hat +- its standard error, where |chi^L - 1| > OFF_ONE and
    chi^(DEEP L) is closer to 1 without chi having converged by then (None otherwise): a point off the critical one
    settles geometrically at its chi* != 1, a marginal one keeps moving. A model without the infinite-width recursion
    (the transformers, the Mixer) gets the note where its blocks are pre-LN with mu = 1 (marginal at every point)."""
    depth = cfg.depth
    chis = plugin.infinite_width_chis(model_name, cfg, depth)
    if chis is None and getattr(cfg, "pre_ln", False) and float(plugin.for_model(model_name, cfg).mu) ** 2 == 1.0:
        return (f"pre-LN blocks with mu = 1 are critical at every (sigma_w, sigma_b) (Thm 1.3): the stream's variance "
                f"grows linearly in depth, so chi tends to 1 only as 1 + O(1/l), and chi_hat at block {depth} "
                f"({chi:.3f}), xi and the trainable depth read off it grow with the depth (infinite in the limit)")
    if chis is None or len(chis) < depth or abs(chis[-1] - 1) <= OFF_ONE:  # the DEEP L blocks only where needed
        return None
    chis = plugin.infinite_width_chis(model_name, cfg, DEEP * depth, rtol=SETTLED)
    if len(chis) < DEEP * depth:  # converged (geometrically: an ordered or chaotic point's chi* != 1), or overflowed
        return None
    at_depth, deep = float(chis[depth - 1]), float(chis[-1])
    if abs(deep - 1) >= APPROACH * abs(at_depth - 1):  # an ordered or chaotic point settles at its chi* != 1
        return None
    return (f"chi tends to 1 only as a power law in depth (a marginal fixed point, chi_K* = 1): at infinite width "
            f"{at_depth:.3f} at block {depth} and {deep:.3f} at block {DEEP * depth}; measured {chi:.3f}"
            + (" (one seed)" if np.isnan(err) else f" +- {err:.3f}"))


def fading_stream(plugin: Critical, model_name: str, cfg: Any) -> str | None:
    """A point on the critical line chi_J* = 1 keeps the Jacobians near 1, but the forward signal only where the
    kernel map is critical too (chi_K* = 1, eq. 12); where it is not (a ReLU block with mean subtraction: its map is
    sigma_w^2 Var[phi], 2 K (1/2 - 1/(2 pi)) = 0.68 K at sigma_w^2 = 2), the stream's second moment Q falls or grows
    geometrically. The note gives Q^L / Q^0 at infinite width over the model's L blocks where it moved by more than
    FADES either way at a per-block factor that does not tend to 1 deeper (a marginal map, erf's or tanh's at Q* = 0,
    lets Q fall only as a power law: `slow_approach`'s), and mean_subtract=false where that keeps Q."""
    change = _stream_change(plugin, model_name, cfg)
    if (change is None or abs(change[3] - 1) > ON_LINE or 1 / FADES < change[0] < FADES
            or abs(change[2] - 1) < APPROACH * abs(change[1] - 1)):
        return None
    ratio = change[0]
    went = f"to {ratio:.3g}" if ratio >= RESOLVED else f"to below {RESOLVED:g}"
    note = (f"at infinite width the stream's second moment goes from 1 {went} over the {cfg.depth} blocks "
            f"({change[1]:.3g} a block): chi_J = 1 keeps the Jacobians near 1, not the forward signal (this block's "
            "kernel map is not critical there, chi_K* != 1)")
    if getattr(cfg, "mean_subtract", False):
        try:
            plain = _stream_change(plugin, model_name, dataclasses.replace(cfg, mean_subtract=False))
        except ValueError:  # that block has no critical point for this model (GELU without biases)
            plain = None
        if plain is not None and abs(plain[3] - 1) <= ON_LINE and 1 / FADES < plain[0] < FADES:
            note += "; without mean subtraction it is (--model-opt mean_subtract=false)"
    return note


def _stream_change(plugin: Critical, model_name: str, cfg: Any) -> tuple[float, float, float, float] | None:
    """At infinite width from the plugin's point for the model: Q^L / Q^0, the per-block factor Q^L / Q^(L-1), that
    factor at DEEP L (each at the last block where Q is still above RESOLVED), and chi^L; None without the theory or
    where Q overflows."""
    found = plugin.infinite_width(model_name, cfg, DEEP * cfg.depth)
    if found is None or len(found[1]) <= DEEP * cfg.depth:
        return None
    q = found[1]
    last = int(np.flatnonzero(q > RESOLVED)[-1])  # Q^0 = 1 is above it
    at = min(cfg.depth, last)
    if at < 1:
        return None
    return float(q[cfg.depth] / q[0]), float(q[at] / q[at - 1]), float(q[last] / q[last - 1]), float(found[0][at - 1])


def describe(report: Mapping[str, float | str]) -> str:
    """The report on one line: each number as `name value` (4 significant digits), then the note."""
    numbers = ", ".join(f"{k} {v:.4g}" for k, v in report.items() if not isinstance(v, str))
    notes = "; ".join(v for v in report.values() if isinstance(v, str))
    return numbers + (f"; {notes}" if notes else "")
