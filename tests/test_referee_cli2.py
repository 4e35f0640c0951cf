"""An outside referee's inputs to the transfer CLI, the NTK-change diagnostic and the optimizer settings that zoo's
other tests do not use: each was accepted silently, misreported or ended in a traceback before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

import zoo.models
import zoo.param
from zoo.cli import transfer
from zoo.config import RunConfig
from zoo.diagnostics.ntk import ntk_change
from zoo.sweeps import report
from zoo.sweeps.transfer import Arm, TransferSpec
from zoo.sweeps.transfer_report import verdict

TINY = ["--model", "mlp_resnet", "--proxy-width", "16", "--width", "32", "--depth", "2", "--lrs", "1e-3",
        "--steps", "2", "--batch-size", "8", "--data", "synthetic:teacher", "--cache-dir", "off"]


def one_line_error(main, argv, capsys) -> str:
    """The one line a CLI refused `argv` with (exit status 1 or 2, no traceback)."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert stop.value.code in (1, 2) and len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


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
