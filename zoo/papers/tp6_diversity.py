"""TP VI Fig. 17 and 18 (Claims 7.4, 7.5): after training, the feature diversity d(eps) = ||x^{(lam+eps)L} -
x^{lam L}|| / sqrt(n) grows like eps^(1/2) under Depth-muP at every depth (diversity exponent kappa = 1/2), while
under the ODE scaling (alpha, gamma) = (1, 0) it moves toward eps as the depth grows (kappa -> 0: redundant blocks).
The log-log slope s of d against eps estimates 1 - kappa (zoo.diagnostics.diversity). As in Fig. 17, eps runs over
one grid of depth fractions at every depth (1/256 .. 16/256), which needs L >= 256: the random part each block keeps
from init adds up to ~ (eps / L)^(1/2) and the learned part to ~ eps, so only at a fixed eps does the ODE's slope
move toward 1 as L grows. The slopes over a fixed number of blocks (eps = 1 .. 16 / L, the research note's check)
are recorded beside them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import zoo.data
from zoo.diagnostics.diversity import default_eps, diversity_probe, diversity_slope
from zoo.optim import OptimConfig
from zoo.papers import lr_sweep, page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.papers.tp6_depth_transfer import PAPER_BASE_WIDTH
from zoo.sweeps.engine import MemberTrainer
from zoo.sweeps.runner import summarize

NAME = "tp6-diversity"
FULL = {"data": "cifar10", "width": 128, "depths": [256, 512], "base_depth": 8, "log2_lrs": [-4, -2, 0],
        "times": [100, 500, 1000], "batch_size": 64, "inputs": 256, "lam": 0.5,
        "eps": [1 / 256, 2 / 256, 4 / 256, 8 / 256, 16 / 256]}
QUICK = {"data": "synthetic:teacher", "width": 16, "depths": [16, 32], "base_depth": 2, "log2_lrs": [-6, -4],
         "times": [2, 4], "batch_size": 16, "inputs": 32, "lam": 0.5, "eps": [1 / 16, 2 / 16, 4 / 16]}
ARMS = {"Depth-muP (1/2, 1/2)": {"alpha": 0.5, "gamma": 0.5, "branch_mult": 2.0},
        "ODE (1, 0)": {"alpha": 1.0, "gamma": 0.0, "branch_mult": 2.0**-0.5}}
DMUP_MAX, ODE_MIN = 0.65, 0.8  # seed_depth_mup.md section 3 (d): slope bounds after training, L >= 256


def run(quick: bool) -> Numbers:
    s = QUICK if quick else FULL
    data = zoo.data.load(s["data"])
    x = data.read("train", np.arange(s["inputs"]))["x"]
    labels = [a for a in ARMS for _ in s["log2_lrs"]]
    options = {k: np.array([ARMS[a][k] for a in labels]) for k in ("alpha", "gamma", "branch_mult")}
    log2_lrs = np.tile(s["log2_lrs"], len(ARMS))
    chance = np.log(data.num_classes)
    rows = []
    for depth in s["depths"]:
        cfg = lr_sweep.model_config("mlp_resnet", data, width=s["width"], depth=depth, base_width=PAPER_BASE_WIDTH,
                                    base_depth=s["base_depth"])
        family = lr_sweep.Family("mlp_resnet", cfg, lr_sweep.Plugin("depth_mup", {"freeze": "input,output"}),
                                 OptimConfig("adam"))
        trainer = MemberTrainer(family, data, s["batch_size"], chunk=min(100, s["times"][0]), fast_compile=quick)
        states = trainer.init(2.0**log2_lrs, np.zeros(len(labels), np.int32), options)
        member = family({k: v[0] for k, v in options.items()})
        probe = diversity_probe(member, s["lam"], s["eps"])
        by_blocks = diversity_probe(member, s["lam"], default_eps(depth, s["lam"]))
        done, losses = 0, []
        for t in [0, *s["times"]]:
            if t > done:
                states, loss = trainer.train(states, t - done, start=done)
                losses.append(loss)
            done = t
            for i, arm in enumerate(labels):
                state = trainer.member(states, i)
                d, _ = probe(state, x)
                d_blocks, _ = by_blocks(state, x)
                train_loss, diverged = summarize(np.concatenate(losses)[:, i], chance) if losses else (None, False)
                rows.append({"arm": arm, "depth": depth, "log2_lr": int(log2_lrs[i]), "t": t, "eps": s["eps"],
                             "d": d, "d_blocks": d_blocks, "train_loss": train_loss, "diverged": diverged})
        lr_sweep.log(f"  depth {depth}: {trainer.compile_s + trainer.run_s:.0f} s")
    return {"setting": s, "rows": rows}


def best_lr(n: Numbers, arm: str, depth: int) -> int:
    """The arm's LR with the lowest final train loss at this depth (diverged members never chosen)."""
    final = [r for r in n["rows"] if r["arm"] == arm and r["depth"] == depth and r["t"] == n["setting"]["times"][-1]
             and not r["diverged"] and r["train_loss"] is not None]
    return min(final, key=lambda r: r["train_loss"])["log2_lr"] if final else n["setting"]["log2_lrs"][0]


def slopes(n: Numbers, arm: str, t: int, log2_lr: int | None = None, blocks: bool = False) -> dict[int, float]:
    """Depth -> the log-log slope of the stored d(eps) at step t, at `log2_lr` (default: the arm's best LR at that
    depth), fitted here (zoo.diagnostics.diversity.diversity_slope), never stored beside it (zoo.papers.page);
    `blocks`: over eps = 1 .. 16 blocks / L (d_blocks) instead of the fixed eps grid."""
    lam, out = n["setting"]["lam"], {}
    for depth in n["setting"]["depths"]:
        lr = best_lr(n, arm, depth) if log2_lr is None else log2_lr
        r = next(r for r in n["rows"] if r["arm"] == arm and r["t"] == t and r["depth"] == depth
                 and r["log2_lr"] == lr)
        eps = default_eps(depth, lam) if blocks else r["eps"]
        out[depth] = diversity_slope(r["d_blocks"] if blocks else r["d"], eps, lam, depth)
    return out


def checks(n: Numbers) -> list[Check]:
    s = n["setting"]
    t, deep = s["times"][-1], s["depths"][-1]
    dmup, ode = (slopes(n, a, t) for a in ARMS)
    lrs = {a: page.sizes({d: best_lr(n, a, d) for d in s["depths"]}) for a in ARMS}
    return [
        Check("Depth-muP: d(eps) ~ eps^(1/2) after training, at every depth",
              f"slope of log d against log eps <= {DMUP_MAX} at every depth (t = {t}, each depth at its best LR, "
              f"log2 LR {lrs[next(iter(ARMS))]})",
              f"Depth-muP slopes {page.sizes(dmup, digits=2)}", all(v <= DMUP_MAX for v in dmup.values()),
              "the slope grows with depth and training time under Depth-muP too (TP VI Fig. 18 shows the same "
              "growth, which the paper leaves unexplained)"),
        Check("ODE (1, 0): d(eps) moves toward eps at large depth",
              f"slope >= {ODE_MIN} at the largest depth (L = {deep}, t = {t}, at the best LR, log2 LR "
              f"{lrs['ODE (1, 0)']})",
              f"ODE slopes {page.sizes(ode, digits=2)}", ode[deep] >= ODE_MIN,
              f"the move toward eps needs the learned part of the features (~ eps) to outweigh the random part "
              f"left from init (~ (eps / L)^(1/2)): at L = {deep} and {t} steps it still weighs on d(eps) (the "
              "paper shows the move up to L = 2^13)"),
        Check("ODE (1, 0): the move toward eps grows with depth",
              "slope at the largest depth > slope at the smallest", f"ODE slopes {page.sizes(ode, digits=2)}",
              ode[deep] > ode[s["depths"][0]], "the slope did not grow over this depth range"),
    ]


def plot(n: Numbers, path: Path) -> None:
    import matplotlib

    s = n["setting"]
    t = s["times"][-1]
    fig, axes = page.figure(3, size=(4.4, 3.8))
    colors = matplotlib.colormaps["viridis"](np.linspace(0.9, 0.1, max(len(s["depths"]), 2)))
    for ax, arm in zip(axes[0], ARMS, strict=False):
        for depth, color in zip(s["depths"], colors, strict=False):
            lr = best_lr(n, arm, depth)
            r = next(r for r in n["rows"] if r["arm"] == arm and r["t"] == t and r["depth"] == depth
                     and r["log2_lr"] == lr)
            d = np.asarray(r["d"])
            ax.loglog(r["eps"], d / d[0], "o-", color=color, ms=3, label=f"L = {depth} (LR 2^{lr})")
        e = np.geomspace(1 / s["depths"][-1], 16 / s["depths"][0], 20)
        for power, style in ((0.5, "k--"), (1.0, "k:")):
            ax.loglog(e, (e * s["depths"][-1]) ** power, style, lw=1, label=f"eps^{power:g}")
        ax.set_ylim(0.8, None)
        ax.set_xlabel("eps (fraction of the depth)")
        ax.set_ylabel("c d(eps), c d(1/L) = 1")
        ax.set_title(f"Fig. 17: {arm}, t = {t}, best LR", fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both")
    ax = axes[0][2]
    for arm, marker, color in zip(ARMS, "os", ("tab:blue", "tab:red"), strict=True):
        for ti, style in zip(s["times"], (":", "--", "-"), strict=False):
            sl = slopes(n, arm, ti)
            ax.plot(np.log2(list(sl)), list(sl.values()), marker + style, color=color, ms=4,
                    label=f"{arm.split()[0]} t={ti}")
    ax.axhline(0.5, color="gray", lw=0.8)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xlabel("log2 depth L")
    ax.set_ylabel("slope of log d against log eps")
    ax.set_title("Fig. 18: slope (1 - kappa) against depth", fontsize=10)
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3)
    fig.suptitle(f"TP VI Fig. 17/18 at width {s['width']}: {s['data']}, Adam, each arm at its best LR, batch "
                 f"{s['batch_size']}, lambda = {s['lam']}, input/output frozen", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"the same network at width {s['width']}, depths {', '.join(map(str, s['depths']))} (base depth "
            f"{s['base_depth']}); {s['data']}, Adam, hidden LRs {', '.join(f'2^{x}' for x in s['log2_lrs'])} at L = "
            f"{s['base_depth']} for each arm, the one with the lowest final train loss kept per depth; batch "
            f"{s['batch_size']}, 1 seed; d(eps) at t = {', '.join(map(str, s['times']))} on {s['inputs']} training "
            f"images, lambda = {s['lam']}, eps = {', '.join(f'{e:.3g}' for e in s['eps'])} at every depth (and, "
            "beside it, eps = 1, 2, 4, 8, 16 blocks / L)")


def result(n: Numbers) -> str:
    s = n["setting"]
    t = s["times"][-1]
    return "; ".join(f"{arm} slopes at init: {page.sizes(slopes(n, arm, 0), digits=2)}, at t = {t} at the best LR: "
                     f"{page.sizes(slopes(n, arm, t), digits=2)}, at every LR: " +
                     ", ".join(f"2^{lr}: {page.sizes(slopes(n, arm, t, lr), digits=2)}" for lr in s["log2_lrs"]) +
                     ", over 1..16 blocks at the best LR: " +
                     page.sizes(slopes(n, arm, t, blocks=True), digits=2) for arm in ARMS)


CLAIM = Claim(
    name=NAME,
    title="Depth-muP keeps feature diversity eps^(1/2); the ODE scaling loses it as depth grows",
    source="Yang, Yu, Zhu, Hayou, Tensor Programs VI, Fig. 17 and Fig. 18 (Claims 7.4, 7.5)",
    paper_setting="the Fig. 10 network (width 256, CIFAR-10, Adam, batch 64, input and output frozen), Depth-muP "
                  "(log2 a = 1) and ODE (1, 0); depths 2^8..2^13; d(eps) at t = 100, 500, 1000, rescaled so that "
                  "c d(1/256) = 1, eps up to 0.06",
    paper_result="Depth-muP has diversity exponent about 1/2 (d ~ eps^(1/2)) at every depth; the ODE curves move "
                 "from eps^(1/2) toward eps as L grows; both slopes grow somewhat with L and t (Fig. 18)",
    scale="Width 128 instead of 256, depths 256 and 512 instead of 2^8..2^13, the same 1000 steps, one seed: "
          "about 15 minutes on a quiet 2-core CPU. The paper does not state the LR of these runs; zoo trains each "
          "arm at three LRs and measures d(eps) at the one with the lowest train loss (ODE's branches are smaller, "
          "so its best LR is larger), and shows the slopes at every LR. Earlier runs measured d over 1..16 blocks "
          "(eps = k / L, as the research note's check does) at depths 64, 256, 512; at a fixed number of blocks the "
          "random and the learned parts scale alike in L, so the ODE's slope cannot grow with depth there (it gave "
          "0.95, 0.81, 0.79); zoo now measures over Fig. 17's fixed eps grid and reports the block-count slopes "
          "beside it.",
    run=run, checks=checks, plot=plot, setting=setting, result=result,
    serial="its diversity probe reads every member's weights between training segments, and a worker process "
           "keeps its members' weights to itself")
