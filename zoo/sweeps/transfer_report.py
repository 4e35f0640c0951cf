"""The transfer report: a rich table, a PNG (one panel per parametrization: the proxy's loss against log2 LR,
the target at the transferred LR, and the target's own curve when checked) and a JSON of the same numbers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from zoo.config import word
from zoo.files import save_figure
from zoo.sweeps import report
from zoo.sweeps.transfer import Arm, TransferSpec


def _size(size: tuple[int, int]) -> str:
    return f"w{size[0]} d{size[1]}"


def _name(arm: Arm) -> str:
    opts = ", ".join(f"{k}={word(v)}" for k, v in sorted(arm.param_opt.items()))
    return arm.param + (f" ({opts})" if opts else "")


def _lr(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def _spread(values: list[float | None]) -> str:
    """`a..b` over the seeds' values, `diverged` if any seed has none."""
    if any(v is None for v in values):
        return "a seed diverged"
    return f"{min(values):g}..{max(values):g}"


def settings(spec: TransferSpec) -> str:
    """`model, optimizer, N steps, data`: what both parametrizations share."""
    run = spec.run
    proxy = f" (proxy: {spec.proxy_run(run).loop.steps} steps, batch {spec.proxy_run(run).loop.batch_size}; policy " \
        f"{spec.policy.name if spec.policy else 'none'})" if spec.rescaled or spec.policy else ""
    return (f"{run.model.name}, {run.optim.name}, {run.loop.steps} steps, batch {run.loop.batch_size}{proxy}, "
            f"{run.data.name}")


def target_text(arm: Arm) -> str:
    """The target's loss at the transferred LR: mean (+- the sample std s over the target seeds, ddof 1, as
    `seed_noise` takes it), or why there is none."""
    if arm.lr_log2 is None:
        return "not trained (proxy diverged)"
    if arm.target_diverged:
        return "diverged"
    losses = _trained(arm)
    std = f" +- {np.std(losses, ddof=1):.4f} (sample std of {len(losses)} seeds)" if len(losses) > 1 else ""
    return f"{arm.target_loss:.4f}{std}"


def _trained(arm: Arm) -> list[float]:
    """The target seeds' losses at the transferred LR, those that trained."""
    return [v for v in arm.target_losses if v is not None]


def table(arms: list[Arm], spec: TransferSpec) -> Any:
    """One row per parametrization: the proxy's best log2 LR (and per-seed spread), its loss, the target's loss
    at that LR and, when checked, the target's own best LR and how many grid steps the transferred LR misses."""
    from rich.table import Table

    metric = spec.metric.replace("_", " ")
    t = Table(title=f"tune at {_size(spec.proxy)}, train at {_size(spec.target)}: {settings(spec)}")
    t.add_column("param")
    t.add_column("proxy best log2 LR", justify="right")
    if spec.seeds > 1:
        t.add_column(f"per seed ({spec.seeds})", justify="right")
    t.add_column(f"proxy {metric}", justify="right")
    t.add_column(f"target {metric} at it", justify="right")
    if spec.check is not None:
        t.add_column("target's own best log2 LR", justify="right")
        t.add_column(f"its {metric}", justify="right")
        t.add_column("miss (grid steps)", justify="right")
    for arm in arms:
        proxy = arm.proxy.curves[0]
        edge = " (grid edge)" if proxy.at_edge else ""
        row = [_name(arm), _lr(arm.lr_log2) + edge]
        if spec.seeds > 1:
            row.append(_spread(arm.seed_best))
        row += ["all diverged" if proxy.best is None else f"{proxy.best_loss:.4f}", target_text(arm)]
        if spec.check is not None:
            c = arm.target_curve
            if c is None or c.best is None:
                row += ["-", "all diverged" if c is not None else "-", "-"]
            else:
                row += [_lr(c.best_log2_lr) + (" (grid edge)" if c.at_edge else ""), f"{c.best_loss:.4f}",
                        f"{arm.miss:+g}"]
        t.add_row(*row)
    t.caption = verdict(arms, spec)
    return t


def verdict(arms: list[Arm], spec: TransferSpec) -> str:
    """One line: which parametrization's target is better at its transferred LR (the lower loss, seeds averaged;
    a target that trained beats one that diverged). Equal losses are a tie, said as one: neither recipe won, and
    the order of the arms (the one under test first) must not decide it. A proxy whose best LR is the grid's end is
    named: its optimum may lie past the grid, so the LR it handed on is a bound, and so is the comparison."""
    return _comparison(arms, spec) + edge_warning(arms)


def edge_warning(arms: list[Arm]) -> str:
    """`; but the proxy's best LR is on the grid's edge for <param>'s ...` naming the arms whose proxy's best LR is
    the lowest or the highest of the grid, or '' when none is."""
    edge = [a for a in arms if a.proxy.curves[0].at_edge]
    if not edge:
        return ""
    which = ", ".join(f"{_name(a)}'s (log2 LR {_lr(a.lr_log2)})" for a in edge)
    return f"; but the proxy's best LR is on the grid's edge for {which}: its optimum may lie past the grid, " \
        "widen --lrs"


def _comparison(arms: list[Arm], spec: TransferSpec) -> str:
    losses = {_name(a): a.target_loss for a in arms}
    if len(arms) < 2:
        return f"target {spec.metric.replace('_', ' ')}: {target_text(arms[0])}"
    (a, la), (b, lb) = losses.items()
    if la is None and lb is None:
        return f"neither target trained at its transferred LR ({a}: {target_text(arms[0])}, {b}: " \
               f"{target_text(arms[1])})"
    if la == lb:
        return f"the targets tie: {a}'s {target_text(arms[0])}, {b}'s {target_text(arms[1])}"
    first = lb is None or (la is not None and la < lb)
    (win, w), (lose, o) = ((a, arms[0]), (b, arms[1])) if first else ((b, arms[1]), (a, arms[0]))
    noise = seed_noise(arms)
    if la is not None and lb is not None and noise is not None and abs(la - lb) < noise:
        return (f"{win}'s target is lower, within the seeds' noise: {target_text(w)} vs {lose}'s {target_text(o)} "
                f"(difference {abs(la - lb):.4f} < 2 standard errors {noise:.4f}; more --target-seeds would tell)")
    return f"{win}'s target is better: {target_text(w)} vs {lose}'s {target_text(o)}"


def seed_noise(arms: list[Arm]) -> float | None:
    """Two standard errors of the difference of the arms' mean target losses, 2 sqrt(s_a^2 / n_a + s_b^2 / n_b)
    (sample variances over the target seeds): None unless each arm has two or more seeds that trained."""
    losses = [_trained(arm) for arm in arms]
    if any(len(x) < 2 for x in losses):
        return None
    return 2.0 * float(np.sqrt(sum(np.var(x, ddof=1) / len(x) for x in losses)))


def plot(arms: list[Arm], spec: TransferSpec, path: Path) -> Path:
    """One panel per parametrization, on a shared y range: the proxy curve (and the target's checked curve);
    a diamond at the target's loss at the transferred LR (an x at the top if it diverged); a dotted line there."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(arms), figsize=(6.0 * len(arms), 4.6), squeeze=False)
    for ax, arm in zip(axes[0], arms, strict=True):
        shown = report.Summary(arm.proxy.curves + (arm.target.curves if arm.checked and arm.target else []),
                               arm.proxy.axis if not arm.checked else _axis(spec), arm.proxy.grid_step, spec.metric)
        report.panel(ax, shown, f"{_name(arm)}: tune at {_size(spec.proxy)}, train at {_size(spec.target)}")
        roles = {shown.label(c): role for c, role in zip(shown.curves, ("proxy", "target"), strict=False)}
        for line in ax.get_lines():
            if line.get_label() in roles:
                line.set_label(f"{roles[line.get_label()]}: {line.get_label()}")
        if arm.lr_log2 is not None:
            ax.axvline(arm.lr_log2, color="0.4", ls=":", lw=1)
    _share_y(axes[0])
    for ax, arm in zip(axes[0], arms, strict=True):
        if arm.lr_log2 is not None:
            y, marker = (arm.target_loss, "D") if arm.target_loss is not None else (ax.get_ylim()[1], "X")
            ax.plot([arm.target_lr_log2], [y], marker, color="tab:red", ms=10, mec="k", mew=0.8, clip_on=False,
                    zorder=5, label=f"target {_size(spec.target)} at the transferred LR: {target_text(arm)}")
        ax.legend(fontsize=8)
    fig.suptitle(verdict(arms, spec) + f"  ({settings(spec)})", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def _axis(spec: TransferSpec) -> str:
    """What differs between proxy and target: width, depth or both (the panel's curve labels)."""
    width, depth = spec.proxy[0] != spec.target[0], spec.proxy[1] != spec.target[1]
    return "shape" if width and depth else "depth" if depth else "width"


def _share_y(axes: Any) -> None:
    """The union of the panels' y ranges on every panel (log scale if any panel chose it)."""
    log = any(ax.get_yscale() == "log" for ax in axes)
    lo = min(ax.get_ylim()[0] for ax in axes)
    hi = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        if log:
            ax.set_yscale("log")
        ax.set_ylim(max(lo, 1e-6) if log else lo, hi)


def to_json(arms: list[Arm], spec: TransferSpec) -> dict[str, Any]:
    """The report's numbers (None where diverged or not run)."""

    def curve(c: report.Curve) -> dict[str, Any]:
        return {"log2_lr": c.log2_lr.tolist(), "loss": [None if math.isnan(v) else float(v) for v in c.loss],
                "diverged": c.diverged.tolist(), "best_log2_lr": c.best_log2_lr, "best_loss": c.best_loss,
                "at_grid_edge": c.at_edge}

    return {"proxy": {"width": spec.proxy[0], "depth": spec.proxy[1]},
            "target": {"width": spec.target[0], "depth": spec.target[1]},
            "metric": spec.metric, "run": spec.run.to_json(), "compare": spec.compare, "lrs": spec.lrs,
            "policy": spec.policy.spec() if spec.policy else {"name": "none", "options": {}},
            "proxy_batch_size": spec.proxy_batch or spec.run.loop.batch_size,
            "proxy_steps": spec.proxy_steps or spec.run.loop.steps,
            "seeds": spec.seeds, "target_seeds": spec.target_seeds, "verdict": verdict(arms, spec),
            "arms": [{"param": a.param, "param_opt": a.param_opt, "proxy": curve(a.proxy.curves[0]),
                      "proxy_seed_best_log2_lr": a.seed_best, "transferred_log2_lr": a.lr_log2, "transferred_lr": a.lr,
                      "target_lr": None if a.lr is None else a.lr * a.factor,
                      "target_settings": {r.setting: r.record() for r in a.rules},
                      "target_loss": a.target_loss, "target_diverged": a.target_diverged,
                      "target_seed_losses": a.target_losses,
                      "target_check": curve(a.target_curve) if a.checked and a.target else None,
                      "miss_grid_steps": a.miss} for a in arms]}


def write(arms: list[Arm], spec: TransferSpec) -> list[Path]:
    """OUT/transfer.png, OUT/transfer.json and each arm's target as a train.py config (OUT/<param>/target.json),
    written atomically; returns [png, json, *targets]. An arm with no transferred LR (every proxy LR diverged) has
    no target: a target.json left by an earlier transfer into OUT (another grid) is removed, not left beside this
    transfer's report as if it were its target."""
    import json

    from zoo.files import write_atomic
    from zoo.sweeps.transfer import target_config

    png = plot(arms, spec, spec.out / "transfer.png")
    write_atomic(spec.out / "transfer.json", json.dumps(to_json(arms, spec), indent=1) + "\n")
    targets = []
    for arm, run in zip(arms, spec.arms(), strict=True):
        path = spec.out / arm.param / "target.json"
        if arm.lr_log2 is None:
            path.unlink(missing_ok=True)
            continue
        targets.append(path)
        write_atomic(path, json.dumps(target_config(spec, run, arm.lr * arm.factor, arm.rules), indent=1) + "\n")
    return [png, spec.out / "transfer.json", *targets]
