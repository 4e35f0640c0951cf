"""zoo.fit's dirs: which sweeps fit together (options at their defaults are the same model), and where its --out
may not go (into a sweep it reads, a run dir, another command's output)."""

from __future__ import annotations

import json
import os

import pytest
from test_fit import BASE, WIDTH_LAW, run_fit, sweep_dir

from zoo.fit import read


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
