"""The policy pages' verdicts, figures and pages from fitted numbers (zoo.fit on synthetic sweep dirs with a known
law, no training): the checks pass where the law is the rule's and fail where it is not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fit_helpers import BASE, sweep_dir

import zoo.policy
from zoo.papers import page
from zoo.papers.claim import verdict
from zoo.policy.pages import SHELF, common, fit_width, horizon, sde_batch, timescale_wd


def batch_arms(tmp_path, exponent):
    """sde-batch's numbers where the raw best log2 LR is -10 + exponent log2(B/16)."""
    out = {"setting": {**sde_batch.FULL, "batches": [16, 64, 256]}}
    for arm in sde_batch.ARMS:
        dirs = []
        for b in (16, 64, 256):
            change = zoo.policy.Change(16, b, 1600, 1600 * 16 // b)
            run, factor = zoo.policy.mapped_run(BASE, zoo.policy.get(arm), change)
            law = lambda s: -10 + exponent * math.log2(s["batch_size"] / 16)  # noqa: E731
            dirs.append(sweep_dir(tmp_path / f"{arm}{b}", [64], law, run=run, rng_seed=b,
                                  lrs=np.arange(-15.0, -3.0, 0.5) + math.log2(factor)))
        out[arm] = common.fit(dirs, policy=arm, boot=100, axes=["batch_size"])
    return out


@pytest.mark.parametrize("exponent,passes", [(0.5, [True, True, True]), (0.0, [False, False, False])])
def test_sde_batch_verdict_follows_the_numbers(tmp_path, exponent, passes):
    """Where the raw optimum follows sqrt(B) every check passes; where it does not move, sde moves it 2 grid steps
    over 16x and every check fails."""
    numbers = batch_arms(tmp_path, exponent)
    assert [c.passed for c in sde_batch.checks(numbers)] == passes


def test_an_arm_without_a_law_says_so():
    """Where zoo.fit located too few batch sizes for a law, the exponent checks fail saying no law was fitted, not
    explaining an exponent there is none of (a --quick run's grids)."""
    refused = {"error": "2 sizes with a located best LR: a law over batch_size has 2 terms and needs 3 or more sizes",
               "sizes": [{"size": {"batch_size": b}, "lr": {"optimum": None}} for b in (16, 64, 256)]}
    numbers = {"setting": sde_batch.FULL, "none": refused, "sde": refused}
    for check in sde_batch.checks(numbers)[1:]:
        assert not check.passed and check.why_not.startswith("no law was fitted") and "2 terms" in check.why_not


def timescale_arms(tmp_path):
    """timescale-wd's numbers where the best wd is 2^-3 T0 / T (the rule's), the best LR 2^-9 at every horizon."""
    run = BASE.replace(optimizer="adamw")
    dirs = [sweep_dir(tmp_path / f"t{t}wd{w}", [64], lambda s: -9.0, lrs=np.array([-10.0, -9.0, -8.0]), seeds=2,
                      run=run.replace(steps=t, weight_decay=2.0**w), rng_seed=t + w,
                      wd_law=lambda s: -3.0 - math.log2(s["steps"] / 256))
            for t in (256, 512, 1024) for w in range(-8, 0)]
    return {"setting": timescale_wd.FULL, **{arm: common.fit(dirs, "eval_loss", arm, boot=50)
                                             for arm in timescale_wd.ARMS}}


def test_the_pages_render_from_their_numbers(tmp_path):
    """Each page's numbers give its checks, figure, README and the index, under `python -m zoo.policy`."""
    numbers = {
        sde_batch.NAME: batch_arms(tmp_path / "a", 0.5),
        horizon.NAME: {"setting": horizon.FULL, **{s: common.fit(
            [sweep_dir(tmp_path / f"{s}{t}", [64], lambda z: -8 - 0.3 * math.log2(z["steps"] / 128),
                       run=BASE.replace(steps=t, schedule=s), rng_seed=t) for t in (128, 256, 512, 1024)], boot=100)
            for s in horizon.SCHEDULES}},
        timescale_wd.NAME: timescale_arms(tmp_path / "b"),
        fit_width.NAME: {"setting": fit_width.FULL, "fit": common.fit(
            [sweep_dir(tmp_path / "w", fit_width.FULL["widths"], lambda z: -8 - 0.5 * math.log2(z["width"] / 32))],
            holdout={"width": 512}, boot=100)},
    }
    out = tmp_path / "docs"
    for name, n in numbers.items():
        claim = SHELF.claims()[name]
        page.write(claim, n, out, quick=False, shelf=SHELF)
        record = page.read(out / name)
        assert record["command"] == f"python -m zoo.policy run {name} --out {out}"
        assert record["verdict"] == verdict(claim.checks(record["numbers"])) == "reproduced", record["checks"]
        assert (out / name / "figure.png").stat().st_size > 10_000
    index = (out / "README.md").read_text()
    assert index.startswith("# Scaling policies, shown") and all(f"[{name}]" in index for name in numbers)
