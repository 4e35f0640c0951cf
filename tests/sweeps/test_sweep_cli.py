"""`python -m zoo.sweep` end to end: results per member, rerun skips, --report-only, one-line errors."""

import json

import pytest

from zoo.cli import sweep

BASE = ["--model", "mlp_resnet", "--param", "mup", "--data", "synthetic", "--depths", "2", "--steps", "6",
        "--batch-size", "16", "--chunk", "4"]


def run(argv, capsys):
    sweep.main(argv)
    return capsys.readouterr().out


def error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        sweep.main(argv)
    assert e.value.code != 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines and "Traceback" not in "\n".join(lines)
    return lines[-1]


@pytest.mark.long
def test_sweep_cli_runs_skips_and_reports(tmp_path, capsys):
    out = tmp_path / "s"
    args = [*BASE, "--out", str(out), "--widths", "16", "--lrs", "2^-9:2^-7:2"]
    text = run(args, capsys)
    assert "width=16 depth=2: 2 members" in text and "transfer score" in text and (out / "sweep.png").exists()
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["width"], r["depth"], r["log2_lr"]) for r in records] == [(16, 2, -9), (16, 2, -7)]
    assert all(r["steps"] == 6 and 0 < r["eval_accuracy"] <= 1 and r["train_loss"] > 0 for r in records)
    assert records[0]["train_loss"] != records[1]["train_loss"]
    settings = json.loads((out / "sweep.json").read_text())
    assert settings["base_width"] == 16 and settings["param"] == "mup" and settings["steps"] == 6
    # rerun with one more LR: the finished members are skipped, only the new LR trains
    text = run([*args[:-1], "2^-9:2^-5:2"], capsys)
    assert "width=16 depth=2: 1 members" in text
    assert len((out / "results.jsonl").read_text().splitlines()) == 3
    assert "done, skipped" in run(args, capsys)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["axis"] == "width" and summary["sizes"][0]["lrs"] == 3
    assert "best log2 LR" in run(["--out", str(out), "--report-only", "--metric", "eval_loss"], capsys)
    assert "other settings (param \"mup\" there, \"sp\" here)" in error([*args[:2], "--param", "sp", *args[4:]], capsys)


def test_sweep_cli_bad_input(tmp_path, capsys):
    out = str(tmp_path / "x")
    assert "learning rates" in error([*BASE, "--out", out, "--lrs", "2^-4:2^-8:1"], capsys)
    for lrs in ([], ["--lrs", " "]):  # a command line without a grid is malformed: argparse's status 2
        with pytest.raises(SystemExit) as e:
            sweep.main([*BASE, "--out", out, *lrs])
        assert e.value.code == 2
        assert "--lrs" in capsys.readouterr().err.splitlines()[-1]
    assert "unknown parametrization" in error([*BASE, "--out", out, "--lrs", "1e-3", "--param", "nope"], capsys)
    assert "--widths" in error([*BASE, "--out", out, "--lrs", "1e-3", "--widths", "a"], capsys)
    assert "no sweep in" in error(["--out", out, "--report-only"], capsys)
    (tmp_path / "empty").mkdir()
    assert "no sweep in" in error(["--out", str(tmp_path / "empty"), "--report-only"], capsys)
    assert not any((tmp_path / "empty").iterdir())  # no lock file left in a folder that holds no sweep
    assert "has no option" in error([*BASE, "--out", out, "--lrs", "1e-3", "--model-opt", "bogus=1"], capsys)
    gpt = ["--model", "gpt", "--model-opt", "head_dim=8", "--depths", "1", "--steps", "2", "--batch-size", "4",
           "--seq-len", "16", "--lrs", "1e-3", "--out", out]
    assert "width 20 is not a multiple of head_dim 8" in error([*gpt, "--widths", "16,20"], capsys)
    assert not (tmp_path / "x").exists()  # refused before width 16 trained
    for seeds in (["--seed", str(2**31)], ["--seed", str(2**31 - 1), "--seeds", "2"], ["--seeds", str(10**20)]):
        assert "a sweep's seeds must be at most 2^31 - 1" in error([*BASE, "--out", out, "--lrs", "1e-3", *seeds],
                                                                    capsys)


def test_sweep_cache_dir_is_the_decoded_data_cache_as_in_train_py(tmp_path, capsys):
    """--cache-dir names where decoded image sets go, as train.py's does; JAX's compile cache is --compile-cache
    (the sweep's --cache-dir was the compile cache, the same flag meaning another folder in train.py)."""
    from PIL import Image

    for split in ("train", "test"):
        for cls in ("a", "b"):
            (tmp_path / "set" / split / cls).mkdir(parents=True)
            for i in range(4):
                Image.new("RGB", (4, 4), (60 * i, 200 if cls == "a" else 10, 0)).save(
                    tmp_path / "set" / split / cls / f"{i}.png")
    run(["--model", "mlp_resnet", "--param", "mup", "--data", f"imagefolder:{tmp_path / 'set'}", "--depths", "1",
         "--widths", "8", "--steps", "2", "--batch-size", "4", "--lrs", "1e-3", "--cache-dir", str(tmp_path / "data"),
         "--compile-cache", str(tmp_path / "jax"), "--out", str(tmp_path / "s")], capsys)
    assert [p.name.split("-")[0] for p in (tmp_path / "data").iterdir()] == ["imagefolder"]
    assert (tmp_path / "jax").is_dir() and not list((tmp_path / "jax").glob("imagefolder-*"))


def test_report_only_refuses_training_flags(tmp_path, capsys):
    """`zoo.sweep --out DIR --report-only --lrs 1e-5 --widths 999 --steps 5` re-rendered DIR as it was, the flags
    ignored silently; now one line naming them, before DIR is read."""
    from zoo.cli.sweep import main

    with pytest.raises(SystemExit) as stop:
        main(["--out", str(tmp_path / "none"), "--report-only", "--lrs", "1e-5", "--widths", "999", "--steps", "5",
              "--metric", "eval_loss"])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and "--widths, --lrs, --steps would not change them" in err, err
