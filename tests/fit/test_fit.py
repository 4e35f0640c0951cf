"""zoo.fit on sweep dirs with a known law: each size's optimum, the law's exponent within its bootstrap interval,
a held-out size within one grid step, the policy's units; and the bad inputs it refuses in one line, writing
nothing."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from fit_helpers import BASE, WIDTH_LAW, run_fit, sweep_dir

import zoo.policy
from zoo.config import resolve
from zoo.fit import read, result
from zoo.fit.lawfile import read_law


def test_a_law_whose_replicates_locate_no_size_together_is_refused():
    """Where no two bootstrap replicates locate every size (their seeds train at disjoint LRs), the law would have no
    interval ([nan, nan], written as null, which the fitted policy could not read): refused in one line."""
    reps = np.full((4, 20), np.nan)
    reps[np.arange(4), np.arange(4)] = -8.0
    with pytest.raises(ValueError, match="0 of 20 bootstrap replicates located the best at every size"):
        result.laws.fit([{"width": w} for w in (32, 64, 128, 256)], [-8.0, -8.5, -9.0, -9.5], reps, ["width"],
                        np.random.default_rng(0))


def test_a_held_out_size_is_judged_in_its_own_grids_steps(tmp_path):
    """The held-out size's grid has steps of 1 where the fitted sizes' have 1/2: its error is counted in its own
    grid's steps (the smallest gap over every grid made a 0.3 miss read as 0.6 steps, or 2 under a policy)."""
    fitted = sweep_dir(tmp_path / "a", [32, 64, 128, 256], WIDTH_LAW, lrs=np.arange(-13.0, -3.0, 0.5))
    held = sweep_dir(tmp_path / "b", [512], WIDTH_LAW)
    settings = json.loads((held / "sweep.json").read_text())
    (held / "sweep.json").write_text(json.dumps({**settings, "base_width": 32}))  # one sweep's, run in two parts
    (check,) = result.fit(read.load([fitted, held]), {"width": 512}, boot=50).checks
    assert check.grid_step == 1.0


def test_recovers_a_known_exponent_within_its_interval(tmp_path):
    """Synthetic sweeps of 5 widths, 3 seeds, log2 lr* = -8 - 0.5 log2(w/32): the fitted exponent's 95% interval
    holds -0.5, and is narrower than a quarter of it; the held-out width 512 is within one grid step."""
    d = sweep_dir(tmp_path / "s", [32, 64, 128, 256, 512], WIDTH_LAW)
    fit = result.fit(read.load([d]), {"width": 512}, boot=300)
    lo, hi = fit.laws["lr"].intervals["width"]
    assert lo <= -0.5 <= hi and hi - lo < 0.125, (lo, hi)
    (check,) = fit.checks
    assert check.within_one_step and abs(check.error_steps) < 0.3
    assert check.predicted[1] <= check.predicted[0] <= check.predicted[2]


def test_a_held_out_size_whose_best_is_on_the_grid_edge_gets_no_verdict(tmp_path):
    """Width 640's best LR set 4 grid steps below the law, past the grid's lowest LR: its measured best is that edge,
    a bound, and scoring it said 'within one grid step' (+0.6) of a law 4 steps off. It now has no verdict, and says
    why; the law itself is fitted from the other widths as before."""
    law = lambda s: WIDTH_LAW(s) - (4.0 if s["width"] == 640 else 0.0)  # noqa: E731
    d = sweep_dir(tmp_path / "s", [32, 64, 128, 256, 640], law, lrs=np.arange(-12.0, -3.0))
    fit = result.fit(read.load([d]), {"width": 640}, boot=100)
    (check,) = fit.checks
    assert check.measured.at_edge and check.within_one_step is None and check.record()["within_one_grid_step"] is None
    from zoo.fit import report

    text = report.check_text(check)
    assert "on the grid's edge" in text and "no verdict" in text and "within one" not in text
    assert fit.laws["lr"].exponents["width"] == pytest.approx(-0.5, abs=0.02)


def test_the_same_members_in_two_dirs_are_refused(tmp_path):
    """A sweep copied (or rerun into another folder) and given beside the first: the later dir's members replaced the
    earlier's, so the law depended on the order of the dirs (an exponent -1 one way, -1/3 the other)."""
    a = sweep_dir(tmp_path / "a", [32, 64, 128], WIDTH_LAW)
    b = sweep_dir(tmp_path / "b", [32, 128, 256], lambda s: -8.0 - 1.0 * math.log2(s["width"] / 32), rng_seed=1)
    for dirs in ([a, b], [b, a]):
        with pytest.raises(ValueError, match="both hold the member at width 32, depth 2, batch_size 64, steps 100, "
                                             "lr .*, seed 0: the same sizes and seeds twice"):
            read.load(dirs)
    other = sweep_dir(tmp_path / "c", [32, 256], WIDTH_LAW)  # sizes of its own merged; a shared one refused
    with pytest.raises(ValueError, match="both hold the member at width 32"):
        read.load([a, other])
    (other / "results.jsonl").write_text("".join(line + "\n" for line in (other / "results.jsonl").read_text()
                                                 .splitlines() if '"width": 256' in line))
    assert [g.size["width"] for g in read.load([a, other]).grids] == [32, 64, 128, 256]


def test_a_bad_value_in_a_sweep_json_names_the_file(tmp_path):
    d = sweep_dir(tmp_path / "s", [32, 64, 128], WIDTH_LAW)
    settings = json.loads((d / "sweep.json").read_text())
    (d / "sweep.json").write_text(json.dumps({**settings, "batch_size": -3}))
    with pytest.raises(ValueError, match=f"^{d / 'sweep.json'}: .*batch.size must be positive, got -3"):
        read.load([d])
    (d / "sweep.json").write_text(json.dumps({**settings, "model": "nope"}))  # was fitted, its law of model "nope"
    with pytest.raises(ValueError, match=f"^{d / 'sweep.json'}: unknown model 'nope'; choose from .*mlp_resnet"):
        read.load([d])


@pytest.mark.parametrize("key,value", [("batch_size", 0), ("steps", 0), ("batch_size", -7)])
def test_a_bad_value_in_the_first_sweep_json_names_the_file_on_the_command_line(tmp_path, capsys, key, value):
    """The command reads the first dir's settings before the fit does (its optimizer picks the policy's rules): a bad
    value there named a flag never given (--batch-size must be positive), not the file."""
    d = sweep_dir(tmp_path / "s", [32, 64, 128], WIDTH_LAW)
    settings = json.loads((d / "sweep.json").read_text())
    (d / "sweep.json").write_text(json.dumps({**settings, key: value}))
    code, err = run_fit([str(d), "--out", str(tmp_path / "fit"), "--boot", "20"], capsys)
    assert code == 1 and err.startswith(f"error: {d / 'sweep.json'}: "), err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "fit").exists()


def test_sizes_that_scatter_about_the_law_widen_its_interval(tmp_path):
    """Each width's best LR off the law by its own fixed amount (0.3 .. -0.25 log2, 60 times the seeds' noise): the
    seeds-and-grid bootstrap alone gave an exponent -0.585 [-0.60, -0.57], the truth -0.5 outside; the sizes' scatter
    (tau, by moments) now reaches the interval, which holds -0.5, and the held-out size's prediction."""
    offsets = dict(zip([32, 64, 128, 256, 512, 1024], [0.3, 0.1, -0.1, -0.25, 0.05, -0.15], strict=True))
    d = sweep_dir(tmp_path / "s", list(offsets), lambda s: WIDTH_LAW(s) + offsets[s["width"]])
    fit = result.fit(read.load([d]), {"width": 1024}, boot=300)
    law = fit.laws["lr"]
    assert law.exponents["width"] == pytest.approx(-0.585, abs=0.01) and law.scatter > 0.1
    lo, hi = law.intervals["width"]
    assert lo <= -0.5 <= hi and hi - lo < 0.6, (lo, hi)
    (check,) = fit.checks
    assert check.predicted[1] <= check.measured.x <= check.predicted[2], (check.predicted, check.measured.x)


def test_two_axes_and_the_weight_decay_law(tmp_path):
    """Dirs at two horizons and five wds per horizon: the LR law in (width, steps) and the wd law (wd* ~ 1/T, the
    timescale's at a fixed LR) both recovered within their intervals."""
    lr_law = lambda s: -8.0 - 0.5 * math.log2(s["width"] / 32) - 0.3 * math.log2(s["steps"] / 100)  # noqa: E731
    wd_law = lambda s: -3.0 - 1.0 * math.log2(s["steps"] / 100)  # noqa: E731
    dirs = [sweep_dir(tmp_path / f"t{t}wd{wd}", [32, 64, 128], lr_law, run=BASE.replace(steps=t, weight_decay=2.0**wd),
                      seeds=2, wd_law=wd_law, rng_seed=t + wd)
            for t in (100, 400) for wd in range(-7, 1)]
    fit = result.fit(read.load(dirs), boot=200)
    for hyper, axis, want in (("lr", "width", -0.5), ("lr", "steps", -0.3), ("weight_decay", "steps", -1.0)):
        lo, hi = fit.laws[hyper].intervals[axis]
        assert lo <= want <= hi, (hyper, axis, lo, hi)


def test_policy_units(tmp_path):
    """Sweeps run under sde (LRs times sqrt(B/B0), b2^(B/B0), eps / sqrt(B/B0)) read under --policy sde have their
    LRs in the proxy's units: a best LR that follows sqrt(B) exactly leaves an exponent 0. Read without the policy,
    their mapped b2 and eps are refused, naming --policy; read under another policy, its map is refused."""
    dirs = []
    for b in (16, 64, 256, 1024):
        run = BASE.replace(batch_size=b)
        cfg = zoo.policy.get("sde").apply(BASE.optim, zoo.policy.Change(16, b, 100, 100))[0]
        run = run.replace(b2=cfg.b2, eps=cfg.eps)
        dirs.append(sweep_dir(tmp_path / f"b{b}", [64], lambda s: -10 + 0.5 * math.log2(s["batch_size"] / 16),
                              lrs=np.arange(-14.0, -2.0) + 0.5 * math.log2(b / 16), run=run, rng_seed=b))
    fit = result.fit(read.load(dirs, policy=zoo.policy.get("sde")), boot=200)
    lo, hi = fit.laws["lr"].intervals["batch_size"]
    assert lo <= 0.0 <= hi and abs(fit.laws["lr"].exponents["batch_size"]) < 0.05
    with pytest.raises(ValueError, match="differ in b2, eps .*give it \\(--policy\\)"):
        read.load(dirs)
    from zoo.cli.fit import main

    main([*map(str, dirs), "--out", str(tmp_path / "fit"), "--policy", "sde", "--boot", "20"])
    law = str(tmp_path / "fit" / "law.json")
    assert read_law(law).policy["name"] == "sde"
    target = zoo.policy.get("fitted", law=law).apply(BASE.optim, zoo.policy.Change(16, 1024, 100, 100))[0]
    assert math.log2(target.lr / BASE.optim.lr) == pytest.approx(3.0, abs=0.3)  # sqrt(64) by sde, ~1 by the law
    with pytest.raises(ValueError, match="not what policy sde maps"):
        read.load(dirs, policy=zoo.policy.get("sde", betas="all", eps=False))


def test_cli_writes_the_law_the_fitted_policy_reads(tmp_path, capsys):
    d = sweep_dir(tmp_path / "s", [32, 64, 128, 256, 512], WIDTH_LAW)
    from zoo.cli.fit import main

    main([str(d), "--out", str(tmp_path / "fit"), "--holdout", "width=512", "--boot", "100"])
    assert sorted(p.name for p in (tmp_path / "fit").iterdir()) == ["fit.json", "fit.png", "law.json", "table.md"]
    law = read_law(tmp_path / "fit" / "law.json")
    e = law.laws["lr"].exponents["width"]
    change = zoo.policy.Change(64, 64, 100, 100, proxy_width=64, width=1024)
    cfg = zoo.policy.get("fitted", law=str(tmp_path / "fit" / "law.json")).apply(BASE.optim, change)[0]
    assert cfg.lr == pytest.approx(BASE.optim.lr * 16**e) and e == pytest.approx(-0.5, abs=0.05)
    assert "within one grid step" in (tmp_path / "fit" / "table.md").read_text()
    # widths 32..256 fitted (512 held out): a target of 1024 lies beyond them, and its rule says so; 128 does not
    assert law.laws["lr"].span == {"width": (32.0, 256.0), "depth": (2.0, 2.0), "batch_size": (64.0, 64.0),
                                   "steps": (100.0, 100.0)}
    rules = {r.setting: r.law for r in zoo.policy.get("fitted", law=str(tmp_path / "fit" / "law.json")).rules(
        BASE.optim, change)}
    assert "(width 1024/64)^-0.4" in rules["lr"] and "[extrapolated: the sweeps' width 32-256]" in rules["lr"]
    def lr_rule(change):
        return zoo.policy.get("fitted", law=str(tmp_path / "fit" / "law.json")).rules(BASE.optim, change)[0].law

    assert "extrapolated" not in lr_rule(dataclasses.replace(change, width=128))
    assert "extrapolated" in lr_rule(dataclasses.replace(change, proxy_width=16, width=128))  # the proxy beyond it
    # the sweeps ran at batch 64 only: the law has no batch term, and a target at batch 256 is told so
    assert "not in the law, which has no term for it: batch_size 256/64 [extrapolated: the sweeps' batch_size " \
        "64]" in lr_rule(dataclasses.replace(change, batch=256))
    assert "no term for it" not in lr_rule(change)
    # no widths given (zoo.audit's change): the width term is not applied, and the rule says why, not that none moved
    unsized = lr_rule(dataclasses.replace(change, proxy_width=None, width=None))
    assert "no axis it could apply changed" in unsized and "[the law's width term not applied: no proxy and target " \
        "width given]" in unsized and "none of its axes changed" not in unsized, unsized
    assert "none of its axes changed" in lr_rule(dataclasses.replace(change, width=64))
    assert "steps 1000000/100 [extrapolated: the sweeps' steps 100]" in lr_rule(dataclasses.replace(change,
                                                                                                     steps=1_000_000))
    stored = json.loads((tmp_path / "fit" / "law.json").read_text())
    (tmp_path / "reversed.json").write_text(json.dumps({**stored, "laws": {"lr": {
        **stored["laws"]["lr"], "span": {"width": [256, 32]}}}}))  # every size was named extrapolated
    with pytest.raises(ValueError, match="reversed.json is not a zoo.fit law"):
        read_law(tmp_path / "reversed.json")
    del stored["laws"]["lr"]["span"]  # a law.json written before the span was
    (tmp_path / "fit" / "law.json").write_text(json.dumps(stored))
    assert "[the sweeps' span not recorded]" in lr_rule(change)
    # a sweep maps batch size and steps only: the law's width term is not applied there, and it says so
    from zoo.cli.sweep import build_spec, parser

    capsys.readouterr()
    spec = build_spec(parser().parse_args(
        ["--model", "mlp_resnet", "--data", "synthetic:teacher", "--optimizer", "adam", "--batch-size", "64",
         "--steps", "100", "--widths", "64,128", "--lrs", "2^-9:2^-7:1", "--out", str(tmp_path / "sw"),
         "--policy", "fitted", "--policy-opt", f"law={tmp_path / 'fit' / 'law.json'}"]))
    assert spec.lrs == pytest.approx([2.0**-9, 2.0**-8, 2.0**-7])
    assert "the law's width terms are not applied here" in capsys.readouterr().err


@pytest.mark.parametrize("case,message", [
    ("two sizes", "2 sizes to fit (2 swept, 0 held out): a law needs 3 or more"),
    ("one lr", "a single LR at width 32: zoo.fit locates each size's best LR between grid points"),
    ("models", "the sweep dirs differ in model, "),  # then each recipe field the two models' defaults set apart
    ("holdout", "no size has width 999 to hold out"),
    ("axes", "--axes steps: steps does not vary across the sweeps (what varies: width)"),
    # its law.json could never be used: a law read under a fitted law cannot be a fitted policy's base
    ("law as the policy", "--policy fitted: a law read under a fitted law cannot be a fitted policy's base"),
    ("edited record", "a: a record in results.jsonl has no valid width (written by another program?)"),
    ("dir twice", "is given twice: each member would count twice in the fit"),
    ("axis twice", "--axes width,width names width twice"),
    ("unknown axis", "--axes width,heads: heads is no size axis (the axes: width, depth, batch_size, steps)"),
    ("a file", "is a file, not a sweep dir (a folder holding sweep.json)"),
    ("proxy without a policy", "--proxy-steps is the proxy a --policy maps from, and there is no --policy"),
    ("boot", "--boot 100001 is more than 100000 replicates"),
    ("boot one", "--boot 1: an interval needs 2 or more bootstrap replicates"),
    # three sizes fit a law in two axes exactly (no residual): its intervals were the bootstrap's alone, and missed
    ("exact law", "a law over width, steps has 3 terms and needs 4 or more sizes"),
    ("axes leave one out", "--axes width: two sizes at width 32 differ in steps, which the law would not see"),
    # the lone LR that trained at each width was each one's "fitted optimum", and the law's interval [nan, nan]
    ("one survivor", "0 sizes with a located best LR; none at width 32; width 64; width 128 (fewer than 3 points "
                     "trained"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, case, message):
    if case == "two sizes":
        dirs = [sweep_dir(tmp_path / "a", [32, 64], WIDTH_LAW)]
    elif case == "one lr":
        dirs = [sweep_dir(tmp_path / "a", [32, 64, 128], WIDTH_LAW, lrs=np.array([-8.0]))]
    elif case == "models":
        dirs = [sweep_dir(tmp_path / "a", [32, 64], WIDTH_LAW),
                sweep_dir(tmp_path / "b", [128], WIDTH_LAW, run=resolve({"model": "mixer", "batch_size": 64,
                                                                        "steps": 100}))]
    elif case in ("exact law", "axes leave one out"):
        dirs = [sweep_dir(tmp_path / "a", [32, 64], WIDTH_LAW),
                sweep_dir(tmp_path / "b", [32] if case == "exact law" else [32, 64, 128], WIDTH_LAW,
                          run=BASE.replace(steps=400))]
    else:
        dirs = [sweep_dir(tmp_path / "a", [32, 64, 128], WIDTH_LAW)]
    if case == "one survivor":
        records = [json.loads(line) for line in (dirs[0] / "results.jsonl").read_text().splitlines()]
        (dirs[0] / "results.jsonl").write_text("".join(
            json.dumps({**r, "diverged": r["log2_lr"] != -8.0}) + "\n" for r in records))
    if case == "edited record":  # a width as text ended in a TypeError from the arithmetic
        lines = (dirs[0] / "results.jsonl").read_text().splitlines(keepends=True)
        lines[5] = lines[5].replace('"width": 32', '"width": "32"')
        (dirs[0] / "results.jsonl").write_text("".join(lines))
    policy = []
    if case == "law as the policy":
        mixer = sweep_dir(tmp_path / "m", [32, 64, 128], WIDTH_LAW, run=resolve({"model": "mixer", "batch_size": 64,
                                                                                  "steps": 100}))
        from zoo.cli.fit import main

        main([str(mixer), "--out", str(tmp_path / "mixer-law"), "--boot", "20"])
        policy = ["--policy", "fitted", "--policy-opt", f"law={tmp_path / 'mixer-law' / 'law.json'}"]
    extra = {"holdout": ["--holdout", "width=999"], "axes": ["--axes", "steps"],
             "axis twice": ["--axes", "width,width"], "unknown axis": ["--axes", "width,heads"],
             "proxy without a policy": ["--proxy-steps", "50"],
             "boot": ["--boot", "100001"], "axes leave one out": ["--axes", "width"],
             "boot one": ["--boot", "1"]}.get(case, [])
    if case == "a file":
        dirs = [dirs[0] / "results.jsonl"]
    if case == "dir twice":
        dirs = [*dirs, dirs[0].parent / "x" / ".." / dirs[0].name]
        (dirs[0].parent / "x").mkdir()
    out = tmp_path / "fit"
    code, err = run_fit([*map(str, dirs), "--out", str(out), "--boot", "20", *policy, *extra], capsys)
    assert code == 1 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_a_hyperparameter_without_a_law_leaves_the_other(tmp_path):
    """Three LRs around a wd sweep whose best LR sits on the LR grid's edge: no LR law (said why), the wd law
    fitted; an LR law alone that cannot be fitted is refused."""
    wd_law = lambda s: -3.0 - 1.0 * math.log2(s["steps"] / 100)  # noqa: E731
    dirs = [sweep_dir(tmp_path / f"t{t}wd{wd}", [32], lambda s: -12.0, run=BASE.replace(steps=t, weight_decay=2.0**wd),
                      lrs=np.array([-10.0, -9.0, -8.0]), wd_law=wd_law, rng_seed=t + wd)
            for t in (100, 200, 400) for wd in range(-8, 1)]
    fit = result.fit(read.load(dirs), boot=50)
    assert set(fit.laws) == {"weight_decay"} and "grid's edge" in fit.unfitted["lr"]
    with pytest.raises(ValueError, match="grid's edge"):
        result.fit(read.load([sweep_dir(tmp_path / "e", [32, 64, 128], lambda s: -12.0, lrs=np.arange(-10.0, -4.0))]),
                   boot=20)


def test_an_interval_that_misses_its_point_is_drawn_from_end_to_end():
    """A bootstrap's percentile interval of few replicates (--boot 5) need not contain its point: the bar runs from
    lo to hi (matplotlib refused it as distances from the point, and zoo.fit failed after printing its table)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.fit.report import interval_bar

    fig, ax = plt.subplots()
    interval_bar(ax, (-10.3, 2.1), (-10.05, -9.9), "x", fmt="*", color="k", capsize=3)
    interval_bar(ax, (64.0, -10.4), (-10.2, -10.1), "y", fmt="o", color="k", capsize=3)
    (horizontal,), (vertical,) = (c.get_segments() for c in ax.collections)
    np.testing.assert_allclose(horizontal[:, 0], [-10.05, -9.9])
    np.testing.assert_allclose(vertical[:, 1], [-10.2, -10.1])
    assert [tuple(line.get_xydata()[0]) for line in ax.lines if line.get_marker() in "*o"] == [(-10.3, 2.1),
                                                                                               (64.0, -10.4)]
    plt.close(fig)


@pytest.mark.parametrize("exponent, ok", [(1e300, False), (-200.0, False), (100.0, True)])
def test_a_law_factor_beyond_float32_is_refused(exponent, ok):
    """(s'/s)^e of a law file edited or fitted wildly: Python's OverflowError at 2^1e300, a factor float32 turns into
    0 at 2^-200 (the LR would be 0), refused naming the axis; 2^100 (1.3e30) is a number float32 holds."""
    from zoo.fit.lawfile import Power

    law = Power(-10.0, {"width": 32.0}, {"width": exponent}, {"width": (0.0, 1.0)})
    if ok:
        assert law.ratio(lambda a: (32.0, 64.0))[0] == 2.0**exponent
    else:
        with pytest.raises(ValueError, match="the law's width factor is 2\\^.* outside float32's range"):
            law.ratio(lambda a: (32.0, 64.0))


def test_skipped_lines_are_said_and_an_axes_list_with_a_gap_is_refused(tmp_path, capsys):
    """A line of results.jsonl that is no member record (torn, or an lr of 0 edited in) is skipped, as zoo.sweep's
    report skips it, and said in a warning (the fit had one member fewer, silently), and a member's repeat with the
    same numbers is none (a member's second with other numbers: test_fit_dirs.py); `--axes width,` is refused."""
    from zoo.cli.fit import main

    d = sweep_dir(tmp_path / "s", [32, 64, 128], WIDTH_LAW, seeds=1)
    edited = {"width": 32, "depth": 2, "lr": 0.0, "log2_lr": -8.0, "seed": 0, "train_loss": 1.0, "diverged": False}
    first = json.loads((d / "results.jsonl").read_text().splitlines()[0])
    with (d / "results.jsonl").open("a") as f:
        f.write(json.dumps(first) + "\n" + json.dumps(edited) + "\n" + '{"width": 64, "dep')
    main([str(d), "--out", str(tmp_path / "fit"), "--boot", "10"])
    out = capsys.readouterr().out
    assert f"warning: 2 line(s) of {d}/results.jsonl were skipped: no member record (torn or edited), or a member's " \
        "second line with other numbers (its first is kept)" in out
    with pytest.raises(SystemExit) as e:
        main([str(d), "--out", str(tmp_path / "fit2"), "--axes", "width,"])
    assert e.value.code == 1 and "--axes 'width,' has an empty entry" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # an empty --axes was read as no --axes
        main([str(d), "--out", str(tmp_path / "fit2"), "--axes", ""])
    assert e.value.code == 1 and "--axes '' has an empty entry" in capsys.readouterr().err
    assert not (tmp_path / "fit2").exists()
