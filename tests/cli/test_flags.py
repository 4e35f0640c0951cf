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
    ("tensor=1000003", "data x fsdp x tensor = 1000003 must equal the")])
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
