"""Doshi, He, Gromov Fig. 3: a deep MLP trains near its critical line and not deep in the ordered or chaotic
phase, while LayerNorm with mu = 1 makes it trainable everywhere (seed_partial_jacobians.md sections 1, 4 and 6.7).

Every (sigma_b, sigma_w) point of a variant's grid, times a few SGD learning rates, trains as one vmapped program (a
MemberTrainer family over the `critical` plugin's sigma_w and sigma_b); a point's accuracy is its best LR's. Theory
predicts trainable depths up to about 28 xi, xi = 1 / |ln chi*| (the paper's App. L).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import zoo.data
from zoo.diagnostics import phase
from zoo.optim import OptimConfig
from zoo.papers import lr_sweep, page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.param import mean_field_theory as theory
from zoo.sweeps.processes import MemberPool, workers
from zoo.sweeps.runner import summarize

NAME = "dhg-trainability"
FULL = {"data": "cifar10", "width": 128, "depth": 50, "activation": "erf", "sigma_b": np.linspace(0, 1, 7).tolist(),
        "sigma_w": np.linspace(0.25, 3.0, 7).tolist(), "lrs": [10**-2.5, 10**-1.5, 10**-0.5], "steps": 200,
        "batch_size": 64, "eval": 2048}
QUICK = {"data": "synthetic:teacher", "width": 16, "depth": 4, "activation": "erf", "sigma_b": [0.0, 1.0],
         "sigma_w": [0.5, 2.5], "lrs": [0.1], "steps": 3, "batch_size": 8, "eval": 64}
VARIANTS = {"vanilla (mu = 0)": {"pre_ln": False, "mu": 0.0}, "pre-LN, mu = 1": {"pre_ln": True, "mu": 1.0}}
DEPTH_SCALE = 28.0  # trainable depth ~ 28 xi (App. L)
GAP = 0.1  # vanilla: predicted-trainable points beat predicted-untrainable ones by >= 10 points of accuracy
HALF = 0.5  # pre-LN, mu = 1: every point gains at least half the best point's gain over chance


def run(quick: bool, processes: int = 1) -> Numbers:
    s = QUICK if quick else FULL
    load = functools.partial(zoo.data.load, s["data"])
    data = load()
    with workers(processes) as pool:
        panels = [_panel(s, quick, load, data, pool, label, v) for label, v in VARIANTS.items()]
    return {"setting": s, "chance": 1.0 / data.num_classes, "panels": panels}


def _panel(s: dict, quick: bool, load: Callable[[], Any], data: Any, pool: MemberPool | None, label: str,
           v: dict) -> dict:
    """One variant's grid: every (sigma_w, sigma_b) point x LR as a member, in the pool's worker processes or here;
    a point's accuracy is its best LR's."""
    t0 = time.perf_counter()
    sw, sb = np.meshgrid(s["sigma_w"], s["sigma_b"], indexing="ij")  # [sigma_w, sigma_b]
    lrs = np.repeat(s["lrs"], sw.size)
    options = {"sigma_w": np.tile(sw.ravel(), len(s["lrs"])), "sigma_b": np.tile(sb.ravel(), len(s["lrs"]))}
    cfg = lr_sweep.model_config("mlp_resnet", data, width=s["width"], depth=s["depth"], activation=s["activation"],
                                pre_ln=v["pre_ln"], pre_nonlin=True, bias=True, mean_subtract=False)
    family = lr_sweep.Family("mlp_resnet", cfg, lr_sweep.Plugin("critical", {"mu": v["mu"]}), OptimConfig("sgd"))
    make = functools.partial(lr_sweep.member_trainer, family, load, s["batch_size"], min(100, s["steps"]), quick)
    result = lr_sweep.train_shape(pool, make, data, lrs, np.zeros(len(lrs), np.int32), s["steps"], options,
                                  eval_limit=s["eval"])
    diverged = [summarize(result.losses[:, i], np.log(data.num_classes))[1] for i in range(len(lrs))]
    acc = np.where(diverged, 1.0 / data.num_classes, result.evals["accuracy"])  # a member that blew up learned nothing
    block = theory.Block.of(cfg)
    star = [[theory.chi_star(block, w, b, v["mu"]) for b in s["sigma_b"]] for w in s["sigma_w"]]
    line = phase.theory_line(cfg, ("sigma_b", s["sigma_b"]), {"mu": v["mu"]}) if v["mu"] < 1 else None
    lr_sweep.log(f"  {label}: {time.perf_counter() - t0:.0f} s")
    return {"variant": label, **v, "accuracy_per_lr": acc, "chi_star": star, "line": line,
            "final_loss": result.losses[-1]}


def best_accuracy(p: dict, s: dict) -> np.ndarray:
    """[sigma_w, sigma_b] each grid point's accuracy at its best LR, from the stored accuracy of every (LR, point)
    member (never stored beside it: zoo.papers.page)."""
    return np.asarray(p["accuracy_per_lr"], float).reshape(len(s["lrs"]), len(s["sigma_w"]), len(s["sigma_b"])).max(0)


def trainable(chi_star: np.ndarray, depth: int) -> np.ndarray:
    """Theory's verdict per point: depth <= 28 xi, xi = 1 / |ln chi*|."""
    with np.errstate(divide="ignore"):
        xi = 1.0 / np.abs(np.log(np.asarray(chi_star, float)))
    return depth <= DEPTH_SCALE * xi


def checks(n: Numbers) -> list[Check]:
    s, chance = n["setting"], n["chance"]
    vanilla, ln = n["panels"]
    acc = best_accuracy(vanilla, s)
    ok = trainable(vanilla["chi_star"], s["depth"])
    inside = float(acc[ok].mean()) if ok.any() else math.nan
    outside = float(acc[~ok].mean()) if (~ok).any() else math.nan
    ln_acc = best_accuracy(ln, s)
    floor = chance + HALF * (ln_acc.max() - chance)
    return [
        Check(f"{vanilla['variant']}: trainable near the critical line only",
              f"mean accuracy where theory predicts trainable (L <= {DEPTH_SCALE:g} xi) >= the mean elsewhere + {GAP}",
              f"{inside:.3f} at {int(ok.sum())} points vs {outside:.3f} at {int((~ok).sum())}",
              bool(inside >= outside + GAP), f"after {s['steps']} steps the trainable region has not pulled ahead"),
        Check(f"{ln['variant']}: trainable everywhere",
              f"every point's accuracy >= chance + {HALF} (best - chance)",
              f"min {ln_acc.min():.3f}, best {ln_acc.max():.3f}, floor {floor:.3f}", bool(ln_acc.min() >= floor),
              "some points of the grid train much worse than others"),
    ]


def plot(n: Numbers, path: Path) -> None:
    s = n["setting"]
    fig, axes = page.figure(len(n["panels"]), size=(4.8, 3.9))
    for ax, p in zip(axes[0], n["panels"], strict=True):
        acc = best_accuracy(p, s)
        mesh = ax.pcolormesh(s["sigma_b"], s["sigma_w"], acc, cmap="viridis", vmin=n["chance"], shading="nearest")
        fig.colorbar(mesh, ax=ax, label=f"accuracy (best of {len(s['lrs'])} LRs)")
        ok = trainable(p["chi_star"], s["depth"]).astype(float)
        if 0 < ok.mean() < 1:
            ax.contour(s["sigma_b"], s["sigma_w"], ok, levels=[0.5], colors="w", linestyles=":", linewidths=1.2)
        if p["line"] is not None:
            ax.plot(s["sigma_b"], [np.nan if v is None else v for v in p["line"]], "w--", lw=1.5,
                    label="analytic critical line")
            ax.legend(loc="upper left", fontsize=7)
        ax.set_xlabel(r"$\sigma_b$")
        ax.set_ylabel(r"$\sigma_w$")
        ax.set_title(f"{s['activation']}, {p['variant']}\n(dotted: L = 28 xi, theory's trainable edge)", fontsize=9)
    fig.suptitle(f"Doshi, He, Gromov Fig. 3: accuracy after {s['steps']} SGD steps, L = {s['depth']}, "
                 f"N = {s['width']}, {s['data']}", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"zoo's MLP-ResNet as the paper's MLP ({s['activation']}, pre-nonlin branch, biases, no mean "
            f"subtraction, `critical` plugin), N = {s['width']}, L = {s['depth']}; {s['data']} (flattened), SGD, "
            f"batch {s['batch_size']}, {s['steps']} steps, LRs {', '.join(f'{x:.3g}' for x in s['lrs'])} per "
            f"point (the best kept; a member that blew up counts as chance); {len(s['sigma_b'])} x "
            f"{len(s['sigma_w'])} grid; accuracy on {s['eval']} held-out images (a fixed random subset)")


def result(n: Numbers) -> str:
    best = [best_accuracy(p, n["setting"]) for p in n["panels"]]
    return "; ".join(f"{p['variant']}: accuracy {np.min(a):.3f}..{np.max(a):.3f} over the grid"
                     for p, a in zip(n["panels"], best, strict=True)) + f" (chance {n['chance']:.2f})"


CLAIM = Claim(
    name=NAME,
    title="Deep MLPs train near criticality; LayerNorm with mu = 1 trains everywhere",
    source="Doshi, He, Gromov, Critical Initialization of Wide and Deep Neural Networks using Partial Jacobians, "
           "Fig. 3",
    paper_setting="MLP of width N = 500 and depth L = 50 on FashionMNIST, 10 epochs of SGD with cross-entropy, "
                  "learning rates log-sampled in (1e-5, 1); training accuracy over the (sigma_b, sigma_w) plane; "
                  "about 12 GPU-days",
    paper_result="vanilla networks train only in a band around the analytic critical line; LayerNorm with mu = 1 "
                 "makes the network trainable everywhere; erf with mu = 1 and no LayerNorm has enhanced "
                 "trainability",
    scale="CIFAR-10 (flattened) instead of FashionMNIST, N = 128 instead of 500, L = 50 as in the paper, 200 SGD "
          "steps (a quarter of an epoch) instead of 10 epochs, three LRs per point, a 7 x 7 grid, erf only: about 15 "
          "minutes on a quiet 2-core CPU. Accuracy is measured on 2048 held-out images: after a quarter of an epoch "
          "the networks have seen almost no image twice, so held-out and training accuracy agree.",
    run=run, checks=checks, plot=plot, setting=setting, result=result, serial="")
