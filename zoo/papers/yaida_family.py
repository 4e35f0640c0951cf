"""Yaida's meta-principled family (s in [0, 1], NTK at s = 0, muP at s = 1; zoo's `ntk_mup`): after one SGD step
the NTK's even change scales like gamma = L / n^(1-s) and the features move like n^(-(1-s)/2); growing the depth
with the width as L ~ n^(1-s) keeps the NTK change fixed (seed_yaida_and_lecture.md sections 1.3, 1.4, 3.D).

Yaida's network is a plain MLP, here the MLP-ResNet with its skip path off (linear, no mean subtraction), one
input x = 1 (|x|^2 / n0 = 1), one output, SGD at lr = 1 / (L n0), L counting all weight layers (blocks + 2). With
the input dimension equal to the base width n0 = 64, zoo's one base LR is Yaida's lambda / fan-in (lambda = 1/L,
eta_0 = 1) on every layer. The research note's input dimension 16 gives the input layer 4x less than Yaida's; the
s = 0 fixed-gamma path is also measured that way, to show what that constant does.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

import zoo.models
from zoo.diagnostics.ntk import ntk_change
from zoo.papers import lr_sweep, page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.param.ntk_mup import NTKMuP

NAME = "yaida-family"
FULL = {"widths": [64, 128, 256, 512, 1024], "layers": 4, "s": [0.0, 0.25, 0.5, 0.75, 1.0], "seeds": 64,
        "in_dim": 64, "paths": {"0.0": [64, 128, 256, 512], "0.5": [64, 256, 1024], "1.0": [64, 256, 1024]},
        "other_in_dim": 16}
QUICK = {"widths": [16, 32], "layers": 4, "s": [0.0, 1.0], "seeds": 2, "in_dim": 16, "other_in_dim": 4,
         "paths": {"0.0": [16, 32], "1.0": [16, 32]}}
TOL = {"even": 0.08, "feature": 0.06}  # seed_yaida_and_lecture.md D5 (64 seeds)
FLAT = 0.15  # D7: the NTK change stays within 15% of its mean along L ~ n^(1-s)
FALL = 8.0  # D7's contrast: at fixed L, s = 0 falls by n^(1-s) = 16x over 64..1024; at least 8x


@dataclasses.dataclass(frozen=True)
class PlainNTKMuP(NTKMuP):
    """Yaida's family on a plain MLP: the MLP-ResNet's skip path off, x^l = phi(W^l x^{l-1})."""

    def skip_multiplier(self) -> Any:
        return 0.0


def expected(key: str, s: float) -> float:
    return -(1 - s) if key == "even" else -(1 - s) / 2


def _measure(width: int, layers: int, s_values: list[float], seeds: int, in_dim: int, base: int) -> dict:
    cfg = zoo.models.config("mlp_resnet", width=width, depth=layers - 2, base_width=base, in_shape=(in_dim,),
                                 num_classes=1, activation="identity", mean_subtract=False)
    out = ntk_change("mlp_resnet", cfg, lambda o: PlainNTKMuP(**o), {"s": s_values}, 1.0 / (layers * base),
                     jnp.ones((1, in_dim)), seeds)
    return {k: out[k].mean(1) for k in ("even", "odd", "feature", "ntk")}


def run(quick: bool) -> Numbers:
    st = QUICK if quick else FULL
    base = st["widths"][0]
    width_rows = {}
    for w in st["widths"]:
        width_rows[w] = _measure(w, st["layers"], st["s"], st["seeds"], st["in_dim"], base)
        lr_sweep.log(f"  width {w}, L = {st['layers']}: done")
    paths = {}
    for s, widths in st["paths"].items():
        rows = []
        for w in widths:
            layers = PlainNTKMuP(s=float(s)).yaida_depth(w, base, st["layers"])
            m = width_rows[w] if layers == st["layers"] else _measure(w, layers, [float(s)], st["seeds"],
                                                                        st["in_dim"], base)
            i = st["s"].index(float(s)) if layers == st["layers"] else 0
            rows.append({"width": w, "layers": layers, "even": float(m["even"][i])})
        paths[s] = rows
        lr_sweep.log(f"  fixed gamma, s = {s}: done")
    other = [{"width": r["width"], "layers": r["layers"],
              "even": float(_measure(r["width"], r["layers"], [0.0], st["seeds"], st["other_in_dim"], base)["even"][0])}
             for r in paths["0.0"]]
    return {"setting": st, "by_width": {str(w): v for w, v in width_rows.items()}, "paths": paths,
            "other_in_dim_path": other}


def slopes(n: Numbers, key: str) -> dict[float, float]:
    """s -> log-log slope of the seeds' mean |key| against width at fixed depth."""
    st = n["setting"]
    logw = np.log(st["widths"])
    values = np.abs(np.array([n["by_width"][str(w)][key] for w in st["widths"]]))  # [width, s]
    return {s: float(np.polyfit(logw, np.log(values[:, i]), 1)[0]) for i, s in enumerate(st["s"])}


def checks(n: Numbers) -> list[Check]:
    st = n["setting"]
    out = []
    for key, what in (("even", "NTK change (even part)"), ("feature", "feature change")):
        sl = slopes(n, key)
        bad = [s for s, v in sl.items() if abs(v - expected(key, s)) > TOL[key]]
        out.append(Check(f"{what} ~ n^{'-(1-s)' if key == 'even' else '-(1-s)/2'} at fixed depth",
                         f"|slope - theory| <= {TOL[key]} for every s",
                         ", ".join(f"s={s:g}: {v:+.3f} (theory {expected(key, s):+.3f})" for s, v in sl.items()),
                         not bad, f"off at s = {', '.join(f'{s:g}' for s in bad)}: finite widths "
                         f"{st['widths'][0]}..{st['widths'][-1]} and {st['seeds']} seeds"))
    spreads = {s: max(abs(r["even"] / np.mean([q["even"] for q in rows]) - 1) for r in rows)
               for s, rows in n["paths"].items()}
    out.append(Check("the NTK change stays fixed when L grows like n^(1-s)",
                     f"every E along each path within {FLAT:.0%} of the path's mean",
                     ", ".join(f"s={s}: {_path(rows)}" for s, rows in n["paths"].items()),
                     all(v <= FLAT for v in spreads.values()),
                     "gamma = L / n^(1-s) sets the even change only to leading order; corrections of relative "
                     "order 1/L remain at these depths"))
    if 0.0 in st["s"]:
        col = st["s"].index(0.0)
        e = [n["by_width"][str(w)]["even"][col] for w in st["widths"]]
        out.append(Check("contrast: at fixed depth the NTK scaling (s = 0) freezes the kernel",
                         f"E falls by >= {FALL:g}x from n = {st['widths'][0]} to {st['widths'][-1]} at L = "
                         f"{st['layers']} (theory {st['widths'][-1] / st['widths'][0]:g}x)",
                         f"E {e[0]:.3g} -> {e[-1]:.3g} ({e[0] / e[-1]:.1f}x)", e[0] / e[-1] >= FALL,
                         "the width range is too small for the n^-1 fall"))
    return out


def plot(n: Numbers, path: Path) -> None:
    import matplotlib

    st = n["setting"]
    w = np.asarray(st["widths"], float)
    fig, axes = page.figure(3, size=(4.4, 3.8))
    colors = matplotlib.colormaps["viridis"](np.linspace(0.1, 0.9, len(st["s"])))
    for ax, key, label in ((axes[0][0], "even", "even NTK change E"), (axes[0][1], "feature", "feature change")):
        values = np.abs(np.array([n["by_width"][str(x)][key] for x in st["widths"]]))
        for i, (s, color) in enumerate(zip(st["s"], colors, strict=True)):
            ax.loglog(w, values[:, i], "o", color=color, label=f"s = {s:g}: {slopes(n, key)[s]:+.2f}")
            ax.loglog(w, values[0, i] * (w / w[0]) ** expected(key, s), "--", color=color, lw=1)
        ax.set_xlabel("width n")
        ax.set_ylabel(label)
        ax.set_title(f"{label} at L = {st['layers']} (dashed: theory)", fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both")
    ax = axes[0][2]
    for s, rows in n["paths"].items():
        ax.loglog([r["width"] for r in rows], [r["even"] for r in rows], "o-",
                  label=f"s = {s}: L ~ n^{1 - float(s):g} (L = {rows[0]['layers']}..{rows[-1]['layers']})")
    if 0.0 in st["s"]:
        col = st["s"].index(0.0)
        ax.loglog(w, [n["by_width"][str(x)]["even"][col] for x in st["widths"]], "k:", label=f"s = 0 at L = "
                  f"{st['layers']}")
    ax.set_xlabel("width n")
    ax.set_ylabel("even NTK change E")
    ax.set_title("fixed gamma = L / n^(1-s): E stays put", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    fig.suptitle("Yaida's family after one SGD step (linear plain MLP, zoo's ntk_mup)", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    st = n["setting"]
    return (f"zoo's ntk_mup at s = {', '.join(f'{s:g}' for s in st['s'])} on a linear plain MLP (the MLP-ResNet "
            f"with its skip path off), input dimension {st['in_dim']}, one input x = 1, one output; widths "
            f"{', '.join(map(str, st['widths']))} (base {st['widths'][0]}) at L = {st['layers']} weight layers; "
            f"one SGD step at lr = 1/(L n0) on the loss c f, c = +-1; {st['seeds']} seeds")


def _path(rows: list[dict]) -> str:
    return " ".join(f"(n={r['width']}, L={r['layers']}) {r['even']:.3g}" for r in rows)


def result(n: Numbers) -> str:
    st = n["setting"]
    return ("; ".join(f"{key} slopes " + ", ".join(f"s={s:g}: {v:+.3f}" for s, v in slopes(n, key).items())
                      for key in ("even", "feature")) +
            "; E along L ~ n^(1-s): " + ", ".join(f"s={s}: {_path(rows)}" for s, rows in n["paths"].items()) +
            f"; with input dimension {st['other_in_dim']} instead of {st['in_dim']} (the input layer's LR "
            f"{st['in_dim'] // st['other_in_dim']}x below Yaida's), s = 0: {_path(n['other_in_dim_path'])}")


CLAIM = Claim(
    name=NAME,
    title="Yaida's family: the NTK moves like L / n^(1-s), features like n^(-(1-s)/2)",
    source="Yaida, Meta-Principled Family of Hyperparameter Scaling Strategies (sections 3-4)",
    paper_setting="an MLP of width n and depth L trained by SGD under the one-parameter family between NTK (s = 0) "
                  "and muP (s = 1); perturbative analysis at initialization (the note has no figure of its own)",
    paper_result="the NTK's differentials scale with gamma = L / n^(1-s): at fixed depth the NTK change goes like "
                 "n^-(1-s) and the features move like n^(-(1-s)/2); scaling L ~ n^(1-s) keeps gamma, hence the "
                 "representation learning, fixed",
    scale="The research note's own test sizes (D5 and D7: widths 64..1024, 64 seeds, L = 4, the fixed-gamma paths "
          "up to L = 32): a few minutes on the 2-core CPU. Yaida's constants (C_W, lambda, eta_0) differ from zoo's "
          "by width-independent factors, so E's size differs from the note's; its exponents do not.",
    run=run, checks=checks, plot=plot, setting=setting, result=result)
