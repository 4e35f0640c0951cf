"""TP IVb (Adam in the infinite-width limit): under muP the best Adam learning rate stays put as the width grows,
under SP it moves; and Remark 2.2.7's caveat measured: SP with the Adam LR proportional to 1/n on every layer is
not stable, its output change grows like n^(1/2) (seed_tp4b_adam.md sections 3 and 6).

muP and SP train side by side in one program per width: the `abcd` plugin with the muP exponents (t = 1) or SP's
(t = 0), a member option t (exponents SP + t (muP - SP), so exactly one table or the other).
"""

from __future__ import annotations

import functools
from pathlib import Path

import jax
import numpy as np

import zoo.data
import zoo.param
from zoo.diagnostics import coord
from zoo.optim import OptimConfig
from zoo.papers import lr_sweep, page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.param.base import MUP_TABLE, SP_TABLE
from zoo.param.tags import KINDS
from zoo.sweeps import report

NAME = "tp4b-adam-width"
FULL = {
    "image": {"data": "cifar10", "model": "mlp_resnet", "widths": [64, 128, 256, 512, 1024, 2048], "depth": 2,
              "log2_lrs": list(range(-14, -6)), "steps": 200, "batch_size": 64, "model_opt": {}},
    "text": {"data": "shakespeare", "model": "gpt", "widths": [64, 128, 256, 512], "depth": 2,
             "log2_lrs": list(range(-11, -3)), "steps": 200, "batch_size": 16,
             "model_opt": {"seq_len": 32, "dropout": 0.0}},
    "coord": {"inputs": ["gaussian:8", "cifar10"], "widths": [64, 128, 256, 512, 1024, 2048], "depth": 2,
              "batch": 8, "seeds": 3, "steps": 3, "lr": 1e-2},
}
QUICK = {
    "image": {"data": "synthetic:teacher", "model": "mlp_resnet", "widths": [16, 32], "depth": 1,
              "log2_lrs": [-8, -6], "steps": 3, "batch_size": 8, "model_opt": {}},
    "text": {"data": "synthetic:text", "model": "gpt", "widths": [16], "depth": 1, "log2_lrs": [-8, -6],
             "steps": 3, "batch_size": 4, "model_opt": {"seq_len": 8, "dropout": 0.0, "head_dim": 16}},
    "coord": {"inputs": ["gaussian:8"], "widths": [16, 32], "depth": 1, "batch": 4, "seeds": 1, "steps": 2,
              "lr": 1e-2},
}
ARMS = {"muP": {"t": 1.0}, "SP": {"t": 0.0}}
# Remark 2.2.7's SP with Adam LR ~ 1/n on every layer (c = 1 everywhere); muP as the stable reference
SP_LR_OVER_N = {"input": "0,0,1,0", "vector": "0,0,1,0", "hidden": "0,0.5,1,0", "output": "0,0.5,1,0"}
CAVEAT_ARM = "SP, Adam LR 1/n everywhere"
CAVEAT = 0.5  # TP IVb Thm 2.8.12: Delta f ~ n^(1 - a_out - b_out - r) = n^(1/2) (r = 0)
CAVEAT_TOL = 0.15
GROWS = 0.15  # a growth that a width range of 32x shows clearly (2^(5 x 0.15) = 1.7x)


def mix(options: dict[str, object]) -> zoo.param.Parametrization:
    """The abcd plugin with the exponents SP + t (muP - SP), t = options["t"]: SP at t = 0, muP (TP IVb gauge, 1/d
    logits) at t = 1."""
    t = options["t"]
    table = {k: tuple(s + t * (m - s) for s, m in zip(SP_TABLE[k], MUP_TABLE[k], strict=True)) for k in KINDS}
    return zoo.param.get("abcd", attn_exp=0.5 + 0.5 * t, **table)


def _sweep(s: dict, quick: bool, processes: int) -> list[dict]:
    load = functools.partial(zoo.data.load, s["data"], seq_len=s["model_opt"].get("seq_len", 256))
    return lr_sweep.sweep(s["model"], mix, ARMS, OptimConfig("adam"), load,
                          [(w, s["depth"]) for w in s["widths"]], s["log2_lrs"], steps=s["steps"],
                          batch_size=s["batch_size"], base_width=s["widths"][0], base_depth=s["depth"],
                          fast_compile=quick, processes=processes, **s["model_opt"])


def _batch(source: str, size: int) -> tuple[dict, tuple[int, ...], int]:
    """(batch, input shape, classes): `gaussian:D` draws x ~ N(0, I_D) and random labels of 10 classes (the research
    note's calibration, seed_tp4b_adam.md section 6); otherwise the first images of a zoo data set."""
    if source.startswith("gaussian:"):
        rng = np.random.default_rng(0)
        dim = int(source.partition(":")[2])
        return {"x": rng.standard_normal((size, dim), np.float32), "y": rng.integers(0, 10, size)}, (dim,), 10
    data = zoo.data.load(source)
    return jax.tree.map(np.asarray, data.read("train", np.arange(size))), tuple(data.in_shape), data.num_classes


def _coord(s: dict, source: str) -> dict:
    """Per plugin, layer -> [step] log-log slope of RMS(h_t - h_0) against width (zoo.diagnostics.coord)."""
    batch, in_shape, classes = _batch(source, s["batch"])
    out = {}
    for label, plugin in ((CAVEAT_ARM, zoo.param.get("abcd", **SP_LR_OVER_N)),
                          ("muP", zoo.param.get("mup"))):
        changes = coord.coord_data("mlp_resnet", plugin, s["widths"], s["seeds"], s["steps"],
                                   OptimConfig("adam", lr=s["lr"]), batch, depth=s["depth"],
                                   base_width=s["widths"][0], in_shape=in_shape, num_classes=classes)
        out[label] = {"rms": changes, "expected": plugin.expected_slopes("adam")}
    return out


def slopes(n: Numbers, source: str, arm: str) -> dict[str, np.ndarray]:
    """Layer -> [step] the log-log slope against width of the stored RMS changes (zoo.diagnostics.coord.slopes),
    fitted here, never stored beside them (zoo.papers.page)."""
    rms = {k: np.asarray(v, float) for k, v in n["coord"][source][arm]["rms"].items()}
    return coord.slopes(n["setting"]["coord"]["widths"], rms)


def run(quick: bool, processes: int = 1) -> Numbers:
    s = QUICK if quick else FULL
    out = {"setting": s}
    for part in ("image", "text"):
        lr_sweep.log(f"{part}:")
        out[part] = _sweep(s[part], quick, processes)
    lr_sweep.log("coordinate check:")
    out["coord"] = {source: _coord(s["coord"], source) for source in s["coord"]["inputs"]}
    return out


def _best(n: Numbers, part: str, arm: str) -> tuple[dict, report.Summary]:
    summary = report.summarize(lr_sweep.by_arm(n[part], arm))
    return lr_sweep.by_size(summary, "best_log2_lr", "width"), summary


def checks(n: Numbers) -> list[Check]:
    out = []
    for part in ("image", "text"):
        data = n["setting"][part]["data"]
        mup, mup_summary = _best(n, part, "muP")
        sp, sp_summary = _best(n, part, "SP")
        mup_spread, unmeasured = lr_sweep.best_spread(mup_summary, "width")
        sp_score = sp_summary.transfer_score
        out.append(Check(f"{data}: muP's best Adam LR stays put over widths",
                         "best log2 LR, inside the grid at every width, moves by at most 1 grid step",
                         f"muP {page.sizes(mup, 'n=')}", mup_spread is not None and mup_spread <= 1,
                         unmeasured or "one seed and a short run: near the optimum the loss is flat over neighbouring "
                         "LRs"))
        out.append(Check(f"{data}: SP's best Adam LR moves with width", "best log2 LR moves by >= 2 grid steps",
                         f"SP {page.sizes(sp, 'n=')}", sp_score is not None and sp_score >= 2,
                         "over this width range SP's best LR moved less than 2 grid steps" +
                         ("; with CIFAR-10's 3072 input pixels the input layer, whose fan-in does not grow, weighs on "
                          "SP's best LR at widths below 3072 (README, Sweeps)" if part == "image" else "")))
    c = n["setting"]["coord"]
    source = c["inputs"][0]
    res = n["coord"][source][CAVEAT_ARM]
    caveat = slopes(n, source, CAVEAT_ARM)["output"]
    rms = np.asarray(res["rms"]["output"])[:, -1]
    wide = float(np.polyfit(np.log(c["widths"][-3:]), np.log(rms[-3:]), 1)[0]) if len(rms) >= 3 else caveat[-1]
    measured = "slope per step " + ", ".join(f"{v:+.2f}" for v in caveat)
    out.append(Check("TP IVb Remark 2.2.7 caveat: SP with Adam LR ~ 1/n on every layer is not stable",
                     f"the output change grows with width on {source} inputs: slope >= {GROWS} at every step "
                     "(Remark 2.2.7 calls this parametrization stable: slope <= 0)", measured,
                     min(caveat) >= GROWS, "the output change did not grow over these widths"))
    out.append(Check("... and its output change grows like n^(1/2) (Thm 2.8.12)",
                     f"slope at step {len(caveat)} within {CAVEAT_TOL} of +{CAVEAT}", measured,
                     abs(caveat[-1] - CAVEAT) <= CAVEAT_TOL,
                     f"over the widest three widths the slope at step {len(caveat)} is {wide:+.2f}"
                     + (", higher than over all of them: it rises toward 1/2 as the width grows"
                        if wide > caveat[-1] else "") + " (the research note's simulation, a 3-layer MLP with MSE: "
                     "+0.42 over widths 64..2048, +0.51 over the widest three)"))
    return out


def plot(n: Numbers, path: Path) -> None:
    s = n["setting"]
    fig, axes = page.figure(3, 2, size=(4.4, 3.6))
    for row, part in enumerate(("image", "text")):
        for col, arm in enumerate(ARMS):
            summary = report.summarize(lr_sweep.by_arm(n[part], arm))
            p = s[part]
            report.panel(axes[row][col], summary, f"{arm}, {p['model']} on {p['data']}, {p['steps']} steps")
            axes[row][col].set_xlabel(f"log2 Adam LR (at base width {p['widths'][0]})")
    ax = axes[0][2]
    c = s["coord"]
    w = np.asarray(c["widths"], float)
    for (source, by_plugin), style in zip(n["coord"].items(), ("-", "--"), strict=False):
        for (label, res), marker in zip(by_plugin.items(), "os", strict=False):
            rms = np.asarray(res["rms"]["output"])[:, -1]  # [width] at the last step
            fit = slopes(n, source, label)["output"][-1]
            ax.loglog(w, rms, marker + style, ms=4, label=f"{label}, {source}: {fit:+.2f}")
    first = np.asarray(n["coord"][c["inputs"][0]][CAVEAT_ARM]["rms"]["output"])[0, -1]
    ax.loglog(w, first * (w / w[0]) ** CAVEAT, "k:", lw=1, label="n^(1/2)")
    ax.set_xlabel("width n")
    ax.set_ylabel(f"RMS change of the logits after {c['steps']} Adam steps")
    ax.set_title("Remark 2.2.7: SP with LR 1/n everywhere", fontsize=10)
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3, which="both")
    ax = axes[1][2]
    for (source, by_plugin), style in zip(n["coord"].items(), ("-", "--"), strict=False):
        for label, marker in zip(by_plugin, "os", strict=False):
            for layer in ("embed", "output"):
                values = slopes(n, source, label)[layer]
                ax.plot(range(1, len(values) + 1), values, marker + style, ms=4, label=f"{label}, {source}: {layer}")
    ax.axhline(CAVEAT, color="gray", lw=0.8)
    ax.axhline(0.0, color="gray", lw=0.8)
    ax.set_xlabel("Adam step t")
    ax.set_ylabel("width slope of RMS(h_t - h_0)")
    ax.set_title("coordinate-check slopes (input layer, logits)", fontsize=10)
    ax.legend(fontsize=5)
    ax.grid(alpha=0.3)
    fig.suptitle("TP IVb: Adam LR against width, muP vs SP; and Remark 2.2.7's caveat", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    s = n["setting"]
    parts = [f"{p['model']} (depth {p['depth']}) on {p['data']}, widths {', '.join(map(str, p['widths']))} (base "
             f"{p['widths'][0]}), Adam, batch {p['batch_size']}, {p['steps']} steps, LRs 2^{p['log2_lrs'][0]}.."
             f"2^{p['log2_lrs'][-1]}, 1 seed, loss: mean train loss over the last 10% of steps"
             for p in (s["image"], s["text"])]
    c = s["coord"]
    parts.append(f"caveat: mlp_resnet (depth {c['depth']}) on a batch of {c['batch']} inputs from "
                 f"{' and from '.join(c['inputs'])}, widths {c['widths'][0]}..{c['widths'][-1]}, {c['steps']} Adam "
                 f"steps at LR {c['lr']} (times n0/n on every layer), {c['seeds']} seeds")
    return "; ".join(parts)


def result(n: Numbers) -> str:
    parts = []
    for part in ("image", "text"):
        for arm in ARMS:
            best, summary = _best(n, part, arm)
            parts.append(f"{n['setting'][part]['data']} {arm}: best log2 LR {page.sizes(best, 'n=')} (transfer "
                         f"score {summary.transfer_score} grid steps)")
    for source, by_plugin in n["coord"].items():
        parts.append(f"{source} inputs: output-change slopes at t = 1..{n['setting']['coord']['steps']}: " +
                     ", ".join(f"{label} " + " ".join(f"{v:+.2f}" for v in slopes(n, source, label)["output"])
                               for label in by_plugin))
    return "; ".join(parts)


CLAIM = Claim(
    name=NAME,
    title="muP keeps the best Adam LR across width, SP does not; SP with LR 1/n is unstable",
    source="Yang, Littwin, Tensor Programs IVb, Def. 2.5.1, Thm. 2.8.12 and Remark 2.2.7",
    paper_setting="a theory paper: abcd-parametrizations of MLPs trained by Adam (any entrywise optimizer) in the "
                  "infinite-width limit; its experiments check the limits on MLPs, the practical transfer of the "
                  "best LR is the muTransfer result (TP V) that TP IVb's muP extends to Adam",
    paper_result="muP is the unique stable, feature-learning abcd-parametrization with every layer learning maximally "
                 "(so its optimal LR converges as the width grows); SP is not; Remark 2.2.7 says SP with Adam LR "
                 "1/n on every layer is stable and learns features, which its own Thm. 2.8.12 contradicts "
                 "(a_out + b_out + r = 1/2 < 1: the output change grows like n^(1/2), seed_tp4b_adam.md section 3)",
    scale="CIFAR-10 at widths 64..2048 (a 32x range, as asked) but depth 2 and 200 steps; the caveat on Gaussian "
          "inputs of dimension 8, the research note's calibration (seed_tp4b_adam.md section 6), and on CIFAR-10 "
          "images beside it: with 3072 inputs the input layer's update, which falls like 1/n under this LR, "
          "dominates every layer's change at widths below about 3072; tiny-shakespeare with a "
          "2-layer GPT at widths 64..512 only (8x): one Adam step of a 2-layer GPT at width 2048 costs about 3 s per "
          "member on the 2-core CPU, so a 32x range with an LR grid would take hours. The whole claim takes about "
          "45 minutes on the 2-core CPU.",
    run=run, checks=checks, plot=plot, setting=setting, result=result, serial="")
