"""How to orthogonalise q, k and v (issue 18): per matrix (zoo) or per head. The GPT under muP at widths 128..1024
with heads of 32 (the head count grows with width), the first gradient of layer 0's q, k and v, and the spectral
norm of Muon's Newton-Schulz output for the whole n x n matrix and for each head's n x 32 block assembled back.
Writes qkv.json beside this script (docs/muon/, the page docs/muon.md).

    nice -n 19 python docs/muon/qkv.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from optax.contrib import MuonDimensionNumbers
from optax.contrib._muon import orthogonalize_via_newton_schulz

import zoo.models
import zoo.param
from zoo.train.step import loss_and_metrics

NS = jnp.asarray((3.4445, -4.7750, 2.0315))  # optax's default coefficients
WIDTHS, HEAD_DIM = [128, 256, 512, 1024], 32


def norms(width: int) -> dict[str, dict[str, float]]:
    cfg = zoo.models.config("gpt", width=width, depth=2, base_width=WIDTHS[0], seq_len=64, dropout=0.0,
                            head_dim=HEAD_DIM)
    graphdef, params, rest = nnx.split(zoo.models.create("gpt", cfg, zoo.param.get("mup"), nnx.Rngs(0)), nnx.Param,
                                       ...)
    x = jax.random.randint(jax.random.key(1), (16, 64), 0, 65)
    batch = {"x": x, "y": jnp.roll(x, -1, 1)}
    grads = jax.grad(lambda p: loss_and_metrics(nnx.merge(graphdef, p, rest), batch, None, True)[0])(params)
    out, heads = {}, width // HEAD_DIM
    for name in ("q", "k", "v"):
        g = grads["stack"]["blocks"]["attn"][name]["kernel"][...][0]
        whole = orthogonalize_via_newton_schulz(g, NS, 5)
        per_head = orthogonalize_via_newton_schulz(g.reshape(width, heads, HEAD_DIM), NS, 5,
                                                   dimension_numbers=MuonDimensionNumbers(0, 2))
        out[name] = {"per_matrix": float(np.linalg.norm(whole, 2)),
                     "per_head": float(np.linalg.norm(per_head.reshape(width, width), 2))}
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=Path, default=Path(__file__).resolve().parent,
                   help="where qkv.json goes (default: beside this script)")
    out = p.parse_args(argv).out
    rows = {w: norms(w) for w in WIDTHS}
    logw = np.log(WIDTHS)
    slopes = {f"{name} {how}": float(np.polyfit(logw, np.log([rows[w][name][how] for w in WIDTHS]), 1)[0])
              for name in ("q", "k", "v") for how in ("per_matrix", "per_head")}
    out.mkdir(parents=True, exist_ok=True)
    (out / "qkv.json").write_text(json.dumps({"widths": WIDTHS, "head_dim": HEAD_DIM, "spectral_norms": rows,
                                              "slopes_in_width": slopes}, indent=1) + "\n")
    for w in WIDTHS:
        print(w, {k: {h: round(v, 2) for h, v in d.items()} for k, d in rows[w].items()})
    print({k: round(v, 2) for k, v in slopes.items()})


if __name__ == "__main__":
    main()
