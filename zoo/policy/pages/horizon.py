"""The sign and size of the horizon exponent: the best Adam LR as a power of the number of steps T, lr* ~ T^e, under
a cosine decay and under warmup-stable-decay (constant, then a linear decay over the last 20%), at a fixed batch.

Bjorck et al. (arXiv 2409.19913) fit e = -0.32 for LLMs (the LR falls as the horizon grows); Step Law (arXiv
2503.04715) fits the opposite sign; marin finds the optimum still drifting up at long horizons
(field_scan_2026-11.md section 1). One LR sweep per (schedule, horizon), each a zoo.sweep dir; zoo.fit locates each
horizon's best log2 LR with its interval and fits e with a bootstrap interval over seeds and grid points.
"""

from __future__ import annotations

from pathlib import Path

from zoo.config import resolve
from zoo.papers import page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.policy.pages import common
from zoo.sweeps.runner import load_data

NAME = "horizon-exponent"
FULL = {"model": "mlp_resnet", "data": "synthetic:teacher", "width": 64, "depth": 2, "batch_size": 64,
        "horizons": [128, 256, 512, 1024, 2048], "log2_lrs": [-12.0, -2.0, 0.5], "seeds": 3}
QUICK = {"model": "mlp_resnet", "data": "synthetic:teacher", "width": 8, "depth": 1, "batch_size": 8,
         "horizons": [2, 4, 8], "log2_lrs": [-8.0, -5.0, 1.0], "seeds": 1}
SCHEDULES = ("cosine", "wsd")
BJORCK = -0.32


def run(quick: bool) -> Numbers:
    s = QUICK if quick else FULL
    base = resolve({"model": s["model"], "data": s["data"], "width": s["width"], "depth": s["depth"],
                    "optimizer": "adam", "batch_size": s["batch_size"], "steps": s["horizons"][0]})
    data = load_data(base)
    grid = common.log2_grid(*s["log2_lrs"])
    out: Numbers = {"setting": s}
    with common.work_dir(NAME, quick) as work:
        for schedule in SCHEDULES:
            dirs = [common.sweep(base.replace(steps=t, schedule=schedule), grid, work / f"{schedule}_t{t}", data,
                                 s["seeds"]) for t in s["horizons"]]
            out[schedule] = common.fit(dirs, boot=200 if quick else 1000)
    return out


def checks(n: Numbers) -> list[Check]:
    e = {sched: common.exponent(n[sched], "lr", "steps") for sched in SCHEDULES}
    out = [Check(f"{sched}: the best LR falls as the horizon grows (Bjorck et al.'s sign)",
                 "the fitted exponent e of lr* ~ T^e is negative, its 95% interval below 0",
                 f"e = {common.interval_text(e[sched])}", e[sched] is not None and e[sched][2] < 0,
                 f"the interval {common.interval_text(e[sched])} reaches 0: over this {horizon_range(n)}x range of "
                 "horizons the best LR moved less than the seeds and the grid resolve (Step Law's sign, or none)")
           for sched in SCHEDULES]
    both = e["cosine"] is not None and e["wsd"] is not None
    out.append(Check("the exponent is the horizon's, not the schedule's",
                     "the cosine and wsd exponents' 95% intervals overlap",
                     f"cosine {common.interval_text(e['cosine'])}, wsd {common.interval_text(e['wsd'])}",
                     both and e["cosine"][1] <= e["wsd"][2] and e["wsd"][1] <= e["cosine"][2],
                     "the two schedules move the best LR differently with the horizon: the exponent is "
                     "schedule-dependent, as the field's conflicting fits suggest (field_scan_2026-11.md)"))
    return out


def horizon_range(n: Numbers) -> int:
    return n["setting"]["horizons"][-1] // n["setting"]["horizons"][0]


def level(n: Numbers) -> float | None:
    """The mean over horizons of wsd's best log2 LR minus cosine's (None where one is missing)."""
    pairs = [(a, b) for a, b in zip(common.optima(n["wsd"], "lr", "steps").values(),
                                   common.optima(n["cosine"], "lr", "steps").values(), strict=True)]
    if any(a is None or b is None for a, b in pairs):
        return None
    return sum(a["optimum"] - b["optimum"] for a, b in pairs) / len(pairs)


def plot(n: Numbers, path: Path) -> None:
    s = n["setting"]
    fig, axes = page.figure(3, 1, size=(5.2, 4.0))
    for ax, sched in zip(axes[0][:2], SCHEDULES, strict=True):
        common.curves_panel(ax, n[sched], "lr", "steps", f"{sched} schedule", "log2 LR")
    common.optima_panel(axes[0][2], {sched: n[sched] for sched in SCHEDULES}, "lr", "steps",
                        f"best log2 LR vs horizon (Bjorck et al.: e = {BJORCK})")
    fig.suptitle(f"{s['model']} (width {s['width']}, depth {s['depth']}) on {s['data']}, Adam, batch "
                 f"{s['batch_size']}", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"{s['model']} width {s['width']} depth {s['depth']}, SP, Adam, batch {s['batch_size']} on {s['data']}; "
            f"horizons {', '.join(map(str, s['horizons']))} steps under cosine (to 0) and wsd (constant, then linear "
            f"to 0 over the last 20%); LR grid 2^{s['log2_lrs'][0]:g}..2^{s['log2_lrs'][1]:g} in steps of "
            f"{s['log2_lrs'][2]:g} (log2), {s['seeds']} seeds; loss: the mean train loss over the last 10% of steps")


def result(n: Numbers) -> str:
    shift = level(n)
    return ("" if shift is None else f"wsd's best log2 LR sits {shift:+.2f} from cosine's (mean over horizons); ") + \
        "; ".join(f"{sched}: best log2 LR " + ", ".join(
        f"T={t}: " + ("-" if o is None else f"{o['optimum']:.2f} [{o['lo']:.2f}, {o['hi']:.2f}]")
        for t, o in common.optima(n[sched], "lr", "steps").items())
        + f"; exponent e = {common.interval_text(common.exponent(n[sched], 'lr', 'steps'))}" for sched in SCHEDULES)


CLAIM = Claim(
    name=NAME,
    title="the best LR against the horizon: its exponent's sign and size under cosine and warmup-stable-decay",
    source="Bjorck et al., Scaling Optimal LR Across Token Horizons (arXiv 2409.19913); Step Law (arXiv 2503.04715)",
    paper_setting="LLM pretraining (50M to 2.7B parameters, 2.5B to 800B tokens, cosine schedules) for Bjorck et "
                  "al.; 3,700 LLMs (Step Law)",
    paper_result="Bjorck et al.: the best LR falls with the token horizon D as about D^-0.32; Step Law fits "
                 "lr* ~ D^+0.307 (the opposite sign); which holds is unresolved and likely schedule-dependent",
    scale="a width-64 residual MLP on a 16-dimensional synthetic teacher task, horizons 128 to 2048 steps (half an "
          "epoch to eight) at batch 64, so ten LR sweeps fit the 2-core CPU; far from LLM token horizons, so the "
          "page measures the sign at this scale, not the LLM exponent",
    run=run, checks=checks, plot=plot, setting=setting, result=result)
