"""Referee pass 4 over the laws, the optimizers and the audit, at settings the other tests do not use: each test fails
without the fix it names."""

from __future__ import annotations

import dataclasses

import pytest

import zoo.param as P
from zoo import optim
from zoo.audit import ZooRun, audit
from zoo.optim import OptimConfig
from zoo.param.tags import Tag

MLP = {"in_shape": (8,), "num_classes": 4}


@pytest.mark.parametrize("text, message", [
    ("hidden: [0, 0.5\n", "cannot be read as YAML"),  # was: unexpected ParserError and a traceback file
    ("hidden: [0, 0.5, 1, 1]\nhidden: [0, 0, 1, 1]\n", "given twice"),  # was: the last one, silently
    ("hidden: [0, 0.5, 1, true]\n", "four numbers"),  # was: d = True read as 1
    ("hidden: 1\n", "four numbers"),  # was: TypeError (len of an int)
])
def test_an_abcd_file_that_is_no_table_is_one_line(tmp_path, text, message):
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        P.get("abcd", file=str(path))


def test_an_empty_abcd_file_path_is_refused():
    """file= with an empty path (an unset shell variable, --param-opt file=$RULES) was skipped: the run trained under
    SP's table (no muP rule on any kind) without a word."""
    with pytest.raises(ValueError, match="names no file"):
        P.get("abcd", file="")


def test_an_abcd_file_reads_exponents_as_numbers(tmp_path):
    """1e0 is a number, as in config files (YAML 1.1's safe_load read it as the string '1e0' and refused the row)."""
    path = tmp_path / "rules.json"
    path.write_text('{"hidden": [0, 0.5, 1e0, 1], "output": [1, 0, 0, 1]}')
    plugin = P.get("abcd", file=str(path))
    assert plugin.table_for("hidden") == (0, 0.5, 1.0, 1) and plugin.table_for("output") == (1, 0, 0, 1)
    assert plugin.table_for("input") == (0, 0, 0, 0)  # not given: SP's


def _unfreezes_input(cfg, plugin, params, horizon):
    """zoo's chain built as if the plugin froze the output layer only: LR and decay on the input layer."""
    return optim.build(cfg, dataclasses.replace(plugin, freeze="output"), params, horizon)


def test_the_audit_fails_a_frozen_kind_that_moves():
    """depth_mup with freeze=input,output (TP VI's experiments train only the blocks) under AdamW with decay, MLP-ResNet
    at widths 24 and 48, under a chain that ignores the input's freeze: it moves the input layer by lr (update RMS
    0.01) and decays it, and the audit passed it (its laws were the unfrozen ones: update m^0, shrink m^0, both met).
    Now a frozen kind's law is that it does not move: the input layer fails alone, the still readout passes."""
    plugin = P.get("depth_mup", freeze="input,output")
    run = ZooRun("mlp_resnet", plugin, OptimConfig("adamw", lr=1e-2, weight_decay=0.1), MLP, batch_size=8,
                 chain=_unfreezes_input)
    result = audit(run, (24, 48), depth=3)
    assert result.failures() == ["width embed/kernel: frozen: the plugin freezes it, yet it moves (update RMS or decay "
                                 "shrink up to 0.01)"]
    params = result.axes[0].params
    assert [c.passed for c in params["head/kernel"].checks if c.quantity == "frozen"] == [True]
    assert params["stack/blocks/w1/kernel"].passed  # trained: its own laws, no frozen check
    assert all(c.quantity != "frozen" for c in params["stack/blocks/w1/kernel"].checks)


@pytest.mark.parametrize("name", ["sp", "ntk", "mup", "mean_field", "depth_mup", "completep", "ntk_mup", "abcd",
                                  "critical"])
def test_zero_init_starts_readouts_and_queries_at_zero_under_every_plugin(name):
    """zero_init starts readouts and attention queries at 0 (TP-V) under every plugin; critical's own init (sigma_w /
    sqrt(fan_in) on every hidden matrix) skipped it for the queries: a GPT under critical with zero_init=true drew its
    query kernel at sigma_w / sqrt(fan_in) (0.16 at width 40) while its readout was 0."""
    opts = {"sigma_w": 1.0, "sigma_b": 0.0, "mu": 1.0} if name == "critical" else {}
    plugin, plain = P.get(name, zero_init=True, **opts), P.get(name, **opts)
    query, key, readout = (Tag("hidden", 40, 40, width_mult=2.5, role="query"),
                           Tag("hidden", 40, 40, width_mult=2.5, role="key"), Tag("output", 40, 7, width_mult=2.5))
    assert plugin.init_std(query, 0.25) == plugin.init_std(readout, 0.25) == 0.0
    assert plugin.init_std(key, 0.25) == plain.init_std(key, 0.25) > 0.0  # the rest keeps its init


def test_the_audit_measures_the_multipliers_of_a_zero_init_run():
    """muP allows a zero readout (zero_init, TP-V). The audit reads each multiplier's power from Euler's relation at
    the init, 0/0 at a zero readout, and a zero readout zeroes every other parameter's derivative too: mean_field with
    zero_init at widths 24 and 48 read its readout's m^-1 and its hidden matrices' m^-1/2 as m^0 and failed both
    (readout: multiplier and update +0.00 against -1; hidden: multiplier +0.00 against -0.50, effective init -0.03
    against -0.50). The powers are now read where zero weight matrices are drawn at their SP scale; the biases beside
    them keep their zeros (drawn too, the readout's bias read the kernel's multiplier, slope -0.92 against 0)."""
    run = ZooRun("mlp_resnet", P.get("mean_field", zero_init=True), OptimConfig("adam", lr=1e-2),
                 {**MLP, "bias": True}, batch_size=8)
    result = audit(run, (24, 48), depth=2)
    assert result.passed, result.failures()
    params = result.axes[0].params
    paths = ("head/kernel", "stack/blocks/w1/kernel", "head/bias", "stack/blocks/w1/bias")
    assert all(params[p].checks[0].quantity == "multiplier" for p in paths)
    assert [params[p].checks[0].measured for p in paths] == pytest.approx([-1.0, -0.5, 0.0, 0.0], abs=1e-4)


@pytest.mark.parametrize("kind", ["vector", "scalar"])
def test_a_multiplier_zoos_models_do_not_apply_is_refused(kind):
    """abcd with vector (or scalar) a = 1/2: zoo's models put no multiplier on biases, norm gains (vector) or the
    readout's bias (scalar), so the rule was silently absent; the audit of mlp_resnet at widths 24, 48 measured m^0 on
    embed/bias, w1/bias, norm gain and bias against the stated m^-1/2. Now zoo.models.create refuses it in one line."""
    from flax import nnx

    import zoo.models as M

    cfg = M.config("mlp_resnet", width=24, base_width=12, depth=2, in_shape=(8,), num_classes=4, bias=True)
    with pytest.raises(ValueError, match=f"{kind} a = 0.5, but mlp_resnet's biases and norm gains carry no"):
        M.create("mlp_resnet", cfg, P.get("abcd", **{kind: "0.5,0,0,1"}), nnx.Rngs(0))
    M.create("mlp_resnet", cfg, P.get("abcd", **{kind: "0,0.5,0,1"}), nnx.Rngs(0))  # a = 0: built


def test_a_run_records_an_abcd_files_exponents_not_its_path(tmp_path):
    """A run under `--param-opt file=rules.yaml` recorded the path: the same command after the file was edited
    resumed the run under other rules without a word, and its config.json no longer said which. The config now holds
    the file's exponents (the flags' kinds winning, as they do over the file) and no path: the edited file is other
    settings, refused in one line, and the run's own config rebuilds it with the file gone."""
    import json

    from cli_utils import SMALL, run_train

    rules = tmp_path / "rules.yaml"
    rules.write_text("hidden: [0, 0.5, 1, 1]\noutput: [0, 1, 1, 1]\n")
    run = tmp_path / "run"
    args = [*SMALL, "--param", "abcd", "--param-opt", f"file={rules}", "--param-opt", "input=0,0,0,1", "--steps", "2",
            "--run-dir", str(run)]
    done = run_train(args)
    assert done.returncode == 0, done.stderr
    options = json.loads((run / "config.json").read_text())["param"]["options"]
    assert options == {"input": [0, 0, 0, 1], "hidden": [0, 0.5, 1, 1], "output": [0, 1, 1, 1]}
    rules.write_text("hidden: [0, 0, 1, 1]\noutput: [0, 1, 1, 1]\n")
    edited = run_train(args)
    assert edited.returncode == 1 and "holds a run with other settings (param_opt" in edited.stderr, edited.stderr
    rules.unlink()
    again = run_train(["--config", str(run / "config.json"), "--run-dir", str(run)])
    assert again.returncode == 0, again.stderr
