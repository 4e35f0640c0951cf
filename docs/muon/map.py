"""The spectral map checked numerically (issue 18, item 2; spectral_optimizers.md section 2 marks it as derived):
coordinate-check slopes of the MLP-ResNet (depth 4) under Muon at widths 128..1024 (base 128, 3 seeds, 3 steps,
LR 1e-4) for

    mup                        the map: Muon LR m^-(c - k/2) (hidden m^0; input/output stay Adam's)
    mup, muon_io               the map on the input and output layers too (m^(+1/2) each)
    mup, Adam's c, muon_io     no map: muP's Adam exponents used as Muon's (input and output m^0, hidden m^-1);
                               with the input layer under Adam its Theta(1) change would hide the hidden layers'
    sp, sp with muon_io        one global LR (what users call SP with Muon)

and the slopes theory predicts for each (zoo.param.predict with the plugin's spectral exponents). Writes
map.json and map.md beside this script (docs/muon/, the page docs/muon.md).

    nice -n 19 python docs/muon/map.py
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import jax
import numpy as np

import zoo.models
from zoo.diagnostics import coord
from zoo.diagnostics.inputs import random_batch
from zoo.diagnostics.verdict import group_of, model_kinds
from zoo.optim import OptimConfig
from zoo.param import get
from zoo.param.mup import MuP

WIDTHS, SEEDS, STEPS, LR = [128, 256, 512, 1024], 3, 3, 1e-4
MODEL = dict(depth=4, base_width=128)


@dataclasses.dataclass(frozen=True)
class AdamExponents(MuP):
    """muP with its Adam LR exponents applied unchanged to Muon (no spectral map)."""

    name = "mup_adam_exponents"
    global_lr = True


VARIANTS = {"mup": (get("mup"), False), "mup, muon_io": (get("mup"), True),
            "mup, Adam's c, muon_io": (AdamExponents(), True), "sp": (get("sp"), False),
            "sp, muon_io": (get("sp"), True)}


def measure(plugin, muon_io: bool) -> dict[str, list[float]]:
    cfg = zoo.models.config("mlp_resnet", **MODEL)
    batch = random_batch(cfg, 16, jax.random.key(1))
    opt = OptimConfig("muon", lr=LR, muon_io=muon_io)
    data = coord.geometric_mean([coord.CoordRun("mlp_resnet", plugin, STEPS, opt, batch, width=w, **MODEL)(
        range(SEEDS)).total for w in WIDTHS])
    slopes = coord.slopes(WIDTHS, data)
    groups: dict[str, list[float]] = {}
    for layer, s in slopes.items():
        groups.setdefault(group_of(layer), []).append(float(np.nanmean(s)))
    return {g: float(np.mean(v)) for g, v in groups.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=Path, default=Path(__file__).resolve().parent,
                   help="where map.json and map.md go (default: beside this script)")
    out = p.parse_args(argv).out
    cfg = zoo.models.config("mlp_resnet", **MODEL)
    rows = {}
    for name, (plugin, io) in VARIANTS.items():
        kinds = model_kinds("mlp_resnet", cfg, plugin)
        theory = plugin.expected_slopes("muon", "width", kinds, muon_io=io)
        rows[name] = {"measured": measure(plugin, io), "theory": theory}
        print(name, rows[name])
    out.mkdir(parents=True, exist_ok=True)
    (out / "map.json").write_text(json.dumps({"widths": WIDTHS, "seeds": SEEDS, "steps": STEPS, "lr": LR,
                                              "model": MODEL, "rows": rows}, indent=1) + "\n")
    lines = ["| Muon LR rule | input | hidden | stream | output |", "|---|---|---|---|---|"]
    for name, r in rows.items():
        cells = [f"{r['measured'][g]:+.2f} ({r['theory'][g]:+.2f})" for g in ("input", "hidden", "stream", "output")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    (out / "map.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
