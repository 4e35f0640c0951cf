"""The training loop end to end, through train.py (issue 3): resume after SIGKILL, finetuning, sharding."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_utils import (
    SMALL,
    assert_same_params,
    final_params,
    kill_after_checkpoint,
    metrics,
    one_line_error,
    run_main_many,
    run_train,
)
from PIL import Image

from zoo.config import resolve
from zoo.train.loop import train


def test_run_leaves_metrics_checkpoints_and_plot(tmp_path):
    run = tmp_path / "run"
    proc = run_train([*SMALL, "--steps", "20", "--ckpt-every", "10", "--eval-iters", "3", "--run-dir", str(run)])
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "train"] == [5, 10, 15, 20]
    assert any(r["split"] == "eval" and 0 <= r["accuracy"] <= 1 for r in rows)
    # --eval-iters: nanoGPT's estimate (3 random batches of each split) beside the whole eval split; the summary
    # has the wall time to each best, within the run's
    evals = [r for r in rows if r["split"] == "eval"]
    assert all(abs(r["sampled_loss"] - r["loss"]) < 0.5 * r["loss"] and r["train_sampled_loss"] > 0 for r in evals)
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary["time_to_best_s"]) == {"loss", "accuracy", "sampled_loss"}
    assert 0 < min(summary["time_to_best_s"].values()) <= max(summary["time_to_best_s"].values()) < summary["wall_s"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.isdigit()) == ["10", "20"]
    assert (run / "curves.png").stat().st_size > 0
    model = json.loads((run / "config.json").read_text())["model"]
    assert model["width"] == 32 and json.loads((run / "config.json").read_text())["param"]["name"] == "sp"
    # the base shape defaults to the model's default size (mlp_resnet: 256 x 8), not to the run's own shape,
    # so a plugin scales from where a user tuned
    assert (model["base_width"], model["base_depth"]) == (256, 8)


@pytest.mark.slow
@pytest.mark.parametrize("stream", ["false", "true"])
def test_sigkill_then_rerun_equals_uninterrupted(tmp_path, stream):
    """Kill -9 part-way, rerun the same command: the final params equal those of an uninterrupted run, with the
    data on the device or streamed from the host (grain), which restarts at the restored step."""
    args = [*SMALL, "--param", "mup", "--base-width", "16", "--steps", "60", "--ckpt-every", "10", "--stream", stream]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    kill_after_checkpoint(args, cut, 20)
    (code, err), (resumed, resumed_err) = run_main_many([[*args, "--run-dir", str(run)] for run in (whole, cut)])
    assert code == 0, err
    assert resumed == 0 and "resumed" in resumed_err, resumed_err
    assert_same_params(final_params(whole), final_params(cut))
    steps = [r["step"] for r in metrics(cut)]
    assert steps == sorted(set(steps)) == list(range(5, 65, 5))  # rows after the restored step were dropped


def _image_folder(root, classes: int, per_class: int = 6):
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for c in range(classes):
            d = root / split / f"class{c:02d}"
            d.mkdir(parents=True)
            for i in range(per_class):
                img = np.full((8, 8, 3), 20 * c, np.uint8) + rng.integers(0, 30, (8, 8, 3), dtype=np.uint8)
                Image.fromarray(img).save(d / f"{i}.png")
    return root


@pytest.mark.long
def test_init_from_ten_classes_into_five(tmp_path):
    """Finetuning: the body is loaded, the head (10 -> 5 classes) is re-initialised by the plugin."""
    ten, five = _image_folder(tmp_path / "ten", 10), _image_folder(tmp_path / "five", 5)
    base = ["--model", "mlp_resnet", "--width", "32", "--depth", "2", "--batch-size", "10", "--eval-every", "100",
            "--eval-batch-size", "10"]
    src, dst = tmp_path / "src", tmp_path / "dst"
    (code, err), (finetuned, stderr) = run_main_many([  # in order: the finetune reads the finished source run
        [*base, "--data", f"imagefolder:{ten}", "--steps", "10", "--run-dir", str(src)],
        [*base, "--data", f"imagefolder:{five}", "--steps", "1", "--lr", "1e-9", "--run-dir", str(dst), "--init-from",
         str(src)]])
    assert code == 0, err
    assert finetuned == 0, stderr
    assert "re-initialised by the plugin: head/kernel (shape (10, 32) -> (5, 32))" in stderr
    assert "init-from: loaded 2 of 3 parameter arrays" in stderr
    old, new = final_params(src), final_params(dst)
    assert new["head/kernel"].shape == (5, 32) and old["head/kernel"].shape == (10, 32)
    np.testing.assert_allclose(new["embed/kernel"], old["embed/kernel"], atol=1e-6)
    np.testing.assert_allclose(new["stack/blocks/w1/kernel"], old["stack/blocks/w1/kernel"], atol=1e-6)


@pytest.mark.long
def test_cifar10_depth_mup_300_steps_reaches_35_percent(tmp_path):
    """Issue 3 acceptance: the bundled CIFAR-10, 300 steps on CPU, test accuracy >= 35%."""
    run = tmp_path / "cifar"
    proc = run_train(["--model", "mlp_resnet", "--param", "depth_mup", "--data", "cifar10", "--steps", "300",
                      "--run-dir", str(run)], timeout=600)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best_eval"]["accuracy"] >= 0.35, summary
    assert (run / "metrics.jsonl").exists() and (run / "checkpoints" / "300").exists()


def test_a_text_runs_bits_are_named_by_what_its_tokens_are(tmp_path):
    """A text run's eval reported loss / ln 2 as 'bpc' whatever its tokens: bits per character only for a char
    tokenizer; a byte-level run's are bits per byte, and a BPE run's bits per token (several characters each)."""
    import math

    from zoo.train.compiled import BITS

    (tmp_path / "a.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 20)
    cfg = resolve({"model": "gpt", "width": 64, "depth": 1, "data": f"text:{tmp_path / 'a.txt'}", "byte_level": True,
                   "seq_len": 16, "batch_size": 4, "eval_batch_size": 4, "steps": 2, "warmup": 0, "eval_every": 2,
                   "model_opt": {"dropout": 0}, "run_dir": str(tmp_path / "run")})  # dropout's RNG: a longer compile
    best = train(cfg)["best_eval"]
    assert set(best) == {"loss", "accuracy", "bits_per_byte"}, best
    assert best["bits_per_byte"] == pytest.approx(best["loss"] / math.log(2), rel=1e-6)
    assert BITS == {"char": "bpc", "byte": "bits_per_byte", "bpe": "bits_per_token"}


def test_init_from_an_untied_readout_into_a_tied_gpt_is_refused(tmp_path, capsys):
    """An untied GPT's readout (head/kernel; every GPT export is untied) into a tied GPT has no parameter to go to:
    the run said 'loaded 11 of 11 parameter arrays' and dropped the trained readout, the token table reading out in
    its place (another network: eval loss 3.39 -> 3.98 from a muP export). Refused, naming tie_embeddings=false; a
    source's parameter with no place here otherwise is named (biases where the model has none)."""
    from zoo.cli.train import main

    gpt = ["--model", "gpt", "--width", "32", "--depth", "1", "--model-opt", "head_dim=16", "--data",
           "synthetic:text", "--seq-len", "8", "--batch-size", "4", "--eval-every", "100", "--compile-cache", "off"]
    src = tmp_path / "src"
    main([*gpt, "--steps", "2", "--model-opt", "tie_embeddings=false", "--model-opt", "bias=true", "--run-dir",
          str(src)])
    capsys.readouterr()
    line = one_line_error(main, [*gpt, "--steps", "3", "--run-dir", str(tmp_path / "dst"), "--init-from", str(src)],
                          capsys)
    assert f"--init-from {src}: its readout is a matrix of its own (head/kernel)" in line, line
    assert "give --model-opt tie_embeddings=false" in line and not (tmp_path / "dst").exists()
    main([*gpt, "--steps", "3", "--model-opt", "tie_embeddings=false", "--run-dir", str(tmp_path / "dst"),
          "--init-from", str(src)])
    (unused,) = [line for line in capsys.readouterr().err.splitlines() if "init-from: not used" in line]
    assert "no parameter here by that name: norm/bias, stack/blocks/attn/k/bias" in unused, unused
