"""An outside referee's inputs to the transfer CLI, the NTK-change diagnostic and the optimizer settings that zoo's
other tests do not use: each was accepted silently, misreported or ended in a traceback before its fix."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_utils import one_line_error

import zoo.models
import zoo.param
from zoo.cli import transfer
from zoo.config import RunConfig
from zoo.diagnostics.ntk import ntk_change
from zoo.param.mup import MuP
from zoo.param.tags import Tag
from zoo.sweeps import report
from zoo.sweeps.transfer import Arm, TransferSpec
from zoo.sweeps.transfer_report import verdict

TINY = ["--model", "mlp_resnet", "--proxy-width", "16", "--width", "32", "--depth", "2", "--lrs", "1e-3",
        "--steps", "2", "--batch-size", "8", "--data", "synthetic:teacher"]


@pytest.mark.parametrize("param", ["mup", "sp"])
def test_a_comparison_with_the_arm_under_test_is_refused(tmp_path, capsys, param):
    """--param X --compare X ran one arm (arms() dropped the comparison) under a report and JSON set up to compare
    ("compare": X); now one line, before anything trains. Without --compare, --param sp compares with nothing
    (it would be itself) and any other param with sp."""
    out = tmp_path / "t"
    line = one_line_error(transfer.main, [*TINY, "--param", param, "--compare", param, "--out", str(out)], capsys)
    assert f"--compare {param} is the parametrization under test" in line and "--compare none" in line
    assert not out.exists()
    spec = transfer.build_spec(transfer.parser().parse_args([*TINY, "--param", param, "--out", str(out)]))
    assert spec.compare == (None if param == "sp" else "sp") and len(spec.arms()) == (1 if param == "sp" else 2)


def arm(param: str, target_loss: float | None) -> Arm:
    """An arm whose proxy's best LR is 2^-9 and whose target, trained there, reached `target_loss` (None: it
    diverged)."""
    def record(width: int, lr_log2: float, loss: float | None) -> dict:
        return {"width": width, "depth": 2, "seed": 0, "lr": 2.0**lr_log2, "log2_lr": lr_log2, "diverged": loss is None,
                "train_loss": loss, "eval_accuracy": None}

    proxy = report.summarize([record(16, -10, 2.0), record(16, -9, 1.5), record(16, -8, 1.8)])
    target = report.summarize([record(32, -9, target_loss)])
    return Arm(param, {}, proxy, [-9.0], -9.0, target, [target_loss], False)


SPEC = TransferSpec(run=RunConfig.from_flat({"model": "mlp_resnet", "param": "mup"}), lrs=[1e-3], proxy=(16, 2),
                    target=(32, 2), out=Path("unused"))


def test_an_exact_tie_is_no_win():
    """Equal target losses read "sp's target is better" (the comparison won every tie: la < lb was false); a tie
    is now said as one, whichever arm comes first, and a real difference (or a diverged arm) still has a winner."""
    assert verdict([arm("mup", 1.25), arm("sp", 1.25)], SPEC).startswith("the targets tie: mup's 1.2500, sp's 1.2500")
    assert verdict([arm("sp", 1.25), arm("mup", 1.25)], SPEC).startswith("the targets tie")
    assert verdict([arm("mup", 1.25), arm("sp", 1.2500001)], SPEC).startswith("mup's target is better")
    assert verdict([arm("mup", 1.2500001), arm("sp", 1.25)], SPEC).startswith("sp's target is better")
    assert verdict([arm("mup", None), arm("sp", 1.25)], SPEC).startswith("sp's target is better: 1.2500 vs mup's "
                                                                          "diverged")
    assert verdict([arm("mup", None), arm("sp", None)], SPEC).startswith("neither target trained")


def test_ntk_change_with_its_defaults():
    """ntk_change(model, cfg, plugin) with no options ended in StopIteration (K was read off the first option);
    now the plugin's defaults are one option set (K = 1) on one seed and one random input. Theta > 0 and one SGD
    step at lr 1e-3 moves f by -Theta to first order (|df / -Theta - 1| < 1e-2, on mlp_resnet widths 24 under
    mean_field, settings the other NTK tests do not use); lists of different lengths are refused in one line."""
    cfg = zoo.models.config("mlp_resnet", width=24, depth=3, base_width=8, in_shape=(5,), num_classes=1,
                            activation="gelu")
    out = ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("mean_field", **o))
    assert {k: v.shape for k, v in out.items()} == dict.fromkeys(("ntk", "even", "odd", "feature", "f_change"), (1, 1))
    assert out["ntk"][0, 0] > 0 and abs(out["f_change"][0, 0] / -out["ntk"][0, 0] - 1) < 1e-2, out
    with pytest.raises(ValueError, match="one value or a list of K >= 1 values, got lengths option s: 2, lr: 3"):
        ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("ntk_mup", **o), {"s": [0.0, 1.0]}, [1e-3] * 3)
    with pytest.raises(ValueError, match="seeds must be a positive integer, got 0"):
        ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("ntk_mup", **o), seeds=0)
    for lr in (0.0, [1e-3, float("nan")]):  # Theta = 0: E and O were 0 / 0 = NaN
        with pytest.raises(ValueError, match="the lr must be positive and finite"):
            ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("ntk_mup", **o), lr=lr)


def test_a_warmup_longer_than_the_run_is_refused(tmp_path, capsys):
    """--warmup 7 --steps 5 trained with the LR factor (t + 1) / 7 ending at 5/7 of --lr, silently; now every CLI
    that resolves a run config (train.py, the sweep, the transfer) refuses it in one line, before any data loads,
    as it does a file that sets both. Taken: warmup = steps (the peak on the last step), a file holding the
    recipe's warmup (gpt's 100) beside a shorter run (a run's config.json read back), and a file's warmup under a
    --steps flag that shortens the file's run (a smoke test of a preset)."""
    from zoo.cli import sweep
    from zoo.cli import train as train_cli

    want = "--warmup 7 is longer than the run's 5 steps: the LR would end at 0.714 of its peak --lr; give --warmup 5"
    small = ["--model", "mlp_resnet", "--steps", "5", "--warmup", "7"]
    assert want in one_line_error(train_cli.main, [*small, "--print-config"], capsys)
    assert want in one_line_error(sweep.main, [*small, "--lrs", "1e-3", "--out", str(tmp_path / "s")], capsys)
    assert want in one_line_error(transfer.main, [*TINY, "--warmup", "7", "--steps", "5", "--out",
                                                  str(tmp_path / "t")], capsys)
    assert not (tmp_path / "s").exists() and not (tmp_path / "t").exists()
    assert "--warmup 100 is longer than the run's 2 steps" in one_line_error(
        train_cli.main, ["--model", "gpt", "--steps", "2", "--warmup", "100", "--print-config"], capsys)
    file = tmp_path / "run.yaml"
    file.write_text("model: gpt\nsteps: 2\nwarmup: 100\n")  # the recipe's warmup, as a run's config.json holds it
    assert train_cli.config_from_args(train_cli.parser().parse_args(["--config", str(file)])).optim.warmup == 100
    file.write_text("model: gpt\nsteps: 2\nwarmup: 50\n")
    assert "--warmup 50 is longer" in one_line_error(train_cli.main, ["--config", str(file)], capsys)
    file.write_text("model: gpt\nsteps: 3000\nwarmup: 50\n")
    assert train_cli.config_from_args(train_cli.parser().parse_args(["--config", str(file), "--steps", "2"])
                                      ).optim.warmup == 50
    cfg = train_cli.config_from_args(train_cli.parser().parse_args(["--steps", "5", "--warmup", "5"]))
    assert (cfg.loop.steps, cfg.optim.warmup) == (5, 5)


@dataclasses.dataclass(frozen=True)
class SlowSGD(MuP):
    """muP whose sgd family takes one more power of width in its LR exponent than its adam family (a plugin may
    set the families apart; zoo's own give them the same c)."""

    def lr_exponent(self, tag: Tag, family: str = "adam") -> Any:
        return super().lr_exponent(tag, family) + (1.0 if family == "sgd" else 0.0)


def test_the_ntk_takes_the_sgd_familys_learning_rates():
    """Theta summed eta_mu = lr * pre-scale * LR multiplier of the *adam* family (rules() without an optimizer)
    while the step it predicts is SGD's: under a plugin whose sgd exponent is one higher, at m = 24/8 = 3, df
    was -Theta / 3; now the rates are SGD's and df / -Theta is 1 to first order (within 2e-3 at lr 1e-4)."""
    cfg = zoo.models.config("mlp_resnet", width=24, depth=2, base_width=8, in_shape=(5,), num_classes=1,
                            activation="tanh")
    out = ntk_change("mlp_resnet", cfg, lambda o: SlowSGD(**o), lr=1e-4, seeds=2)
    np.testing.assert_allclose(out["f_change"] / -out["ntk"], 1.0, atol=2e-3)


def test_the_default_ntk_input_does_not_move_with_the_seed_count():
    """The default input was drawn from fold_in(key, seeds): 1 seed and 2 seeds measured different inputs, so the
    first seed's numbers changed with the seed count; now its Theta is the same (float32 rounding: rtol 1e-5)."""
    cfg = zoo.models.config("mlp_resnet", width=12, depth=1, in_shape=(3,), num_classes=1)
    one, two = (ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("ntk", **o), seeds=n)["ntk"] for n in (1, 2))
    np.testing.assert_allclose(one[:, 0], two[:, 0], rtol=1e-5)
    assert abs(two[0, 1] / two[0, 0] - 1) > 1e-3  # another seed: another draw


def test_a_run_shorter_than_its_recipes_warmup_says_so():
    """`--model gpt --steps 3` keeps the recipe's warmup of 100 (check_warmup lets it through): the LR ended at 3/100
    of --lr and the cosine decay never began, with nothing said. Now the run says it in one line; so does a cosine
    run whose warmup takes all of it (warmup = steps reaches the peak on the last step, no step decays), and a run
    with a step after its warmup says nothing."""
    from types import SimpleNamespace

    from zoo.config import resolve
    from zoo.train.loop import _warmup_note

    cfg = resolve({"model": "gpt", "steps": 3})
    note = _warmup_note(SimpleNamespace(cfg=cfg, steps=3))
    assert note == ("note: the warmup of 100 steps is longer than this run's 3: the LR ends at 0.03 of --lr 0.001, "
                    "and the cosine decay never starts; give --warmup 2 or less to decay")
    whole = _warmup_note(SimpleNamespace(cfg=resolve({"model": "gpt", "steps": 100}), steps=100))
    assert whole == ("note: the warmup of 100 steps takes the whole run: the LR reaches --lr 0.001 on its last step, "
                     "and the cosine decay never starts (--min-lr-ratio 0.1 unused); give --warmup 99 or less to decay")
    assert _warmup_note(SimpleNamespace(cfg=resolve({"model": "gpt", "steps": 101}), steps=101)) is None
    flat = resolve({"model": "mlp_resnet", "warmup": 8, "epochs": 1})  # the horizon is known once the data loads
    assert "LR ends at 0.5 of --lr" in _warmup_note(SimpleNamespace(cfg=flat, steps=4))
    assert "decay" not in _warmup_note(SimpleNamespace(cfg=flat, steps=4))  # mlp_resnet's schedule is constant


def test_a_run_files_default_eps_follows_a_new_optimizer():
    """A run's config.json holds its optimizer's resolved eps: an Adafactor run's 1e-30 rerun with --optimizer adam
    trained Adam with eps 1e-30 (its default is 1e-8), and an Adam run's 1e-8 became Adafactor's eps1 (default
    1e-30). A default eps now follows the optimizer; an eps the file chose, or a flag's, is kept."""
    from zoo.config import resolve

    adafactor_run = {"model": "mlp_resnet", "optimizer": "adafactor", "eps": 1e-30}
    assert resolve({"optimizer": "adam"}, adafactor_run).optim.eps == 1e-8
    assert resolve({}, adafactor_run).optim.eps == 1e-30
    assert resolve({"optimizer": "adam", "eps": 1e-5}, adafactor_run).optim.eps == 1e-5
    assert resolve({"optimizer": "adafactor"}, {"model": "gpt", "eps": 1e-8}).optim.eps == 1e-30  # gpt: adamw
    assert resolve({"optimizer": "adafactor"}, {"model": "mlp_resnet", "eps": 1e-6}).optim.eps == 1e-6


def test_a_target_difference_within_the_seeds_noise_is_no_win():
    """With --target-seeds, 2.5277 +- 0.21 against 2.6371 +- 0.25 read "mup's target is better", a difference
    well inside the seeds' spread. Now the verdict says the lower one is within the noise when the difference is
    below two standard errors of the difference of the means, 2 sqrt(s_a^2 / n_a + s_b^2 / n_b) (ddof 1); a
    difference beyond it, or a single target seed (no spread to judge), is still a win."""
    def seeded(param: str, losses: list[float]) -> Arm:
        return dataclasses.replace(arm(param, float(np.mean(losses))), target_losses=losses)

    mup, sp = seeded("mup", [2.3, 2.5, 2.8]), seeded("sp", [2.4, 2.6, 2.9])  # means 2.5333, 2.6333, s 0.2517 each
    noise = 2 * np.sqrt(2 * np.var([2.3, 2.5, 2.8], ddof=1) / 3)  # 0.4110
    text = verdict([mup, sp], SPEC)
    assert text.startswith("mup's target is lower, within the seeds' noise:")
    assert f"(difference 0.1000 < 2 standard errors {noise:.4f};" in text
    assert verdict([sp, mup], SPEC).startswith("mup's target is lower, within the seeds' noise:")
    apart = seeded("sp", [3.3, 3.5, 3.8])  # 1.0 apart: beyond 0.41
    assert verdict([mup, apart], SPEC).startswith("mup's target is better: 2.5333 +- ")
    assert verdict([arm("mup", 2.5), arm("sp", 2.6)], SPEC).startswith("mup's target is better")
