"""The best Adam LR across batch sizes 16..256, with and without the `sde` policy (Malladi et al. 2022's
square-root rule: LR sqrt(B/B0), b2^(B/B0), eps / sqrt(B/B0)), at a fixed number of examples: the SDE's time counts
examples, so each batch size trains E / B steps.

Two arms per batch size, each an LR sweep (a zoo.sweep dir): `none` sweeps the raw LR grid with the proxy's b2 and
epsilon; `sde` sweeps the proxy's grid mapped by the policy. zoo.fit locates each size's best log2 LR (a parabola
through the grid minimum, a bootstrap interval over seeds and grid points) and fits it against the batch size.
"""

from __future__ import annotations

import math
from pathlib import Path

import zoo.policy
from zoo.config import resolve
from zoo.papers import page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.policy.pages import common
from zoo.sweeps.runner import load_data

NAME = "sde-batch"
FULL = {"model": "mlp_resnet", "data": "synthetic:teacher", "width": 64, "depth": 2, "examples": 16384,
        "batches": [16, 32, 64, 128, 256], "log2_lrs": [-13.0, -4.0, 0.5], "seeds": 2}
QUICK = {"model": "mlp_resnet", "data": "synthetic:teacher", "width": 8, "depth": 1, "examples": 64,
         "batches": [4, 8, 16], "log2_lrs": [-8.0, -5.0, 1.0], "seeds": 1}
ARMS = ("none", "sde")
SQRT = 0.5  # the square-root rule's exponent of the best LR in the batch size


def run(quick: bool) -> Numbers:
    s = QUICK if quick else FULL
    base = resolve({"model": s["model"], "data": s["data"], "width": s["width"], "depth": s["depth"],
                    "optimizer": "adam", "batch_size": s["batches"][0], "steps": s["examples"] // s["batches"][0]})
    data = load_data(base)
    grid = common.log2_grid(*s["log2_lrs"])
    out: Numbers = {"setting": s}
    with common.work_dir(NAME, quick) as work:
        for arm in ARMS:
            dirs = []
            for b in s["batches"]:
                change = zoo.policy.Change(s["batches"][0], b, base.loop.steps, s["examples"] // b)
                run_b, factor = zoo.policy.mapped_run(base, zoo.policy.get(arm), change)
                dirs.append(common.sweep(run_b, [x + math.log2(factor) for x in grid], work / f"{arm}_b{b}", data,
                                         s["seeds"]))
            out[arm] = common.fit(dirs, policy=arm, boot=200 if quick else 1000, axes=["batch_size"])  # T = E / B
    return out


def checks(n: Numbers) -> list[Check]:
    step = n["setting"]["log2_lrs"][2]
    sde_spread = common.spread(n["sde"], "lr", "batch_size")
    raw = common.exponent(n["none"], "lr", "batch_size")
    left = common.exponent(n["sde"], "lr", "batch_size")
    best = {arm: ", ".join(f"B={b}: " + ("-" if o is None else f"{o['optimum']:.2f}")
                           for b, o in common.optima(n[arm]).items()) for arm in ARMS}
    return [
        Check("under sde the best Adam LR (in the proxy's units) stays put across batch sizes",
              f"fitted best log2 LR located inside the grid at every batch, max - min <= 1 grid step ({step:g})",
              f"sde: {best['sde']}; spread {'n/a' if sde_spread is None else f'{sde_spread:.2f}'}",
              sde_spread is not None and sde_spread <= step,
              "the best LR moved more than a grid step under the square-root rule: past the critical batch the "
              "rule's SDE no longer tracks Adam (Malladi et al.), or the optimum is on the grid's edge"),
        Check("without a policy the best LR grows as sqrt(B) (the rule's premise)",
              "the raw best log2 LR's batch exponent: its 95% interval holds 1/2",
              f"none: {best['none']}; exponent {common.interval_text(raw)}",
              raw is not None and raw[1] <= SQRT <= raw[2],
              unfitted(n["none"]) if raw is None else "the raw optimum's exponent is not 1/2 at this scale (below it "
              "past the critical batch, where the larger batch stops adding signal)"),
        Check("... and sde leaves no batch exponent", "the sde arm's batch exponent: its 95% interval holds 0",
              f"sde: exponent {common.interval_text(left)}", left is not None and left[1] <= 0 <= left[2],
              unfitted(n["sde"]) if left is None else "a batch dependence remains after the square-root rule"),
    ]


def unfitted(fitted: dict) -> str:
    """Why an arm has no law: zoo.fit's refusal (too few batch sizes with a located optimum)."""
    return f"no law was fitted, so there is no exponent to read: {fitted.get('error', 'no LR law')}"


def plot(n: Numbers, path: Path) -> None:
    s = n["setting"]
    fig, axes = page.figure(3, 1, size=(5.2, 4.0))
    common.curves_panel(axes[0][0], n["none"], "lr", "batch_size", "none: raw LR, b2 and eps kept",
                        "log2 LR")
    common.curves_panel(axes[0][1], n["sde"], "lr", "batch_size", "sde: LR sqrt(B/B0), b2^(B/B0), eps/sqrt(B/B0)",
                        f"log2 LR in the proxy's units (batch {s['batches'][0]})")
    common.optima_panel(axes[0][2], {"none (raw)": n["none"], "sde (proxy units)": n["sde"]}, "lr", "batch_size",
                        f"best log2 LR vs batch at {s['examples']} examples")
    fig.suptitle(f"{s['model']} (width {s['width']}, depth {s['depth']}) on {s['data']}, Adam, {s['examples']} "
                 "examples per run", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"{s['model']} width {s['width']} depth {s['depth']}, SP, Adam (b2 0.999, eps 1e-8, constant LR) on "
            f"{s['data']}; batch sizes {', '.join(map(str, s['batches']))} at {s['examples']} examples each (E / B "
            f"steps); LR grid 2^{s['log2_lrs'][0]:g}..2^{s['log2_lrs'][1]:g} in steps of {s['log2_lrs'][2]:g} "
            f"(log2), {s['seeds']} seeds; loss: the mean train loss over the last 10% of steps")


def result(n: Numbers) -> str:
    return "; ".join(f"{arm}: best log2 LR " + ", ".join(
        f"B={b}: " + ("-" if o is None else f"{o['optimum']:.2f} [{o['lo']:.2f}, {o['hi']:.2f}]")
        for b, o in common.optima(n[arm]).items()) + f", batch exponent "
        f"{common.interval_text(common.exponent(n[arm], 'lr', 'batch_size'))}" for arm in ARMS)


CLAIM = Claim(
    name=NAME,
    title="the square-root rule keeps Adam's best LR across batch sizes 16..256",
    source="Malladi, Lyu, Panigrahi & Arora, On the SDEs and Scaling Rules for Adaptive Gradient Algorithms "
           "(NeurIPS 2022, arXiv 2205.10287)",
    paper_setting="RMSprop and Adam on vision and language tasks (ResNet, VGG on CIFAR-10; RoBERTa, GPT-2 "
                  "pretraining), batch sizes scaled by kappa up to 16x-64x from a tuned base, the same examples",
    paper_result="with LR sqrt(kappa), 1 - beta = kappa (1 - beta) and eps / sqrt(kappa) the test accuracy (loss) "
                 "curves against examples match the base's up to a critical batch, where the SDE approximation "
                 "breaks",
    scale="a width-64 residual MLP on a 16-dimensional synthetic teacher task (zoo's synthetic:teacher) for one "
          "epoch (16,384 examples), so a batch-size sweep of 16x fits the 2-core CPU; the rule's premise, gradient "
          "noise that dominates the step, holds best at small batches, so the 16x range starts at batch 16",
    run=run, checks=checks, plot=plot, setting=setting, result=result)
