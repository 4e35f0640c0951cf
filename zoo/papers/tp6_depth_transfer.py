"""TP VI Fig. 10 and 11: the Adam learning rate transfers across depth under Depth-muP and not under the rest of
the (alpha, gamma) family (seed_depth_mup.md section 3).

Block-depth-1 MLP-ResNet x <- x + a (L/8)^-alpha MS(relu(W x)), hidden Adam LR lr n^-1 (L/8)^-gamma, input and
output layers frozen (`freeze=input,output`), base depth 8 (every arm is the same network at L = 8, except ODE's a).
TP VI writes its muP rules with n itself (readout variance 1/n^2, hidden LR eta/n: Table 2, Def. 6.1), which is
zoo's depth_mup at base width 1 (PAPER_BASE_WIDTH), so zoo's lr is the paper's eta.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import zoo.data
from zoo.optim import OptimConfig
from zoo.papers import lr_sweep, page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.sweeps import report

NAME = "tp6-depth-transfer"
FULL = {"data": "cifar10", "width": 128, "depths": [8, 16, 32, 64, 128], "base_depth": 8,
        "log2_lrs": list(range(-8, 3)), "steps": 400, "batch_size": 64}
QUICK = {"data": "synthetic:teacher", "width": 16, "depths": [2, 8], "base_depth": 2, "log2_lrs": [-9, -7, -5],
         "steps": 5, "batch_size": 16}
# (label, alpha, gamma, branch multiplier a): Fig. 10 uses log2 a = 1, Fig. 11 (ODE) log2 a = -0.5
ARMS = [("Depth-muP (1/2, 1/2)", 0.5, 0.5, 2.0), ("(1/2, 0)", 0.5, 0.0, 2.0), ("SP (0, 0)", 0.0, 0.0, 2.0),
        ("ODE (1, 0)", 1.0, 0.0, 2.0**-0.5)]
PAPER_BASE_WIDTH = 1  # TP VI's n^-c rules use n, not n / n0
SETTLED = 4  # "from depth 32 on": depths >= 4 base depths
NOISE = 0.03  # train-loss tolerance of "improves with depth" (one seed, mean of the last 10% of steps)


def run(quick: bool, processes: int = 1) -> Numbers:
    s = QUICK if quick else FULL
    arms = {label: {"alpha": alpha, "gamma": gamma, "branch_mult": a} for label, alpha, gamma, a in ARMS}
    records = lr_sweep.sweep("mlp_resnet", lr_sweep.Plugin("depth_mup", {"freeze": "input,output"}), arms,
                             OptimConfig("adam"), functools.partial(zoo.data.load, s["data"]),
                             [(s["width"], d) for d in s["depths"]], s["log2_lrs"], steps=s["steps"],
                             batch_size=s["batch_size"], base_width=PAPER_BASE_WIDTH, base_depth=s["base_depth"],
                             fast_compile=quick, processes=processes)
    return {"setting": s, "arms": [{"label": label, **opts, "records": lr_sweep.by_arm(records, label)}
                                   for label, opts in arms.items()]}


def _summary(arm: dict) -> report.Summary:
    return report.summarize(arm["records"])


def checks(n: Numbers) -> list[Check]:
    s = n["setting"]
    dmup, *others = [_summary(arm) for arm in n["arms"]]
    best, losses = lr_sweep.by_size(dmup, "best_log2_lr"), lr_sweep.by_size(dmup, "best_loss")
    settled = {d: v for d, v in best.items() if d >= SETTLED * s["base_depth"]}
    spread, unmeasured = lr_sweep.best_spread(dmup, "depth", list(settled))
    out = [Check(f"Depth-muP's best LR stays put from depth {SETTLED * s['base_depth']} on",
                 "best log2 LR, inside the grid at two or more of those depths, moves by at most 1 grid step over them",
                 f"best log2 LR {page.sizes(settled)}", spread is not None and spread <= 1,
                 unmeasured or "one seed and a short run (the paper averages 5 seeds over 38k steps)")]
    pairs = list(zip(list(losses.items()), list(losses.items())[1:], strict=False))
    improves = all(a[1] is not None and b[1] is not None and b[1] <= a[1] + NOISE for a, b in pairs) and \
        pairs and losses[s["depths"][-1]] < losses[s["depths"][0]]
    out.append(Check("Depth-muP's loss improves with depth",
                     f"best loss at each depth <= the previous depth's + {NOISE}, and deepest < shallowest",
                     f"best train loss {page.sizes(losses, digits=3)}", bool(improves),
                     f"with a = {n['arms'][0]['branch_mult']:g} the stream's norm at init grows by "
                     f"{page.sizes(init_growth(n['arms'][0]['branch_mult'], s), digits=0)}x over the blocks (relu "
                     f"with mean subtraction; it tends to exp(a^2 v L0 / 2) as L grows): after {s['steps']} steps (the "
                     "paper: 38k) the deeper networks have not caught up. TP VI's transformer runs (Fig. 15) are "
                     "also worse with depth early in training and better at the end"))
    for arm, summary in zip(n["arms"][1:], others, strict=True):
        b = lr_sweep.by_size(summary, "best_log2_lr")
        ok = [v for v in b.values() if v is not None]
        shift = max(ok) - min(ok) if ok else 0.0
        dead = [d for d, v in b.items() if v is None]
        gap = {d: None if v is None or best[d] is None else v - best[d] for d, v in b.items()}
        theory = {d: (arm["gamma"] - 0.5) * math.log2(d / s["base_depth"]) for d in b}
        losses_arm = [v for v in lr_sweep.by_size(summary, "best_loss").values() if v is not None]
        why = (f"its best log2 LR minus Depth-muP's is {page.sizes(gap, none='n/a')}; for Adam, theory puts it at "
               f"(gamma - 1/2) log2(L/{s['base_depth']}) = {page.sizes(theory, digits=1)} when alpha = 1/2"
               if arm["alpha"] == 0.5 else
               f"its best loss differs by only {max(losses_arm) - min(losses_arm):.3f} over the depths: its blocks "
               "follow a depth-independent limit (the ODE of TP VI Claim 7.4), and after "
               f"{s['steps']} steps its best LR has not moved; the paper sees it grow with depth at 38k steps")
        out.append(Check(f"{arm['label']}: the best LR shifts with depth",
                         "best log2 LR moves by >= 2 grid steps over the depths, or no LR trains at some depth",
                         f"best log2 LR {page.sizes(b)}", shift >= 2 or bool(dead), why))
    return out


def init_growth(a: float, s: dict) -> dict[int, float]:
    """Depth -> ||x^L|| / ||x^0|| at init of the relu block with mean subtraction (seed_depth_mup.md section 5):
    (1 + a^2 v (n - 1) / n (L0 / L))^(L/2), v = 1/2 - 1/(2 pi) (alpha = 1/2)."""
    v = (0.5 - 0.5 / math.pi) * (s["width"] - 1) / s["width"]
    return {d: (1 + a**2 * v * s["base_depth"] / d) ** (d / 2) for d in s["depths"]}


def plot(n: Numbers, path: Path) -> None:
    s = n["setting"]
    fig, axes = page.figure(2, 2, size=(5.2, 4.0))
    for ax, arm in zip(axes.ravel(), n["arms"], strict=True):
        report.panel(ax, _summary(arm), f"{arm['label']}, a = 2^{_log2(arm['branch_mult']):g}")
        ax.set_xlabel(f"log2 eta (hidden Adam LR eta/n at L = {s['base_depth']})")
    fig.suptitle(f"TP VI Fig. 10/11 at width {s['width']}: {s['data']}, Adam, batch {s['batch_size']}, "
                 f"{s['steps']} steps, input/output frozen", fontsize=10)
    page.save(fig, path)


def _log2(x: float) -> float:
    return round(math.log2(x), 2)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"the same network at width {s['width']} (zoo's depth_mup at base width 1: the paper's n^-c rules), "
            f"depths {', '.join(map(str, s['depths']))}, base depth {s['base_depth']}; {s['data']}, Adam, batch "
            f"{s['batch_size']}, {s['steps']} steps, 1 seed; LRs 2^{s['log2_lrs'][0]}..2^{s['log2_lrs'][-1]} (grid "
            "step 1 in log2); loss: mean train loss over the last 10% of steps")


def result(n: Numbers) -> str:
    parts = []
    for arm in n["arms"]:
        summary = _summary(arm)
        best = lr_sweep.by_size(summary, "best_log2_lr")
        loss = lr_sweep.by_size(summary, "best_loss")
        parts.append(f"{arm['label']}: best log2 LR {page.sizes(best)} (transfer score {summary.transfer_score} "
                     f"grid steps), best loss {page.sizes(loss, digits=3)}")
    return "; ".join(parts)


CLAIM = Claim(
    name=NAME,
    title="Depth-muP transfers the learning rate across depth; other depth scalings do not",
    source="Yang, Yu, Zhu, Hayou, Tensor Programs VI, Fig. 10 and Fig. 11",
    paper_setting="block-depth-1 MLP-ResNet, width 256, relu with mean subtraction, CIFAR-10, Adam, batch 64, "
                  "50 epochs (about 38k steps), input and output layers frozen, depths 2^3..2^10, 5 seeds; "
                  "(alpha, gamma) = (1/2, 1/2), (1/2, 0), (0, 0) with log2 a = 1, and (1, 0) with log2 a = -0.5; "
                  "loss: training log-loss over a 1000-step slice",
    paper_result="Depth-muP's optimal LR stays around 1e-3 from L = 2^6 on (a mild shift at 2^3) and the loss keeps "
                 "improving with depth; (1/2, 0) shifts significantly, SP (0, 0) shifts more and degrades at large "
                 "depth, the ODE scaling (1, 0) shifts (its optimal LR grows with depth) and trains worse",
    scale="Width 128 instead of 256, depths 8..128 instead of 8..1024, 400 steps (half an epoch) instead of 38k, "
          "one seed instead of five: the full run takes about 25 minutes on a quiet 2-core CPU (depth 1024 alone "
          "would take longer than all of it). TP VI writes muP with n itself (readout variance 1/n^2, hidden Adam "
          "LR eta/n), so zoo runs depth_mup at base width 1; at zoo's default base width (the width itself) the "
          "frozen readout would keep SP's variance 1/n, a different network. SP uses the same a = 2 as Depth-muP, "
          "so all arms but ODE are one network at L = 8; at a = 2 SP's stream grows like (1 + a^2 v_relu)^L at "
          "init (v_relu = 1/2 - 1/(2 pi)), so its deep runs are expected to diverge. The paper's Sec. 10.2 calls "
          "SP (0, 1) while its Fig. 10 caption says (0, 0); zoo follows the caption, as the issue does.",
    run=run, checks=checks, plot=plot, setting=setting, result=result, serial="")
