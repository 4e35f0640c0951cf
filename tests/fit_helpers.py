"""Synthetic zoo.sweep dirs with a known optimum, as the zoo.fit and fitted-policy tests read them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from zoo.config import resolve
from zoo.sweeps.results import PER_MEMBER

BASE = resolve({"model": "mlp_resnet", "data": "synthetic:teacher", "optimizer": "adam", "batch_size": 64,
                "steps": 100})


LRS = np.arange(-13.0, -3.0)


def sweep_dir(out: Path, widths, law, lrs=LRS, seeds=3, noise=0.004, run=BASE, rng_seed=0,
              curvature=0.02, wd_law=None):
    """A zoo.sweep --out dir of a loss 1 + c (log2 lr - law(size))^2 (+ c (log2 wd - wd_law(size))^2) + noise."""
    rng = np.random.default_rng(rng_seed)
    settings = {k: v for k, v in json.loads(json.dumps(run.identity())).items() if k not in PER_MEMBER}
    settings.update(base_width=min(widths), base_depth=2)
    out.mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps(settings))
    size = {"batch_size": run.loop.batch_size, "steps": run.loop.steps}
    records = []
    for w in widths:
        best = law({**size, "width": w})
        wd_term = 0.0 if wd_law is None else curvature * (math.log2(run.optim.decay) - wd_law({**size, "width": w}))**2
        for x in lrs:
            for s in range(seeds):
                loss = 1.0 + curvature * (x - best) ** 2 + wd_term + noise * rng.standard_normal()
                records.append({"width": int(w), "depth": 2, "lr": 2.0**x, "log2_lr": float(x), "seed": s,
                                "train_loss": loss, "eval_loss": loss, "eval_accuracy": 0.5, "diverged": False})
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


WIDTH_LAW = lambda s: -8.0 - 0.5 * math.log2(s["width"] / 32)  # noqa: E731


def run_fit(argv, capsys):
    from zoo.cli.fit import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr().err
