"""Flags refused at parsing, in one line with exit status 2: an option without a name, seeds beyond any run, a mesh
training would refuse (also under --print-config); and --help grouped by the config's parts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_utils import ROOT, child_env, one_line_error

from zoo.cli import train as train_cli


@pytest.mark.parametrize("option", ["=", "=1", " =relu"])
def test_an_option_without_a_name_is_a_bad_command_line(capsys, option):
    """--model-opt =1 reached the model, whose line read "model 'mlp_resnet' has no option ; its options are ..."."""
    from zoo.cli.train import main

    with pytest.raises(SystemExit) as stop:
        main(["--model-opt", option, "--print-config"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "argument --model-opt: expected key=value with a key" in err, err


@pytest.mark.parametrize("tool", ["coord_check", "criticality"])
def test_seeds_of_a_diagnostic_are_bounded(capsys, tool):
    """--seeds 10^9: the coordinate check ran out of host memory (an unexpected MemoryError with a traceback file),
    the criticality scan crashed in XLA's CPU client (a C++ check failure, status 134). Now one line, at parsing."""
    import importlib

    main = importlib.import_module(f"zoo.cli.{tool}").main
    with pytest.raises(SystemExit) as stop:
        main(["--seeds", str(10**9)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1, err
    assert "argument --seeds: must be at most 1024" in err, err


@pytest.mark.parametrize("mesh, why", [
    ("data=x", "'data=x' needs an integer size"), ("rows=2", "unknown axis 'rows'"),
    ("tensor=0", "axis tensor must have a positive size, got 0"), ("data=1,data=1", "axis data is given twice"),
    ("tensor=1000003", "fsdp x tensor = 1000003 does not divide the")])
def test_print_config_refuses_a_mesh_training_would_refuse(mesh, why, capsys, monkeypatch):
    """`train.py --print-config --mesh <bad>` printed the config, the mesh refused only once training started: now
    its form is checked with the config (also in a config file) and its size against the devices here, each in
    one line; a mesh that fits any device count (data takes what the others leave) prints."""
    monkeypatch.delenv("JAX_COORDINATOR_ADDRESS", raising=False)
    assert why in one_line_error(train_cli.main, ["--print-config", "--mesh", mesh], capsys)
    train_cli.main(["--print-config", "--mesh", "fsdp=1,tensor=1"])
    assert "mesh: fsdp=1,tensor=1" in capsys.readouterr().out


def test_help_is_grouped_by_part():
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--help"], cwd=ROOT, env=child_env(),
                          capture_output=True, text=True)
    text = proc.stdout
    headings = [h for h in ("model:", "parametrization:", "optimizer:", "data:", "training loop:") if h in text]
    assert len(headings) == 5 and [text.index(h) for h in headings] == sorted(text.index(h) for h in headings)
    assert text.index("\n  --lr ") > text.index("optimizer:")
    assert text.index("\n  --seed ") > text.index("training loop:")


@pytest.mark.parametrize("tool, flag", [("coord_check", "--widths, --width"), ("criticality", "--width"),
                                        ("audit", "--widths")])
def test_a_size_a_tool_sets_itself_is_no_model_option(tmp_path, capsys, tool, flag):
    """--model-opt width=48: the coordinate check and the audit dropped it without a word (and measured at their own
    widths), the criticality scan met its own --width in an unexpected TypeError with a traceback file."""
    import importlib

    module = importlib.import_module(f"zoo.cli.{tool}")
    main = module.main
    out = {"audit": ["--json", str(tmp_path / "new" / "a.json")]}.get(tool, ["--out", str(tmp_path / "new")])
    if tool == "coord_check":  # --model-opt depth=D is the width sweep's depth (docs/diagnostics.md) unless a flag is
        assert "depth" not in module.sets(module.parser().parse_args(["--model-opt", "depth=2"]))
        assert module.sets(module.parser().parse_args(["--depth", "3"]))["depth"] == "--depth"
    with pytest.raises(SystemExit) as stop:
        main(["--model-opt", "width=48", *out])
    line = capsys.readouterr().err.strip()
    assert stop.value.code == (2 if tool in ("audit", "coord_check") else 1), stop.value.code  # their 1 is a FAIL
    assert line.startswith(f"error: --model-opt width=48: this command sets the width itself ({flag}); leave it "
                           "out") and "\n" not in line, line
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("argv, message", [
    (["--allow-import", ""], "argument --allow-import: expected MODULE:OBJECT"),
    (["--allow-import", "abc"], "argument --allow-import: expected MODULE:OBJECT"),
    (["--optimizer", "muon", "--ns-steps", "1000"], "--ns-steps must be in [1, 100]"),
    (["--run-dir", "runs/" + "x" * 300], "--run-dir cannot name a file: a name in it is 300 bytes long"),
    (["--param", "mup", "--param-opt", "bogus=1"], "plugin 'mup' has no option 'bogus'; its options (--param-opt K=V)"),
    (["--model-opt", "bogus=1"], "model 'mlp_resnet' has no option 'bogus'; its options (--model-opt K=V) are"),
    (["--model", "gpt", "--clip-norm", "none"], "argument --clip-norm: 'none' is not a value: leave the flag out"),
    (["--weight-decay", "Null"], "argument --weight-decay: 'Null' is not a value: leave the flag out"),
])
def test_flags_that_took_any_value_or_named_no_flag(capsys, argv, message):
    """--allow-import took any text, --ns-steps any count (each Newton-Schulz iteration is unrolled: 100000 compiled
    for ever), a 300-byte file name failed in the OS naming no flag, an unknown option named no flag, and
    --clip-norm none was the flag left out (gpt clipped at its recipe's 1.0)."""
    line = one_line_error(train_cli.main, [*argv, "--print-config"], capsys)
    assert message in line, line


def test_an_empty_policy_is_refused_not_read_as_none(tmp_path, capsys):
    from zoo.cli import sweep

    line = one_line_error(sweep.main, ["--policy", "", "--out", str(tmp_path / "s"), "--lrs", "1e-3"], capsys)
    assert "argument --policy: must not be empty" in line, line
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("name, taken", [("my_pkg.sub.mod:Cls.Inner", True), ("my-plugin:MyMuP", True),
                                         ("2d_plugin:MyMuP", True), ("módulo:Clase", True), ("", False),
                                         ("abc", False), ("a:", False), (":B", False), ("a b:C", False),
                                         ("a:1B", False)])
def test_allow_import_takes_what_param_imports(name, taken):
    """--allow-import checks MODULE:OBJECT's form, and takes every module name --param and --model import (a file
    my-plugin.py is `my-plugin:MyMuP`, which the first form check refused)."""
    import argparse

    from zoo.cli.flags import module_object

    if taken:
        assert module_object(name) == name
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            module_object(name)
