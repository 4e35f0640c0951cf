"""`python -m zoo.transfer` end to end: muP's tuned-small-trained-big target beats SP's tuned the same way; errors."""

import dataclasses
import json
import os

import numpy as np
import pytest
from cli_utils import one_line_error

from zoo.cli import transfer
from zoo.config import RunConfig
from zoo.sweeps.transfer import TransferSpec, check_lrs, target_config

# MLP-ResNet depth 4, Adam, 300 steps on the 16-dimensional random-teacher task (as tests/sweeps/test_lr_transfer.py):
# SP's best LR falls like 1/width there, muP's stays put.
CASE = ["--model", "mlp_resnet", "--param", "mup", "--proxy-width", "64", "--width", "512", "--depth", "4",
        "--lrs", "2^-13:2^-7:1", "--steps", "300", "--batch-size", "64", "--optimizer", "adam",
        "--data", "synthetic:teacher"]


def error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        transfer.main(argv)
    assert e.value.code in (1, 2)  # 2: argparse's
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0]
    return lines[0]


@pytest.mark.long
def test_mup_target_beats_sp_target_at_transferred_lr(tmp_path, capsys):
    """Proxy width 64 (the base width, where muP is SP), target 512; the check LR 2^-11 is 2 grid steps below
    the proxies' best. muP: the transferred LR beats it at the target, and the target beats the proxy (wider is
    better). SP: its hidden features grow like width under Adam, so its best LR moves down by ~log2(512/64) = 3
    grid steps; the transferred LR overshoots, 2^-11 is better, and SP's target loses to muP's."""
    out = tmp_path / "t"
    transfer.main([*CASE, "--out", str(out), "--check-target", "2^-11"])
    text = capsys.readouterr().out
    assert "mup's target is better" in text and (out / "transfer.png").stat().st_size > 0
    report = json.loads((out / "transfer.json").read_text())
    mup, sp = report["arms"]
    assert (mup["param"], sp["param"]) == ("mup", "sp")
    np.testing.assert_allclose(mup["proxy"]["loss"], sp["proxy"]["loss"], rtol=1e-5)  # the same model at width 64
    assert mup["transferred_log2_lr"] == sp["transferred_log2_lr"] and not mup["proxy"]["at_grid_edge"]
    assert mup["target_loss"] < sp["target_loss"], report["verdict"]
    assert mup["target_loss"] < mup["proxy"]["best_loss"]
    assert mup["miss_grid_steps"] == 0 and sp["miss_grid_steps"] == 2
    # a rerun trains nothing and reports the same numbers
    transfer.main([*CASE, "--out", str(out), "--check-target", "2^-11"])
    assert capsys.readouterr().out.count("done, skipped") == 4
    assert json.loads((out / "transfer.json").read_text()) == report


def test_transfer_bad_input(tmp_path, capsys):
    out = ["--out", str(tmp_path / "x")]
    i = CASE.index("--lrs")
    no_lrs = CASE[:i] + CASE[i + 2:]
    assert "required: --lrs" in error([*no_lrs, *out], capsys)
    assert "is the target" in error([*CASE, *out, "--proxy-width", "512"], capsys)
    assert "unknown parametrization" in error([*CASE, *out, "--compare", "nope"], capsys)
    assert "learning rates" in error([*CASE, *out, "--check-target", "2^-4:2^-8:1"], capsys)
    assert "--target-seeds: expected a positive integer" in error([*CASE, *out, "--target-seeds", "0"], capsys)
    assert "--proxy-width: expected a positive integer" in error([*CASE, *out, "--proxy-width", "0"], capsys)
    assert "has no option" in error([*CASE, *out, "--param-opt", "bogus=1"], capsys)
    assert "--target-seeds 2 from --seed 2147483647 reaches seed 2147483648" in error(
        [*CASE, *out, "--seed", str(2**31 - 1), "--target-seeds", "2"], capsys)
    gpt = ["--model", "gpt", "--model-opt", "head_dim=8", "--proxy-width", "16", "--width", "20", "--depth", "1",
           "--steps", "2", "--batch-size", "4", "--seq-len", "16", "--lrs", "1e-3", *out]
    assert "width 20 is not a multiple of head_dim 8" in error(gpt, capsys)
    # refused after the transfer had taken its --out (a .lock left there): the workers, and a proxy batch too large
    assert "asks for more worker processes than the" in error([*CASE, *out, "--processes", "1000"], capsys)
    assert "batch" in error([*CASE, *out, "--policy", "sde", "--proxy-batch-size", "100000"], capsys)
    assert not (tmp_path / "x").exists()  # refused before the proxy trained
    for name, kind in (("config.json", "run"), ("sweep.json", "sweep"), ("law.json", "fit")):
        held = tmp_path / kind
        held.mkdir()
        (held / name).write_text("{}")
        assert error([*CASE, "--out", str(held)], capsys).endswith(
            f"--out {held} holds a {kind} ({name}); give the transfer a folder of its own")
        assert os.listdir(held) == [name]


def test_default_check_grid_brackets_the_transferred_lr():
    assert check_lrs(-9.0, 0.5, []) == [2.0**-10, 2.0**-9.5, 2.0**-9, 2.0**-8.5, 2.0**-8]
    assert check_lrs(-9.0, 1.0, [1e-3]) == [1e-3]
    args = transfer.parser().parse_args(["--out", "x", "--check-target", "--seeds", "2"])
    assert args.check_target is transfer.AROUND and args.seeds == 2


def test_an_empty_check_target_is_refused(capsys):
    """--check-target "" (an unset shell variable) ran as the bare flag, the transferred LR +- 2 steps, where every
    other empty value is refused."""
    with pytest.raises(SystemExit) as e:
        transfer.parser().parse_args(["--out", "x", "--check-target", ""])
    assert e.value.code == 2 and "give LRs (a comma list or a range), or leave the flag bare" in capsys.readouterr().err


def test_arms_scale_from_the_proxy_and_compare_without_options(tmp_path):
    """Depth transfer: both arms' base depth (and width) is the proxy's, so the plugin scales from the size that was
    tuned; the comparison arm takes no plugin options; the target config carries the transferred LR."""
    run = RunConfig.from_flat({"model": "mlp_resnet", "param": "depth_mup", "param_opt": {"alpha": 1.0}})
    spec = TransferSpec(run=run, lrs=[1e-3], proxy=(32, 2), target=(32, 16), out=tmp_path)
    main, sp = spec.arms()
    assert (main.param.name, main.param.options, sp.param.name, sp.param.options) == \
        ("depth_mup", {"alpha": 1.0}, "sp", {})
    assert {(r.model.base_width, r.model.base_depth) for r in (main, sp)} == {(32, 2)}
    with pytest.raises(ValueError, match="is the parametrization under test"):
        dataclasses.replace(spec, compare="depth_mup")
    assert len(dataclasses.replace(spec, compare=None).arms()) == 1
    given = dataclasses.replace(spec, run=run.replace(base_depth=1)).arms()[0]
    assert (given.model.base_width, given.model.base_depth) == (32, 1)
    cfg = RunConfig.from_json(target_config(spec, main, 2.0**-9))
    assert (cfg.model.width, cfg.model.depth, cfg.model.base_depth, cfg.optim.lr) == (32, 16, 2, 2.0**-9)


@pytest.mark.slow
def test_the_target_trains_at_the_proxys_own_learning_rate(tmp_path, capsys):
    """--lrs 1e-3: the target trained, and OUT/mup/target.json held, 2^round(log2 1e-3, 6) = 1.0000002e-3, another
    float32 than the proxy's 1e-3 (2 ulps off). Now the transferred LR is the proxy member's own, also in the check
    grid (one member at it, not two) and in transfer.json."""
    import json

    from zoo.cli import transfer

    out = tmp_path / "t"
    transfer.main(["--model", "mlp_resnet", "--param", "mup", "--data", "synthetic", "--steps", "2",
                   "--lrs", "1e-3", "--width", "32", "--proxy-width", "16", "--depth", "2",
                   "--batch-size", "8", "--compare", "none", "--check-target", "--out", str(out)])
    capsys.readouterr()
    target = [json.loads(line) for line in (out / "mup" / "target" / "results.jsonl").read_text().splitlines()]
    assert len(target) == 5 and sum(r["lr"] == 1e-3 for r in target) == 1, [r["lr"] for r in target]
    assert json.loads((out / "mup" / "target.json").read_text())["optim"]["lr"] == 1e-3
    assert json.loads((out / "transfer.json").read_text())["arms"][0]["transferred_lr"] == 1e-3


TRANSFER = ["--model", "mlp_resnet", "--proxy-width", "16", "--width", "32", "--depth", "2", "--lrs", "1e-3",
        "--steps", "2", "--batch-size", "8", "--data", "synthetic:teacher"]


@pytest.mark.parametrize("param", ["mup", "sp"])
def test_a_comparison_with_the_arm_under_test_is_refused(tmp_path, capsys, param):
    """--param X --compare X ran one arm (arms() dropped the comparison) under a report and JSON set up to compare
    ("compare": X); now one line, before anything trains. Without --compare, --param sp compares with nothing
    (it would be itself) and any other param with sp."""
    out = tmp_path / "t"
    line = one_line_error(transfer.main, [*TRANSFER, "--param", param, "--compare", param, "--out", str(out)], capsys)
    assert f"--compare {param} is the parametrization under test" in line and "--compare none" in line
    assert not out.exists()
    spec = transfer.build_spec(transfer.parser().parse_args([*TRANSFER, "--param", param, "--out", str(out)]))
    assert spec.compare == (None if param == "sp" else "sp") and len(spec.arms()) == (1 if param == "sp" else 2)


def test_a_proxy_that_diverged_at_every_lr_exits_non_zero(tmp_path, capsys):
    """Every proxy LR diverged: no LR to transfer and no OUT/PARAM/target.json, but the exit was 0, so a script
    chaining `zoo.transfer ... && python train.py --config OUT/mup/target.json` failed on a missing file. Now the
    report is written and the exit is 1, with one line saying why."""
    out = tmp_path / "t"
    with pytest.raises(SystemExit) as e:
        transfer.main(["--model", "mlp_resnet", "--param", "mup", "--proxy-width", "16", "--width", "32", "--depth",
                       "1", "--lrs", "2^8:2^9:1", "--steps", "4", "--batch-size", "8", "--optimizer", "sgd",
                       "--data", "synthetic", "--compare", "none", "--out", str(out)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert e.value.code == 1 and err == [f"error: every proxy LR of mup diverged, so there is no LR to transfer and "
                                         f"no {out / 'mup' / 'target.json'}: give lower --lrs"], err
    assert json.loads((out / "transfer.json").read_text())["arms"][0]["transferred_lr"] is None
    assert not (out / "mup" / "target.json").exists()
