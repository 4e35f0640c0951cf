"""TP VI Fig. 3: under Depth-muP an even nonlinearity (abs) trains block-depth-1 ResNets better than relu at every
depth (seed_depth_mup.md sections 1.1 and 3): phi' = sign decorrelates the blocks' updates (maximal feature
diversity), where relu's phi' = 1[h > 0] leaves them correlated.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

import zoo.data
from zoo.optim import OptimConfig
from zoo.papers import lr_sweep, page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.papers.tp6_depth_transfer import PAPER_BASE_WIDTH
from zoo.sweeps import report

NAME = "tp6-abs-vs-relu"
FULL = {"data": "cifar10", "width": 128, "depths": [8, 32, 128], "base_depth": 8, "log2_lrs": list(range(-6, 4)),
        "steps": 600, "batch_size": 64, "log2_branch_mult": -1.5}
QUICK = {"data": "synthetic:teacher", "width": 16, "depths": [4], "base_depth": 2, "log2_lrs": [-7, -5],
         "steps": 5, "batch_size": 16, "log2_branch_mult": -1.5}
ACTIVATIONS = ("relu", "abs")


def run(quick: bool, processes: int = 1) -> Numbers:
    s = QUICK if quick else FULL
    plugin = lr_sweep.Plugin("depth_mup", {"branch_mult": 2.0 ** s["log2_branch_mult"], "freeze": "input,output"})
    out = {}
    for act in ACTIVATIONS:
        lr_sweep.log(f"{act}:")
        out[act] = lr_sweep.sweep(
            "mlp_resnet", plugin, {"Depth-muP": {}}, OptimConfig("adam"), functools.partial(zoo.data.load, s["data"]),
            [(s["width"], d) for d in s["depths"]], s["log2_lrs"], steps=s["steps"], batch_size=s["batch_size"],
            base_width=PAPER_BASE_WIDTH, base_depth=s["base_depth"], fast_compile=quick, processes=processes,
            activation=act)
    return {"setting": s, "records": out}


def _min_loss(n: Numbers) -> dict[str, dict[int, float | None]]:
    return {act: lr_sweep.by_size(report.summarize(n["records"][act]), "best_loss") for act in ACTIVATIONS}


def checks(n: Numbers) -> list[Check]:
    best = _min_loss(n)
    wins = {d: best["abs"][d] is not None and (best["relu"][d] is None or best["abs"][d] < best["relu"][d])
            for d in best["abs"]}
    gaps = {d: None if None in (best["abs"][d], best["relu"][d]) else best["abs"][d] - best["relu"][d]
            for d in best["abs"]}
    return [Check("abs beats relu at every depth under Depth-muP",
                  "abs's best train loss (over LRs) < relu's at each depth",
                  f"best loss relu {page.sizes(best['relu'], digits=3)}; abs {page.sizes(best['abs'], digits=3)}",
                  all(wins.values()),
                  f"abs's loss minus relu's is {page.sizes(gaps, digits=3, none='n/a')} after "
                  f"{n['setting']['steps']} steps (the paper trains 38k). TP VI credits abs's advantage to feature "
                  "diversity (phi' = sign decorrelates the blocks' updates); at these depths and this run length "
                  "it does not show" + (", though abs's deficit shrinks with depth" if _shrinks(gaps) else ""))]


def _shrinks(gaps: dict[int, float | None]) -> bool:
    """Whether abs's positive deficits fall from each depth to the next."""
    values = list(gaps.values())
    return None not in values and all(0 < b < a for a, b in zip(values, values[1:], strict=False))


def plot(n: Numbers, path: Path) -> None:
    s = n["setting"]
    fig, axes = page.figure(3, size=(4.4, 3.8))
    for ax, act in zip(axes[0], ACTIVATIONS, strict=False):
        report.panel(ax, report.summarize(n["records"][act]), f"Depth-muP, {act}, a = 2^{s['log2_branch_mult']}")
        ax.set_xlabel(f"log2 eta (hidden Adam LR eta/n at L = {s['base_depth']})")
    ax = axes[0][2]
    for act, marker in zip(ACTIVATIONS, "os", strict=True):
        best = _min_loss(n)[act]
        depths = [d for d, v in best.items() if v is not None]
        ax.plot(np.log2(depths), [best[d] for d in depths], marker + "-", label=act)
    ax.set_xlabel("log2 depth L")
    ax.set_ylabel("min train loss over LRs")
    ax.set_title("Fig. 3: min loss against depth", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.suptitle(f"TP VI Fig. 3 at width {s['width']}: {s['data']}, Adam, batch {s['batch_size']}, {s['steps']} "
                 "steps, input/output frozen", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"the same network under Depth-muP at width {s['width']} (base width 1: the paper's n^-c rules), "
            f"depths {', '.join(map(str, s['depths']))} (base depth {s['base_depth']}), log2 a = "
            f"{s['log2_branch_mult']}; {s['data']}, Adam, batch {s['batch_size']}, {s['steps']} steps, 1 seed; LRs "
            f"2^{s['log2_lrs'][0]}..2^{s['log2_lrs'][-1]}; loss: mean train loss over the last 10% of steps, "
            "minimised over the LRs")


def result(n: Numbers) -> str:
    best = _min_loss(n)
    return f"min train loss relu {page.sizes(best['relu'], digits=3)}; abs {page.sizes(best['abs'], digits=3)}"


CLAIM = Claim(
    name=NAME,
    title="abs trains deep Depth-muP ResNets better than relu",
    source="Yang, Yu, Zhu, Hayou, Tensor Programs VI, Fig. 3",
    paper_setting="block-depth-1 MLP-ResNet with mean subtraction, Depth-muP, log2 a = -1.5, width 256, CIFAR-10, "
                  "Adam, batch 64, 50 epochs, input and output layers frozen, depths 2^3..2^10; loss against log2 LR",
    paper_result="abs reaches a much lower minimum loss than relu at every depth",
    scale="Width 128 instead of 256, depths 8, 32, 128 instead of 8..1024, 600 steps (about one epoch) instead of "
          "38k, one seed: about 5 minutes on a quiet 2-core CPU.",
    run=run, checks=checks, plot=plot, setting=setting, result=result, serial="")
