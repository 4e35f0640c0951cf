"""zoo.fit's dirs: which sweeps fit together (options at their defaults are the same model), and where its --out
may not go (into a sweep it reads, a run dir, another command's output)."""

from __future__ import annotations

import json
import math
import os

import pytest
from fit_helpers import BASE, WIDTH_LAW, run_fit, sweep_dir

from zoo.fit import read, result


def test_sweeps_differing_only_by_options_at_their_defaults_are_fitted_together(tmp_path):
    """A sweep of --model-opt activation=relu (the MLP-ResNet's own) beside one that left it out: one model, fitted
    together; an option at another value is another model, refused."""
    a = sweep_dir(tmp_path / "a", [32, 64], WIDTH_LAW)
    b = sweep_dir(tmp_path / "b", [32, 64], WIDTH_LAW, run=BASE.replace(model_opt={"activation": "relu"},
                                                                         batch_size=128))
    assert len(read.load([a, b]).grids) == 4
    c = sweep_dir(tmp_path / "c", [32, 64], WIDTH_LAW, run=BASE.replace(model_opt={"activation": "tanh"},
                                                                        batch_size=128))
    with pytest.raises(ValueError, match="the sweep dirs differ in model_opt"):
        read.load([a, c])


def test_out_in_a_sweep_it_reads_or_in_a_run_is_refused(tmp_path, capsys):
    """--out inside a sweep dir it reads, or inside or holding a run or another sweep: one line, and nothing written
    there (a fit's four files sat beside the sweep's, under its lock); a rerun into the fit's own folder still
    writes."""
    sweep = sweep_dir(tmp_path / "a", [32, 64, 128], WIDTH_LAW)
    other = sweep_dir(tmp_path / "b", [32, 64, 128], WIDTH_LAW)
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "config.json").write_text(json.dumps(BASE.to_json()))
    before = sorted(p.name for p in sweep.iterdir())
    for out, message in ((sweep, f"--out {sweep} is inside the sweep dir {sweep}, which zoo.fit only reads"),
                         (sweep / "fit", "is inside the sweep dir"),
                         (tmp_path / "run", f"--out {tmp_path / 'run'} holds a run (config.json); give the fit a "
                                            "folder of its own"),
                         (tmp_path / "run" / "a" / "fit", f"is inside the run dir {(tmp_path / 'run').resolve()}; "),
                         (other / "fit", f"--out {other / 'fit'} is inside the sweep {other.resolve()}; ")):
        code, err = run_fit([str(sweep), "--out", str(out), "--boot", "20"], capsys)
        assert code == 1 and message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in sweep.iterdir()) == before
    assert sorted(os.listdir(tmp_path / "run")) == ["checkpoints", "config.json"] and not (other / "fit").exists()
    from zoo.cli.fit import main

    for _ in range(2):
        main([str(sweep), "--out", str(tmp_path / "fit"), "--boot", "20"])
    assert (tmp_path / "fit" / "law.json").is_file()
    # another program's config.json beside a checkpoints/ (a model repository's), or one nesting past Python's
    # recursion limit, is no run dir: the fit goes ahead
    for name, text in (("project", json.dumps({"model_type": "gpt2", "n_layer": 12})), ("deep", "[" * 100000)):
        (tmp_path / name / "checkpoints").mkdir(parents=True)
        (tmp_path / name / "config.json").write_text(text)
        main([str(sweep), "--out", str(tmp_path / name / "results" / "fit"), "--boot", "20"])
        assert (tmp_path / name / "results" / "fit" / "law.json").is_file()
    old = tmp_path / "old"  # a run dir whose config.json an older zoo wrote flat (it still resumes): a run dir
    (old / "checkpoints").mkdir(parents=True)
    (old / "config.json").write_text(json.dumps({k: v for k, v in BASE.identity().items() if k != "model_opt"}))
    code, err = run_fit([str(sweep), "--out", str(old / "fit"), "--boot", "20"], capsys)
    assert code == 1 and f"is inside the run dir {old.resolve()}; " in err, err


def test_a_batch_sweep_at_fixed_examples_is_checked_against_its_smallest_batchs_dir(tmp_path):
    """Batch 16, 64, 256 at 16,384 examples (1024, 256, 64 steps) under sde: the proxy defaults to batch 16 at its
    own 1024 steps (the smallest of each, 16 at 64 steps, is no dir's, and the mapped b2 and eps went unchecked), so
    a dir whose b2 is not sde's map of the proxy's is refused; with a proxy no dir holds, a warning says what was not
    checked."""
    import zoo.policy

    dirs = []
    for b in (16, 64, 256):
        change = zoo.policy.Change(16, b, 1024, 16384 // b)
        cfg = zoo.policy.get("sde").apply(BASE.optim, change)[0]
        run = BASE.replace(batch_size=b, steps=16384 // b, b2=0.5 if b == 64 else cfg.b2, eps=cfg.eps)
        dirs.append(sweep_dir(tmp_path / f"b{b}", [64], WIDTH_LAW, run=run, rng_seed=b))
    assert read.proxy_of({(16, 1024), (64, 256), (256, 64)}, (None, None)) == (16, 1024)
    assert read.proxy_of({(16, 1024), (64, 256), (256, 64)}, (None, 256)) == (64, 256)
    assert read.proxy_of({(16, 1024), (64, 256)}, (32, None)) == (32, 256)
    with pytest.raises(ValueError, match=f"{dirs[1]}: b2 0.5 is not what policy sde maps the proxy's 0.999 to"):
        read.load(dirs, policy=zoo.policy.get("sde"))
    unchecked = read.load([dirs[0], dirs[2]], policy=zoo.policy.get("sde"), proxy=(32, 512))
    assert unchecked.warnings() == ["no sweep dir is at the proxy (batch 32, 512 steps), so their b1, b2, eps, "
                                    "momentum, muon_beta, warmup were not checked against policy sde's map of the "
                                    "proxy's"]


def test_a_batch_sweep_at_fixed_examples_without_axes_is_pointed_to_axes(tmp_path):
    """Batch 16, 64, 256 at 16,384 examples: batch and steps move together, so a law over both cannot be fitted
    from any number of such dirs. The refusal asked for more sizes (a 3-term law needs 4); it names --axes, and with
    --axes batch_size the law is fitted: the best LR's exponent 0.25 less sde's sqrt(B) (LRs in the proxy's units)."""
    import zoo.policy

    dirs = []
    for b in (16, 64, 256):
        cfg = zoo.policy.get("sde").apply(BASE.optim, zoo.policy.Change(16, b, 1024, 16384 // b))[0]
        run = BASE.replace(batch_size=b, steps=16384 // b, b2=cfg.b2, eps=cfg.eps)
        dirs.append(sweep_dir(tmp_path / f"b{b}", [64], lambda s: -8.0 + 0.25 * math.log2(s["batch_size"] / 16),
                              run=run, rng_seed=b))
    sweeps = read.load(dirs, policy=zoo.policy.get("sde"))
    with pytest.raises(ValueError, match=r"do not tell the batch_size, steps exponents apart.*\(--axes\)$"):
        result.fit(sweeps, None, boot=50)
    law = result.fit(read.load(dirs, policy=zoo.policy.get("sde")), None, boot=50, axes=["batch_size"]).laws["lr"]
    assert law.exponents["batch_size"] == pytest.approx(0.25 - 0.5, abs=0.05)


def test_results_of_two_sweeps_in_one_file_are_refused(tmp_path):
    """Another sweep's results.jsonl appended to this one's: its repeats of this sweep's members were skipped, and its
    members this sweep never ran (a third seed) were fitted as this sweep's (an exponent -0.47 for -0.7)."""
    a = sweep_dir(tmp_path / "a", [32, 64, 128], WIDTH_LAW, seeds=2)
    b = sweep_dir(tmp_path / "b", [32, 64, 128], lambda s: -5.0, seeds=3, rng_seed=1)
    with (a / "results.jsonl").open("a") as f:
        f.write((b / "results.jsonl").read_text())
    with pytest.raises(ValueError, match=r"gives 60 member\(s\) twice with other numbers: the results of two sweeps"):
        read.load([a])


def test_a_seed_missing_at_some_lrs_is_left_out_of_its_size_and_said(tmp_path):
    """Seeds differ by a shared offset: a mean over the seeds each LR has moved the vertex where one seed stopped
    (the exponent -0.664 for -0.7). The size's curve averages the seeds at every LR, and the fit says so."""
    law = lambda s: -7.0 - 0.7 * math.log2(s["width"] / 32)  # noqa: E731
    d = sweep_dir(tmp_path / "s", [32, 64, 128, 256], law, seeds=2, noise=0.0)
    records = [json.loads(line) for line in (d / "results.jsonl").read_text().splitlines()]
    for r in records:
        r["train_loss"] += 0.05 * r["seed"]
    kept = [r for r in records if not (r["width"] == 128 and r["seed"] == 1 and r["log2_lr"] > law(r))]
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    sweeps = read.load([d])
    assert [g.seeds for g in sweeps.grids] == [(0, 1), (0, 1), (0,), (0, 1)]
    assert sweeps.warnings() == ["width 128: seed(s) 1 missing at some of its points (a sweep stopped, or rerun with "
                                 "other seeds or LRs): its optimum averages the seeds at every point, 0"]
    fitted = result.fit(sweeps, boot=50)
    assert fitted.laws["lr"].exponents["width"] == pytest.approx(-0.7, abs=1e-9)


def test_a_sweep_json_without_its_steps_names_the_file(tmp_path):
    d = sweep_dir(tmp_path / "s", [32, 64, 128], WIDTH_LAW)
    settings = json.loads((d / "sweep.json").read_text())
    (d / "sweep.json").write_text(json.dumps({**settings, "steps": None}))  # was: unexpected TypeError
    with pytest.raises(ValueError, match=f"^{d / 'sweep.json'}: steps must be an integer, got None"):
        read.load([d])
