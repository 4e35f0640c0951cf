"""bench/nanogpt_compare.py's reading of the runs (no run here: nanoGPT is not bundled): from a zoo run dir it takes
the best whole-split val loss and the best nanoGPT-style estimate, each with its own step and time to best; the
table gives every seed's row and the mean and spread over seeds; a folder with no model.py is one line."""

import json

import pytest
from cli_utils import ROOT


@pytest.fixture
def compare(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import nanogpt_compare

    return nanogpt_compare


def zoo_run(path, evals, time_to_best):
    path.mkdir()
    rows = [{"step": s, "split": "train", "loss": 9.0} for s, _, _ in evals]
    rows += [{"step": s, "split": "eval", "loss": whole, "sampled_loss": sampled} for s, whole, sampled in evals]
    (path / "metrics.jsonl").write_text("\n".join(map(json.dumps, rows)))
    (path / "summary.json").write_text(json.dumps({"time_to_best_s": time_to_best, "wall_s": 30.0}))
    return path


def test_best_of_each_estimate_and_the_seeds_spread(compare, tmp_path):
    a = compare.zoo_row(zoo_run(tmp_path / "a", [(250, 1.9, 1.95), (500, 1.7, 1.72), (750, 1.8, 1.69)],
                                {"loss": 12.0, "sampled_loss": 18.0}))
    assert (a["best_val"], a["best_step"], a["best_sampled"], a["sampled_step"]) == (1.7, 500, 1.69, 750)
    assert (a["time_to_best_s"], a["time_to_best_sampled_s"], a["final_val"]) == (12.0, 18.0, 1.8)
    b = {**a, "best_val": 1.8, "best_sampled": 1.71}
    nano = {"best_val": 1.75, "best_step": 750, "time_to_best_s": 5.0, "wall_s": 6.0}
    text = compare.table([{"seed": 1, "zoo": a, "nanogpt": nano}, {"seed": 2, "zoo": b, "nanogpt": nano}], 50)
    assert "(50 random batches)" in text.splitlines()[0]
    assert text.splitlines()[-1].startswith("| mean +- sd | 1.7500 +- 0.0707 | 1.7000 +- 0.0141 | 1.7500 +- 0.0000 |")


def test_a_folder_without_model_py_is_one_line(compare, tmp_path):
    with pytest.raises(SystemExit, match="has no model.py"):
        compare.checkout(str(tmp_path))


def test_zoo_alone_without_nanogpts_run_stops_before_training(compare, tmp_path, monkeypatch):
    """An ablation (--only zoo) reads nanoGPT's run from --nanogpt-runs: where seed 7's is not there, the command
    stops at once naming the file, and runs nothing (on a lent GPU, a whole call spent for no table)."""
    (tmp_path / "nanoGPT").mkdir()
    (tmp_path / "nanoGPT" / "model.py").write_text("")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "nanogpt_s1.json").write_text("{}")
    monkeypatch.setattr(compare, "run", lambda *a: pytest.fail("a run started"))
    with pytest.raises(SystemExit, match=r"no nanoGPT run at .*runs/nanogpt_s7\.json"):
        compare.main(["--nanogpt", str(tmp_path / "nanoGPT"), "--seeds", "1,7", "--only", "zoo",
                      "--nanogpt-runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
