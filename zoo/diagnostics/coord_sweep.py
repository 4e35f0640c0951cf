"""The coordinate-check experiment (`python -m zoo.coord_check`): does a plugin scale activations the way its theory
says?

Trains each width (and depth) for a few steps on one random batch, measures the RMS of every intermediate's
change h_t - h_0 (zoo.diagnostics.coord), fits the log-log slope per layer and step, and compares it with the
slope the plugin's stated rules predict (TP IVb section 3, TP VI section 7; zoo.diagnostics.verdict). In depth it
also measures the change the residual-branch parameters cause alone, the part that scales like L^(1 - alpha -
gamma) (the input and readout layers' Theta(1) change dominates the total at practical depths). In width it also
measures, and judges, the change each part's parameters (each kind, the readout's bias apart) cause alone at every
layer they reach, n^-r of that part's own rule (zoo.param.predict.part_slopes): the total's slope is only the
slowest part's, so a rule off by a power of n hides in it (on the 3072-input MLP-ResNet the input layer's change
swamps every hidden row). A plugin that theory calls unstable along the axis (a growing change, or an init that
blows up) fails whatever the slopes.

Unless an LR is given, it is chosen from a first measurement at the smallest size (zoo.diagnostics.coord_lr): the
largest of 1e-3, 1e-3/sqrt(10), 1e-4, ... at which no activation moves by more than `linear_limit` of its RMS at
init, so the changes stay in the linear regime where theory's slopes show already at small sizes. A FAIL because
theory calls the plugin unstable also says whether the measured changes grow significantly (verdict.measured_growth).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

import zoo.models
import zoo.param
from zoo.config import ParamPart
from zoo.diagnostics import coord, coord_plot, verdict
from zoo.diagnostics.coord_lr import FIRST_LR, LINEAR_LIMIT, choose_lr, linear_change
from zoo.diagnostics.inputs import random_batch
from zoo.diagnostics.records import to_json
from zoo.files import write_atomic
from zoo.optim import OptimConfig
from zoo.param import Parametrization, predict


@dataclasses.dataclass(frozen=True)
class CoordSpec:
    """What to check: a model (typed options) under a plugin and optimizer; lr None: chosen (module docstring)."""

    model: str = "mlp_resnet"
    param: str = "mup"
    param_opt: dict[str, Any] = dataclasses.field(default_factory=dict)
    model_opt: dict[str, Any] = dataclasses.field(default_factory=dict)
    optimizer: str = "adam"
    muon_io: bool = False  # Muon also on the input and output layers
    lr: float | None = None
    steps: int = 3
    seeds: int = 3
    batch: int = 16
    tol: float = 0.15
    linear_limit: float = LINEAR_LIMIT


def check_sweep(spec: CoordSpec, axis: str, sizes: Sequence[int]) -> Parametrization:
    """The sweep's plugin, once its sizes and steps are checked (before anything runs: a command that asks for
    several sweeps refuses a bad one before the first)."""
    if len(set(sizes)) != len(sizes) or len(sizes) < 2:
        raise ValueError(f"a coordinate check fits slopes over at least two different {axis}s, each once; got "
                         f"{', '.join(map(str, sizes))}")
    plugin = zoo.param.get(spec.param, **spec.param_opt)
    if axis == "depth":
        verdict.check_depths(sizes, plugin)
    coord.check_steps(plugin, spec.steps)
    return plugin


def coord_sweep(spec: CoordSpec, axis: str, sizes: list[int], fixed: dict[str, Any]) -> dict[str, Any]:
    """One sweep over width or depth: data, slopes, expectations and verdicts (dropout off unless asked)."""
    plugin = check_sweep(spec, axis, sizes)
    overrides = {**spec.model_opt, **fixed}
    if "dropout" in {f.name for f in dataclasses.fields(zoo.models.config(spec.model))}:
        overrides.setdefault("dropout", 0.0)  # the change h_t - h_0 of a deterministic step
    optim_cfg = OptimConfig(name=spec.optimizer, lr=FIRST_LR if spec.lr is None else spec.lr, muon_io=spec.muon_io)
    # base width: the smallest (every plugin is SP there); base depth 1: every depth is then well inside the
    # 1/sqrt(L) regime, where (1 + v/L)^L is already near its limit e^v (a base of min(depths) makes the shallowest
    # run unscaled and tilts the slopes by finite-depth terms). A base given as a model option is kept.
    base_key = "base_width" if axis == "width" else "base_depth"
    base = {base_key: overrides.get(base_key) or (min(sizes) if axis == "width" else 1)}
    cfg = zoo.models.config(spec.model, **{**overrides, **base, axis: min(sizes)})
    batch = random_batch(cfg, spec.batch, jax.random.key(1234))
    seeds = list(range(spec.seeds))

    def run_at(size: int) -> coord.CoordRun:
        return coord.CoordRun(spec.model, plugin, spec.steps, optim_cfg, batch, branch=axis == "depth",
                              parts=axis == "width", **{**overrides, **base, axis: size})

    first = run_at(min(sizes))
    if spec.lr is None:
        lr, measured, change = choose_lr(lambda lr: first(seeds, lr), spec.linear_limit)
    else:
        lr, measured = spec.lr, first(seeds)
        change = linear_change(measured)
    runs = [measured if size == min(sizes) else run_at(size)(seeds, lr) for size in sizes]
    if axis == "depth":
        runs = [dataclasses.replace(r, total=verdict.at_depth_fractions(r.total, d),
                                    branch=verdict.at_depth_fractions(r.branch, d))
                for r, d in zip(runs, sizes, strict=True)]
    data = coord.geometric_mean([r.total for r in runs])
    # the branch parameters' part where it is one power law, L^(1 - alpha - gamma): the residual stream and the
    # logits (a pre-activation adds its own weights' L^-gamma, a transient at small depths; the logits do not move
    # under a zero readout)
    branch = {k: v for k, v in coord.geometric_mean([r.branch for r in runs]).items()
              if verdict.group_of(k) in ("stream", "output") and (v > 0).any()}
    groups = {verdict.group_of(k) for k in data}
    exp = verdict.expected(spec.model, cfg, plugin, spec.optimizer, axis, sorted(groups), spec.muon_io)
    stable = not exp.unstable
    init = coord.geometric_mean([r.init for r in runs]) if axis == "width" else None  # layer -> [size] RMS(h_0)
    verdicts = verdict.judge(coord.slopes(sizes, data), data, exp.total, spec.tol, stable, init=init)
    branch_verdicts = verdict.judge(coord.slopes(sizes, branch), branch, exp.branch, spec.tol, stable)
    parts = coord.part_means(runs, first.reach()) if axis == "width" else {}
    part_verdicts = verdict.judge_parts(sizes, parts, exp.parts, spec.tol, stable, exp.first_parts, init)
    growth = verdict.measured_growth(sizes, [r.total for r in runs], exp.total) + verdict.measured_growth(
        sizes, [{k: r.branch[k] for k in branch} for r in runs], exp.branch, branch=True)
    return {"axis": axis, "sizes": sizes, "data": data, "branch": branch, "parts": parts, "expected": exp,
            "verdicts": verdicts, "branch_verdicts": branch_verdicts, "part_verdicts": part_verdicts,
            "growth": growth, "growth_summary": verdict.growth_summary(growth), "lr": lr, "linear_change": change,
            "config": {**overrides, **base}}


def all_verdicts(result: dict[str, Any]) -> list[verdict.LayerVerdict]:
    """The verdicts of the totals, the branch part (depth) and every part (width)."""
    return (result["verdicts"] + result["branch_verdicts"] +
            [v for vs in result.get("part_verdicts", {}).values() for v in vs])


def passed(result: dict[str, Any]) -> bool:
    """Every layer passes, in the total and in each part, and theory calls the plugin stable along the axis."""
    return not result["expected"].unstable and all(v.passed for v in all_verdicts(result))


def failed_groups(result: dict[str, Any]) -> list[str]:
    """The groups with a failing total or branch row, then the parts with a failing row ("hidden part")."""
    parts = [f"{p} part" for p, vs in result.get("part_verdicts", {}).items() if not all(v.matches for v in vs)]
    return sorted({v.group for v in result["verdicts"] + result["branch_verdicts"] if not v.matches}) + parts


def title(spec: CoordSpec, result: dict[str, Any]) -> str:
    lr = f"lr={result['lr']:.3g}" + ("" if spec.lr is not None else " (chosen)")
    verdict_text = "PASS" if passed(result) else "FAIL (" + ", ".join(failed_groups(result) or
                                                                      ["unstable by theory"]) + ")"
    plugin = ParamPart(spec.param, spec.param_opt)  # named as --param-opt takes its options
    return f"{spec.model} / {plugin} / {spec.optimizer} {lr}: {verdict_text}"


def write(spec: CoordSpec, result: dict[str, Any], out: Path) -> Path:
    """coord_check_<axis>.png (and _branch.png in depth) and coord_check_<axis>.json in `out`; the PNG's path."""
    axis, sizes, exp = result["axis"], result["sizes"], result["expected"]
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"coord_check_{axis}.png"
    head, failed = title(spec, result), failed_groups(result)
    coord_plot.plot(sizes, result["data"], exp.total, png, head, axis, failed)
    if result["branch"]:
        coord_plot.plot(sizes, result["branch"], exp.branch, out / f"coord_check_{axis}_branch.png",
                        head + " (branch parameters alone)", axis, failed)
    for p, data in result.get("parts", {}).items():  # a figure where a part shows what its total hides
        bad = [v.group for v in result["part_verdicts"][p] if not v.matches]
        if bad:
            coord_plot.plot(sizes, data, exp.parts[p], out / f"coord_check_{axis}_{p}.png",
                            head + f" ({p} parameters alone)", axis, bad)
    record = {
        "model": spec.model, "param": spec.param, "param_opt": spec.param_opt, "optimizer": spec.optimizer,
        "lr": result["lr"], "lr_chosen": spec.lr is None, "linear_change": result["linear_change"],
        "steps": spec.steps, "seeds": spec.seeds, "tol": spec.tol, "axis": axis, "sizes": sizes,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in result["config"].items()},
        "expected": exp.total, "expected_branch": exp.branch, "unstable": exp.unstable,
        "layers": {v.layer: {**dataclasses.asdict(v), "rms_change": result["data"][v.layer].tolist()}
                   for v in result["verdicts"]},
        "branch_layers": {v.layer: {**dataclasses.asdict(v), "rms_change": result["branch"][v.layer].tolist()}
                          for v in result["branch_verdicts"]},
        "expected_parts": {p: exp.parts[p] for p in result.get("parts", {})},
        "part_layers": {p: {v.layer: {**dataclasses.asdict(v), "rms_change": result["parts"][p][v.layer].tolist()}
                            for v in vs} for p, vs in result.get("part_verdicts", {}).items()},
        "growth": [dataclasses.asdict(g) for g in result["growth"]], "passed": passed(result),
    }
    write_atomic(out / f"coord_check_{axis}.json", to_json(record))
    return png


def diverged_hint(spec: CoordSpec, result: dict[str, Any]) -> str | None:
    """Why slopes are missing (and layers fail) where the training diverged: how many layers have a change that is
    not finite (NaN or inf at some size and step), at which sizes, and at which learning rate."""
    data = result["data"]
    bad = [k for k, v in data.items() if not np.all(np.isfinite(v))]
    if not bad:
        return None
    sizes = [n for i, n in enumerate(result["sizes"]) if any(not np.all(np.isfinite(data[k][i])) for k in bad)]
    return (f"the training diverged at lr {result['lr']:.3g}: the changes of {len(bad)} of {len(data)} layers are "
            f"not finite at {result['axis']} {', '.join(map(str, sizes))}, so they have no slope; give a smaller --lr")


def readout_hint(spec: CoordSpec, result: dict[str, Any]) -> str | None:
    """Why only shrinking output changes fail at small widths, when that is what the result shows: a stable plugin, the
    output the only failing group, its slopes within 1/2 below the expected one (the n^-1/2 term's most), and a
    random readout (zero_init off as the plugin reads it, or a readout tied to the input embedding, which it leaves
    random)."""
    output = [v for v in result["verdicts"] if v.group == "output" and not v.matches]
    only = failed_groups(result) == ["output"] and not result["expected"].unstable
    if result["axis"] == "width" and only and output and \
            all(v.expected - 0.5 < s < v.expected for v in output for s in v.slopes if s == s) and \
            not result["expected"].zero_readout:
        return ("hint: only shrinking output changes fail. A random readout V0 adds V0 . dh / n to the logits' "
                "change, a term that shrinks like n^-1/2 and tilts the slope below its prediction at small widths; "
                "check with --param-opt zero_init=true (muP allows a zero readout; a readout tied to the embedding "
                "stays random: untie it) or at larger widths.")
    return None


CLOSING = 0.9  # a lower-order term's gap at the last pair of widths against the first: (n1 / n2)^1/2 or less


def lower_order_hint(spec: CoordSpec, result: dict[str, Any]) -> str | None:
    """Why a stable plugin's rows fail in width when each failing row shrinks faster than predicted, by less than 1/2,
    and less so between the larger widths: a change whose coherent sum ~ n sits beside an incoherent (CLT) one
    ~ n^1/2, as c n (1 + k n^-1/2), has the local slope of its prediction minus about (k/2) n^-1/2, a gap that closes
    like n^-1/2 (at most CLOSING of the first pair's at the last pair), where a rule off by a power of n keeps its gap
    (a hidden LR with an extra m^-0.3: -0.3 at every pair). At the widths a CPU runs the closing gap can pass the
    tolerance (a random readout's V0 . dh / n, Adam's readout update dV . h over a batch); the same rows at 4x the
    widths show it. Three widths or more; left to `readout_hint` or `mixed_parts_hint` where one applies. In depth
    the same test finds a finite-depth correction (a sum over L blocks, c L^-a (1 + k / L)), whose gap closes too:
    CompleteP under Adam at depths 4..32 (-0.16 in its first branches, passing at 16..128)."""
    sizes = result["sizes"]
    changes = {"": result["data"], "branch": result.get("branch", {}), **result.get("parts", {})}
    rows = [(v, changes[""][v.layer]) for v in result["verdicts"] if not v.matches]
    rows += [(v, changes["branch"][v.layer]) for v in result["branch_verdicts"] if not v.matches]
    rows += [(v, changes[p][v.layer]) for p, vs in result.get("part_verdicts", {}).items() for v in vs
             if not v.matches]
    width = result["axis"] == "width"
    if len(sizes) < 3 or result["expected"].unstable or not rows or \
            (width and (readout_hint(spec, result) or mixed_parts_hint(spec, result))):
        return None
    for v, data in rows:
        low = min(v.expected, v.expected if v.first is None else v.first)
        finite = [s for s in v.slopes if s == s]
        if not finite or not all(low - 0.5 < s <= low for s in finite):
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            local = np.diff(np.log(np.asarray(data, np.float64)), axis=0) / np.diff(np.log(sizes))[:, None]
        gap = low - local  # [pair, step]: how far each pair's slope falls below the prediction
        seen = np.isfinite(gap[0]) & np.isfinite(gap[-1])
        if not seen.any() or not np.all(gap[-1][seen] <= CLOSING * gap[0][seen]):
            return None
    larger = ",".join(str(4 * n) for n in sizes)
    if not width:
        return (f"hint: every failing row shrinks faster than predicted, by less than 1/2 in slope and less between "
                f"the larger depths, as a finite-depth correction does (~ 1/L beside the sum over blocks the rule "
                f"scales): it tilts slopes fitted at depths {', '.join(map(str, sizes))}; check that the gap closes "
                f"at --depths {larger} (docs/diagnostics.md: corrections of a lower order).")
    return (f"hint: every failing row shrinks faster than predicted, by less than 1/2 in slope and less between the "
            f"larger widths, as a term of a lower order does (a sum over the width's coordinates that cancels, ~ "
            f"n^1/2, beside one that adds up, ~ n): it tilts slopes fitted at widths {', '.join(map(str, sizes))}; "
            f"check that the gap closes at --widths {larger} (docs/diagnostics.md: corrections of a lower order).")


def stream_start_hint(spec: CoordSpec, result: dict[str, Any]) -> str | None:
    """Why a pre-LN transformer's changes grow with depth when its residual stream starts far below the branches.

    x_l = x_0 + a L^-alpha sum_{k<l} branch_k: with embeddings of std s << a, the stream before block l has RMS
    about sqrt(s^2 + a^2 l L^-2alpha), so the first blocks' LayerNorm divides their input's change by about
    a L^-alpha and the branch multiplier cancels there; the depth limit (TP6 eq. 6) assumes a Theta(1) stream from
    the start, which the first block reaches only where s > a L^-alpha, at L >~ (a/s)^(1/alpha) (Depth-muP's
    alpha = 1/2: (a/s)^2; CompleteP's alpha = 1: a/s)."""
    std = result["config"].get("embed_std", getattr(zoo.models.config(spec.model), "embed_std", None))
    growing = [v for v in result["verdicts"] + result["branch_verdicts"]
               if not v.matches and v.group == "stream" and max(v.slopes) > 0]
    plugin = zoo.param.get(spec.param, **spec.param_opt)
    alpha, a = float(plugin.alpha), abs(float(plugin.branch_mult))
    if result["axis"] != "depth" or std is None or std >= 0.5 or not growing or alpha <= 0 or a <= std:
        return None
    return (f"hint: the residual stream's changes grow with depth, and the stream starts at the embeddings' std "
            f"{std:g}, far below the Theta(1) branches: a pre-LN block divides its input's change by the stream's "
            f"RMS, which before the first blocks is mostly branches (a L^-{alpha:g} each), so there the branch "
            f"multiplier L^-{alpha:g} cancels and the depth limit is reached only at L >~ "
            f"{(a / std) ** (1 / alpha):.0f}; check with --model-opt embed_std=1 (a Theta(1) stream start).")


def mixed_parts_hint(spec: CoordSpec, result: dict[str, Any]) -> str | None:
    """Why hidden and stream changes fall below their prediction in width when it is the slowest of several laws.

    Their change sums one part per kind k of the parameters before the readout, each ~ n^-r_k (zoo.param.predict);
    the prediction -min_k r_k is the sum's limit, but where a part that shrinks faster (the Mixer's channel weights
    under NTK, n^-1/2, beside its token mixing's scalar kind, n^0) is still the larger, the measured slope lies
    between the laws. Freezing the kinds that set the prediction checks the other parts' law alone."""
    failing = [s for v in result["verdicts"] if v.group in ("hidden", "stream") and not v.matches
               for s in v.slopes if s == s]
    if result["axis"] != "width" or result["expected"].unstable or not failing:
        return None
    plugin = zoo.param.get(spec.param, **spec.param_opt)
    kinds, _ = verdict.model_kinds(spec.model, zoo.models.config(spec.model, **result["config"]), plugin)
    r = {k: v for k, v in predict.feature_exponents(plugin.table_for, spec.optimizer, kinds, plugin.spectral_c,
                                                      spec.muon_io, plugin.frozen_kinds()).items() if k != "output"}
    slow = min(r.values(), default=0.0)
    lead = [k for k in sorted(r) if r[k] == slow]
    rest = min((v for v in r.values() if v > slow), default=None)
    if rest is None or not all(-max(r.values()) - spec.tol <= s < -slow for s in failing):
        return None
    freeze = ",".join([*plugin.frozen_kinds(), *lead])
    return (f"hint: the hidden and stream changes sum parts that scale differently: the {' and '.join(lead)}-kind "
            f"parameters' like n^{0.0 - slow:+.2f} (the prediction, the sum's limit), the others' like n^{-rest:+.2f} "
            f"or faster, still the larger at these widths, so the slopes ({min(failing):+.2f}..{max(failing):+.2f}) "
            f"lie between; check the others alone with --param-opt freeze={freeze} (predicted {-rest:+.2f}), or "
            "at larger widths.")


HINTS = (diverged_hint, readout_hint, stream_start_hint, mixed_parts_hint, lower_order_hint)  # printed under a result
