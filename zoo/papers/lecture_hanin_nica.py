"""The depth-scaling lecture's Theorem 1 (Hanin and Nica): in a deep linear network of width n and depth d,
Y = log(|h_d|^2 / n) is a sum of d independent log(chi^2_n / n) terms, so it is Gaussian in the limit d/n -> tau
with mean -tau and variance 2 tau (|h_d|^2 / n is log-normal), and at finite (n, d) exactly

    E Y = d [psi(n/2) - log(n/2)],   Var Y = d psi'(n/2)          (seed_yaida_and_lecture.md section 2, table A)

for an input with |x|^2 = n0. The network is zoo's MLP-ResNet with its skip path off and a linear branch (the
`critical` plugin at mu = 0, sigma_w = 1, sigma_b = 0: W ~ N(0, 1/fan_in)), so d counts the input layer and the
d - 1 blocks.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.scipy.special import digamma, polygamma

import zoo.models
import zoo.param
from zoo.papers import lr_sweep, page
from zoo.papers.claim import Check, Claim, Numbers

NAME = "lecture-hanin-nica"
FULL = {"sizes": [[64, 16], [128, 32], [32, 16], [64, 32], [128, 64], [32, 32], [64, 64]], "networks": 3000,
        "in_dim": 16}
QUICK = {"sizes": [[8, 4], [8, 8]], "networks": 64, "in_dim": 4}
SE = 4.0  # tolerances in standard errors (seed_yaida_and_lecture.md section 3: about 4 SE)
SKEW, KURT = 0.15, 0.35  # test A4's bounds on the sample skewness and excess kurtosis


def exact(n: int, d: int) -> tuple[float, float]:
    """E Y and Var Y at finite (n, d): d [psi(n/2) - log(n/2)] and d psi'(n/2)."""
    return (float(d * (digamma(n / 2) - np.log(n / 2))), float(d * polygamma(1, n / 2)))


def samples(n: int, d: int, networks: int, in_dim: int, key: int = 0) -> np.ndarray:
    """log(|h_l|^2 / n) for l = 1..d over independent networks: [networks, d]."""
    cfg = zoo.models.config("mlp_resnet", width=n, depth=d - 1, in_shape=(in_dim,), num_classes=1,
                            activation="identity", mean_subtract=False)
    plugin = zoo.param.get("critical", sigma_w=1.0, sigma_b=0.0, mu=0.0)
    x = jnp.ones((1, in_dim))

    @jax.jit
    def run(keys):
        def one(k):
            _, inter = zoo.models.create("mlp_resnet", cfg, plugin, nnx.Rngs(k))(x)
            stream = jnp.concatenate([inter["embed"][None], inter["blocks"]], axis=0)[:, 0]  # [d, n]
            return jnp.log(jnp.sum(jnp.square(stream), axis=-1) / n)

        return jax.lax.map(one, keys, batch_size=32)

    return np.asarray(run(jax.random.split(jax.random.key(key), networks)), np.float64)


def moments(y: np.ndarray) -> dict[str, float]:
    """Sample mean, variance, skewness and excess kurtosis."""
    z = (y - y.mean()) / y.std()
    return {"mean": float(y.mean()), "var": float(y.var(ddof=1)), "skew": float(np.mean(z**3)),
            "kurtosis": float(np.mean(z**4) - 3)}


def run(quick: bool) -> Numbers:
    s = QUICK if quick else FULL
    rows = []
    for n, d in s["sizes"]:
        y = samples(n, d, s["networks"], s["in_dim"])
        mean, var = exact(n, d)
        density, edges = np.histogram(y[:, -1], bins=40, density=True)
        rows.append({"n": n, "d": d, "tau": d / n, **moments(y[:, -1]), "exact_mean": mean, "exact_var": var,
                     "var_by_layer": y.var(0, ddof=1), "histogram": {"edges": edges, "density": density}})
        lr_sweep.log(f"  n = {n}, d = {d}: mean {rows[-1]['mean']:+.4f} (exact {mean:+.4f}), var "
                     f"{rows[-1]['var']:.4f} (exact {var:.4f})")
    return {"setting": s, "rows": rows}


def checks(n: Numbers) -> list[Check]:
    rows, count = n["rows"], n["setting"]["networks"]
    mean_off = [abs(r["mean"] - r["exact_mean"]) / np.sqrt(r["var"] / count) for r in rows]
    var_off = [abs(r["var"] - r["exact_var"]) / (r["exact_var"] * np.sqrt(2 / (count - 1))) for r in rows]
    shape = [(r["skew"], r["kurtosis"]) for r in rows]
    sizes = [f"(n={r['n']}, d={r['d']})" for r in rows]
    return [
        Check("mean of log(|h_d|^2/n) = d [psi(n/2) - log(n/2)] (about -tau)", f"within {SE:g} standard errors",
              ", ".join(f"{s} {r['mean']:+.3f} vs {r['exact_mean']:+.3f}" for s, r in zip(sizes, rows, strict=True)),
              max(mean_off) <= SE, "sampling: more networks are needed"),
        Check("variance = d psi'(n/2) (about 2 tau)", f"within {SE:g} standard errors (Gaussian: var sqrt(2/(N-1)))",
              ", ".join(f"{s} {r['var']:.3f} vs {r['exact_var']:.3f}" for s, r in zip(sizes, rows, strict=True)),
              max(var_off) <= SE, "sampling: more networks are needed"),
        Check("log(|h_d|^2/n) is Gaussian (|h_d|^2/n log-normal)",
              f"|skewness| <= {SKEW} and |excess kurtosis| <= {KURT} at every size",
              ", ".join(f"{s} {a:+.3f}/{b:+.3f}" for s, (a, b) in zip(sizes, shape, strict=True)),
              all(abs(a) <= SKEW and abs(b) <= KURT for a, b in shape),
              "the skewness -sqrt(2/(n d)) of the finite sum is not yet negligible at these sizes"),
    ]


def plot(n: Numbers, path: Path) -> None:
    import matplotlib

    rows = n["rows"]
    fig, axes = page.figure(3, size=(4.4, 3.8))
    ax = axes[0][0]
    width = rows[0]["n"]
    same = [r for r in rows if r["n"] == width]
    colors = matplotlib.colormaps["viridis"](np.linspace(0.1, 0.8, max(len(same), 2)))
    for r, color in zip(same, colors, strict=False):
        edges = np.asarray(r["histogram"]["edges"])
        ax.stairs(r["histogram"]["density"], edges, fill=True, alpha=0.35, color=color,
                  label=f"d = {r['d']} (tau = {r['tau']:g})")
        grid = np.linspace(edges[0], edges[-1], 200)
        ax.plot(grid, _gauss(grid, r["exact_mean"], r["exact_var"]), "-", color=color, lw=1.5)
        ax.plot(grid, _gauss(grid, -r["tau"], 2 * r["tau"]), ":", color="k", lw=1)
    ax.set_xlabel(f"log(|h_d|^2 / n), n = {width}")
    ax.set_ylabel("density")
    ax.set_title("histograms; lines: exact Gaussian, dotted: N(-tau, 2 tau)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[0][1]
    tau = np.array([r["tau"] for r in rows])
    for key, sign, label, color in (("mean", -1, "mean", "tab:blue"), ("var", 2, "variance", "tab:orange")):
        ax.plot(tau, [r[key] for r in rows], "o", color=color, label=f"{label} measured")
        ax.plot(tau, [r[f"exact_{key}"] for r in rows], "k+", ms=9)
        t = np.linspace(0, tau.max() * 1.05, 20)
        ax.plot(t, sign * t, "--", color=color, lw=1, label=f"{label}: {sign} tau (limit)")
    ax.set_xlabel("tau = d / n")
    ax.set_title("mean and variance (+: exact at finite n, d)", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax = axes[0][2]
    deep = max(rows, key=lambda r: r["d"])
    layers = np.arange(1, deep["d"] + 1)
    ax.plot(layers, deep["var_by_layer"], "o", ms=3, label="measured")
    ax.plot(layers, [exact(deep["n"], int(ll))[1] for ll in layers], "k-", lw=1, label="l psi'(n/2)")
    ax.set_xlabel("layer l")
    ax.set_ylabel("Var log(|h_l|^2 / n)")
    ax.set_title(f"variance grows linearly in depth (n = {deep['n']})", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.suptitle(f"Hanin-Nica: deep linear networks, {n['setting']['networks']} networks per size", fontsize=10)
    page.save(fig, path)


def _gauss(x: np.ndarray, mean: float, var: float) -> np.ndarray:
    return np.exp(-0.5 * (x - mean) ** 2 / var) / np.sqrt(2 * np.pi * var)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"zoo's MLP-ResNet with its skip path off and a linear branch (`critical`, mu = 0, sigma_w = 1, "
            f"sigma_b = 0), input x = 1 of dimension {s['in_dim']}; (n, d) = "
            f"{', '.join(f'({a}, {b})' for a, b in s['sizes'])}; {s['networks']} independent networks per size")


def result(n: Numbers) -> str:
    return "; ".join(f"(n={r['n']}, d={r['d']}): mean {r['mean']:+.3f} (exact {r['exact_mean']:+.3f}), var "
                     f"{r['var']:.3f} (exact {r['exact_var']:.3f}), skew {r['skew']:+.3f}" for r in n["rows"])


CLAIM = Claim(
    name=NAME,
    title="Deep linear networks: log(|h_d|^2/n) is Gaussian with mean -d/n and variance 2d/n",
    source="Lecture notes 'Depth Scaling', Theorem 1 (Hanin and Nica)",
    paper_setting="a linear network h_{l+1} = W_l h_l / sqrt(n), W ~ N(0, 1), single input, width n and depth d "
                  "with d/n -> tau",
    paper_result="log(|h_d|^2/n) -> N(log(|x|^2/n0) - tau, 2 tau): the mean of |h_d|^2/n is kept but a typical "
                 "network shrinks it by e^-tau, and the fluctuations grow with the aspect ratio d/n",
    scale="Widths 32..128 and depths 16..64 (tau = 0.25, 0.5, 1) with 3000 networks per size: about 2 minutes on "
          "a quiet 2-core CPU. The theorem is exact at every finite size through the chi^2 identity, so the check "
          "uses the finite-size moments; the limit N(-tau, 2 tau) is drawn beside them.",
    run=run, checks=checks, plot=plot, setting=setting, result=result)
