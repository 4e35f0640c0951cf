"""Doshi, He, Gromov Fig. 1: at criticality the APJN J^{0,l} follows a power law in l: l^-1 for erf at its
critical point, l^0 for ReLU at (sqrt 2, 0), and a growing l^(A/B) with pre-LN and mu = 1 (Thm 1.3), as
infinite-width theory says (seed_partial_jacobians.md sections 1, 4 and 6).

The paper's network is the MLP-ResNet with the pre-nonlinearity branch W phi(h) + b, no mean subtraction, skip
multiplier mu (the `critical` plugin); J^{0,l} by Hutchinson probes (zoo.diagnostics.jacobian.apjn).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import zoo.models
import zoo.param
from zoo.diagnostics import jacobian, profile
from zoo.papers import lr_sweep, page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.param import mean_field_theory as theory

NAME = "dhg-apjn"
FULL = {"width": 1000, "depth": 100, "in_dim": 784, "seeds": 16, "batch": 8, "probes": 2, "cases": [0, 1, 2, 3]}
QUICK = {"width": 32, "depth": 10, "in_dim": 16, "seeds": 2, "batch": 2, "probes": 1, "cases": [0, 2]}
# (label, activation, pre_ln, mu, sigma_w, paper's asymptotic exponent: None = A/B of Thm 1.3)
CASES = [("erf at its critical point", "erf", False, 0.0, math.sqrt(math.pi / 4), -1.0),
         ("ReLU at (sqrt 2, 0)", "relu", False, 0.0, math.sqrt(2.0), 0.0),
         ("erf, pre-LN, mu = 1", "erf", True, 1.0, math.sqrt(2.0), None),
         ("GELU, pre-LN, mu = 1", "gelu", True, 1.0, math.sqrt(2.0), None)]
TOL = 0.1  # seed_partial_jacobians.md section 6, checks 2 and 4


def _cfg(s: dict, activation: str, pre_ln: bool):
    return zoo.models.config("mlp_resnet", width=s["width"], depth=s["depth"], in_shape=(s["in_dim"],),
                             activation=activation, pre_ln=pre_ln, pre_nonlin=True, bias=True, mean_subtract=False)


def asymptotic(activation: str, value: float | None) -> float:
    """The paper's exponent: given, or A/B = E phi'(z)^2 / E phi(z)^2 at sigma_b = 0 (Thm 1.3)."""
    if value is not None:
        return value
    _, e2, d2 = theory.moments(activation, 1.0)
    return d2 / e2


def run(quick: bool) -> Numbers:
    s = QUICK if quick else FULL
    rows = []
    for label, act, pre_ln, mu, sigma_w, paper in (CASES[i] for i in s["cases"]):
        cfg = _cfg(s, act, pre_ln)
        plugin = zoo.param.get("critical", sigma_w=sigma_w, sigma_b=0.0, mu=mu)
        mean, err = jacobian.apjn("mlp_resnet", cfg, plugin, 0, seeds=s["seeds"], batch=s["batch"],
                                  probes=s["probes"])
        inf = profile.infinite_width(cfg, plugin)
        rows.append({"label": label, "activation": act, "pre_ln": pre_ln, "mu": mu, "sigma_w": sigma_w,
                     "apjn": mean, "stderr": err, "infinite_width": None if inf is None else [1.0, *inf],
                     "paper_exponent": asymptotic(act, paper)})
        lr_sweep.log(f"  {label}: exponent {exponents(rows[-1], s['depth'])[0]:+.3f}")
    return {"setting": s, "rows": rows}


def exponents(row: dict, depth: int) -> tuple[float, float | None]:
    """The exponents fitted to a row's stored profiles: the measured J^{0,l}'s and the infinite-width one's (None
    where theory overflowed), never stored beside them (zoo.papers.page)."""
    inf = row["infinite_width"]
    return (profile.exponent(np.asarray(row["apjn"], float), depth),
            None if inf is None else profile.exponent(np.asarray(inf, float), depth))


def checks(n: Numbers) -> list[Check]:
    lo, hi = profile.fit_range(n["setting"]["depth"])
    out = []
    for r in n["rows"]:
        measured, th = exponents(r, n["setting"]["depth"])
        out.append(Check(f"{r['label']}: J^{{0,l}} ~ l^{r['paper_exponent']:+.3f} (paper)",
                         f"fitted exponent over l in [{lo}, {hi}] within {TOL} of infinite-width theory over the "
                         "same l (the running product of chi^l)",
                         f"measured {measured:+.3f}, theory {th:+.3f}" if th is not None else
                         f"measured {measured:+.3f}, theory overflowed",
                         th is not None and abs(measured - th) <= TOL,
                         "finite width: corrections of order l / N grow along the stack (the paper: fluctuations "
                         "grow toward the output as l/N -> 1/4)"))
    return out


def plot(n: Numbers, path: Path) -> None:
    s = n["setting"]
    fig, axes = page.figure(len(n["rows"]), size=(4.2, 3.6))
    for ax, r in zip(axes[0], n["rows"], strict=True):
        inf = None if r["infinite_width"] is None else np.asarray(r["infinite_width"][1:])
        profile.draw(ax, np.asarray(r["apjn"]), np.asarray(r["stderr"]),
                     f"{r['label']}\npaper: l^{r['paper_exponent']:+.2f}", inf)
    fig.suptitle(f"Doshi, He, Gromov Fig. 1: APJN J^(0,l) at criticality, N = {s['width']}, L = {s['depth']}, "
                 f"{s['seeds']} inits", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"zoo's MLP-ResNet as the paper's MLP (pre-nonlin branch, biases, no mean subtraction, `critical` "
            f"plugin), N = {s['width']}, L = {s['depth']}, Gaussian inputs of dimension {s['in_dim']}, "
            f"{s['seeds']} initializations x {s['batch']} inputs x {s['probes']} Hutchinson probes; exponent "
            f"fitted over l in [{profile.fit_range(s['depth'])[0]}, {s['depth']}]")


def result(n: Numbers) -> str:
    fits = [exponents(r, n["setting"]["depth"]) for r in n["rows"]]
    return "; ".join(f"{r['label']}: {measured:+.3f} (infinite-width theory over the same l "
                     + ("overflowed" if th is None else f"{th:+.3f}")
                     + f", paper's asymptote {r['paper_exponent']:+.3f})" for r, (measured, th) in
                     zip(n["rows"], fits, strict=True))


CLAIM = Claim(
    name=NAME,
    title="At criticality the partial Jacobian norm follows a power law in depth",
    source="Doshi, He, Gromov, Critical Initialization of Wide and Deep Neural Networks using Partial Jacobians, "
           "Fig. 1 (Thm 2.7, Thm 1.3)",
    paper_setting="MLP of width N = 1000, Gaussian 'MNIST-like' inputs, 100 initializations; erf at its critical "
                  "point (sigma_w^2 = pi/4, sigma_b = 0, L = 250, fit l > 100), ReLU at (sqrt 2, 0) (L = 100), "
                  "erf and GELU with pre-LN and mu = 1 at (sqrt 2, 0) (L = 250)",
    paper_result="J^{0,l} ~ l^-1 for erf at criticality, constant for ReLU, an O(1) positive power (A/B) with "
                 "pre-LN and mu = 1; excellent agreement with infinite-width theory",
    scale="N = 1000 as in the paper, L = 100 for every case (the paper: 250 for erf) and 16 initializations instead "
          "of 100: about 3 minutes on a quiet 2-core CPU. The exponent is fitted over l in [L/5, L] = [20, 100] and "
          "judged against infinite-width theory over the same l, which at finite l can differ from the paper's "
          "asymptotic exponent (the page shows both).",
    run=run, checks=checks, plot=plot, setting=setting, result=result)
