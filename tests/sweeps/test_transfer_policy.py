"""zoo.transfer with a proxy at another batch size under a scaling policy: the target trains at the settings the
policy maps, and its config records which policy produced each number; an option the optimizer does not read is one
line, nothing written."""

from __future__ import annotations

import json
import math

import pytest

import zoo.policy
from zoo.config import resolve
from zoo.config_file import read_file
from zoo.sweeps import results, transfer_report
from zoo.sweeps.grid import parse_lrs
from zoo.sweeps.transfer import TransferSpec, run_transfer


def test_the_target_trains_at_the_policy_s_settings(tmp_path):
    run = resolve({"model": "mlp_resnet", "data": "synthetic:teacher", "param": "mup", "depth": 1, "steps": 2,
                   "batch_size": 16, "warmup": 1})
    spec = TransferSpec(run=run, lrs=parse_lrs("2^-8,2^-6"), proxy=(8, 1), target=(16, 1), out=tmp_path / "t",
                        compare=None, policy=zoo.policy.get("sde"), proxy_batch=4, proxy_steps=4)
    (arm,) = run_transfer(spec, echo=lambda _: None)
    assert arm.factor == pytest.approx(2.0)  # sqrt(16 / 4)
    target = results.read_settings(tmp_path / "t" / "mup" / "target")
    assert (target["batch_size"], target["steps"], target["b2"]) == (16, 2, pytest.approx(0.999**4))
    assert results.read_settings(tmp_path / "t" / "mup" / "proxy")["batch_size"] == 4
    (member,) = results.read(tmp_path / "t" / "mup" / "target")
    assert math.log2(member["lr"]) == pytest.approx(arm.lr_log2 + 1)
    transfer_report.write([arm], spec)
    config = json.loads((tmp_path / "t" / "mup" / "target.json").read_text())
    settings = config["provenance"]["settings"]
    assert config["provenance"]["policy"]["name"] == "sde" and config["provenance"]["proxy"]["batch_size"] == 4
    assert settings["lr"]["target"] == pytest.approx(2 * settings["lr"]["proxy"])
    assert "(B/B0)^0.5" in settings["lr"]["law"]
    assert settings["eps"]["target"] == pytest.approx(settings["eps"]["proxy"] / 2)
    assert resolve({}, read_file(str(tmp_path / "t" / "mup" / "target.json"))).optim.lr == member["lr"]


def test_a_policy_option_the_optimizer_does_not_read(tmp_path, capsys):
    from zoo.cli.transfer import main

    out = tmp_path / "t"
    with pytest.raises(SystemExit) as e:
        main(["--out", str(out), "--optimizer", "sgd", "--policy", "sde", "--policy-opt", "betas=all",
              "--proxy-batch-size", "4", "--lrs", "2^-8,2^-6", "--width", "16", "--proxy-width", "8"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1
    assert "policy sde option betas is read only by --optimizer adam / adamw / lion / muon; --optimizer sgd" in err
    assert not out.exists()


def test_a_fitted_law_of_one_plugin_is_refused_for_the_comparison_arm(tmp_path, capsys):
    """A law fitted on muP sweeps moved the default SP arm's target LR too (muP's exponent, where SP's own was -1),
    and the verdict compared muP with an SP under muP's law. The comparison arm is refused in one line, naming
    --compare none; with it the transfer is set up."""
    law = tmp_path / "law.json"
    law.write_text(json.dumps({"kind": "zoo.fit law", "model": "mlp_resnet", "param": "mup", "optimizer": "adam",
                               "data": "synthetic:teacher", "metric": "train_loss",
                               "policy": {"name": "none", "options": {}},
                               "laws": {"lr": {"intercept_log2": -8.0, "reference": {"width": 48.0},
                                               "exponents": {"width": -0.2}, "intervals": {"width": [-0.3, -0.1]}}}}))
    from zoo.cli.transfer import build_spec, main, parser

    out = tmp_path / "t"
    argv = ["--out", str(out), "--param", "mup", "--optimizer", "adam", "--data", "synthetic:teacher", "--depth",
            "1", "--proxy-width", "48", "--width", "96", "--lrs", "2^-8,2^-6", "--policy", "fitted", "--policy-opt",
            f"law={law}"]
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1 and not out.exists()
    assert "the comparison arm (--compare sp): the fitted law is of parametrization mup, this run's is sp" in err
    assert "--compare none" in err
    assert build_spec(parser().parse_args([*argv, "--compare", "none"])).compare is None


def test_a_sweep_under_a_policy_trains_the_proxy_s_grid_mapped(tmp_path):
    """zoo.sweep --policy: the --lrs are the proxy's, each trained times the policy's factor, under its b2 and eps;
    --proxy-tokens is the proxy's horizon in tokens (batch x context per step for a language model)."""
    from zoo.cli.sweep import build_spec, parser

    spec = build_spec(parser().parse_args(["--out", str(tmp_path / "s"), "--steps", "100", "--batch-size", "64",
                                           "--proxy-batch-size", "16", "--policy", "sde", "--lrs", "2^-8,2^-6"]))
    assert spec.lrs == [2.0**-7, 2.0**-5] and spec.run.optim.b2 == pytest.approx(0.999**4)
    assert spec.run.optim.eps == pytest.approx(0.5e-8)
    spec = build_spec(parser().parse_args(["--out", str(tmp_path / "t"), "--model", "gpt", "--data", "shakespeare",
                                           "--seq-len", "32", "--steps", "100", "--batch-size", "8",
                                           "--proxy-tokens", "12800", "--policy", "timescale", "--optimizer",
                                           "adamw", "--lrs", "2^-8"]))
    assert spec.run.optim.weight_decay == pytest.approx(0.1 * 12800 / (8 * 32 * 100))  # tau over the budget kept


def test_a_law_float32_cannot_map_by_is_refused_before_the_proxy_trains(tmp_path, capsys):
    """A fitted law whose batch factor (16/4)^200 leaves float32: one line naming the law file, before the proxy's
    sweep has trained or written anything (it was refused only once the proxy had trained)."""
    from zoo.cli.transfer import main

    law = tmp_path / "law.json"
    law.write_text(json.dumps({
        "kind": "zoo.fit law", "model": "mlp_resnet", "param": "mup", "optimizer": "adam", "data": "synthetic",
        "metric": "train_loss", "policy": {"name": "none", "options": {}},
        "laws": {"lr": {"intercept_log2": -8.0, "reference": {"batch_size": 4.0}, "exponents": {"batch_size": 200.0},
                        "intervals": {"batch_size": [199.0, 201.0]}}}}))
    out = tmp_path / "t"
    with pytest.raises(SystemExit) as e:
        main(["--out", str(out), "--param", "mup", "--data", "synthetic", "--policy", "fitted", "--policy-opt",
              f"law={law}", "--batch-size", "16", "--proxy-batch-size", "4", "--lrs", "2^-8,2^-6", "--width", "16",
              "--proxy-width", "8", "--steps", "2", "--compare", "none"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"{law}: the law's batch_size factor is 4^200 = 2.58225e+120, outside float32's range" in err
    assert not (out / "mup" / "proxy").exists()


@pytest.mark.parametrize("data, metric, note", [
    ("synthetic", "eval_loss", "data synthetic:teacher (this run's: synthetic) and metric train_loss (this run's: "
                               "eval_loss)"),
    ("synthetic:teacher", "eval_loss", "metric train_loss (this run's: eval_loss)"),
    ("synthetic:teacher", "train_loss", None)])
def test_a_law_fitted_on_other_data_or_metric_is_applied_with_a_note(data, metric, note, tmp_path, capsys):
    """A law fitted on another dataset or metric was applied without a word (another model, plugin or optimizer is
    refused). It is still applied, as a guess, with a note naming what differs."""
    from zoo.cli.sweep import build_spec, parser

    law = tmp_path / "law.json"
    law.write_text(json.dumps({
        "kind": "zoo.fit law", "model": "mlp_resnet", "param": "mup", "optimizer": "adam", "data": "synthetic:teacher",
        "metric": "train_loss", "policy": {"name": "none", "options": {}},
        "laws": {"lr": {"intercept_log2": -8.0, "reference": {"batch_size": 16.0}, "exponents": {"batch_size": -0.5},
                        "intervals": {"batch_size": [-0.6, -0.4]}}}}))
    spec = build_spec(parser().parse_args([
        "--out", str(tmp_path / "s"), "--param", "mup", "--optimizer", "adam", "--data", data, "--metric", metric,
        "--steps", "10", "--batch-size", "64", "--proxy-batch-size", "16", "--policy", "fitted", "--policy-opt",
        f"law={law}", "--lrs", "2^-8"]))
    assert spec.lrs == [pytest.approx(2.0**-8 * 4**-0.5)]
    err = capsys.readouterr().err
    expected = f"note: the law was fitted on {note}: its exponents are applied as they are, untested there"
    assert (expected in err) if note else "note: the law was fitted" not in err, err
