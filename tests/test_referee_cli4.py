"""An outside referee's inputs to the command lines, run dirs, checkpoints and data preparation that zoo's other
tests do not use: each was accepted silently, misreported or ended in a traceback before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_utils import one_line_error

from zoo.cli import train as train_cli


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


def test_a_config_file_with_a_bad_mesh_is_refused(tmp_path, capsys):
    file = tmp_path / "run.yaml"
    file.write_text("loop: {mesh: 'fsdp=two'}\n")
    argv = ["--print-config", "--config", str(file)]
    assert "'fsdp=two' needs an integer size" in one_line_error(train_cli.main, argv, capsys)


@pytest.fixture(scope="module")
def zero_run(tmp_path_factory) -> Path:
    """A tiny run whose logits are 0: muP's zero_init with the output frozen (TP VI's depth runs freeze it)."""
    from zoo.config import resolve
    from zoo.train.loop import train

    run = tmp_path_factory.mktemp("zero") / "run"
    train(resolve({"model": "mlp_resnet", "width": 8, "depth": 1, "data": "synthetic:teacher", "batch_size": 8,
                   "eval_batch_size": 16, "steps": 2, "param": "mup",
                   "param_opt": {"zero_init": True, "freeze": "output"}, "run_dir": str(run)}))
    return run


def test_a_run_whose_logits_are_zero_exports(zero_run, tmp_path):
    """A run under zero_init with its output frozen has logits 0: the fold keeps them 0 exactly, but the check
    divided by their norm, 0 / 0 = nan, and refused the export ('differ from the run's by nan'). An --out that is
    a file is named as one (it read 'not an empty directory')."""
    from zoo.export import export

    run = zero_run
    lines: list[str] = []
    export(run, tmp_path / "sp", echo=lines.append)
    assert "logits agree to 0 (relative, f32)" in lines[0] and (tmp_path / "sp" / "model.safetensors").is_file()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="file is a file, not a directory"):
        export(run, tmp_path / "file")


def test_an_empty_config_or_fork_run_dir_is_refused(tmp_path, capsys, monkeypatch):
    """`train.py --config ""` (an unset shell variable) trained with no config file at all, silently, into the
    default run dir; `--fork-from :3` (the same, before a step) looked for the run in the current folder. Both are
    one line now, and nothing is written."""
    monkeypatch.chdir(tmp_path)
    line = one_line_error(train_cli.main, ["--config", "", "--steps", "1"], capsys)
    assert "argument --config: must not be empty" in line
    tiny = ["--width", "8", "--depth", "1", "--data", "synthetic:teacher", "--batch-size", "8", "--steps", "5"]
    line = one_line_error(train_cli.main, [*tiny, "--fork-from", ":3", "--run-dir", "fork"], capsys)
    assert line == "error: --fork-from :3 names no run dir before its step; give RUN_DIR:3"
    assert list(tmp_path.iterdir()) == []


SIGTERMED = """
import os, signal, sys
from zoo.data import prepare
from zoo.config import resolve
from zoo.errors import Stopped
from zoo.export import export, sp_form
from zoo.train import loop

def terminated(real):
    def call(*args):
        out = real(*args)  # its files half-written
        os.kill(os.getpid(), signal.SIGTERM)
        return out
    return call

tmp = sys.argv[1]
prepare.encode_to = terminated(prepare.encode_to)
sp_form.save_safetensors = terminated(sp_form.save_safetensors)
loop.restore_or_init = terminated(loop.restore_or_init)  # before the compile
run = resolve({"model": "mlp_resnet", "width": 8, "depth": 1, "data": "synthetic:teacher", "batch_size": 8,
               "steps": 2, "run_dir": tmp + "/new/run"})
for write, args in ((prepare.prepare, ("text", tmp + "/a.txt", tmp + "/new/tokens", "char")),
                    (export, (sys.argv[2], tmp + "/new/export")), (loop.train, (run,))):
    try:
        write(*args)
    except Stopped as stop:  # the boundary says its line and exits 128 + its signal
        print(stop.signum, stop.line)
"""


def test_sigterm_during_a_prepare_an_export_or_a_compile_leaves_nothing_half_written(zero_run, tmp_path):
    """SIGTERM (a job scheduler's stop) during a prepare, an export or a run's compile ended the process at once,
    as Python does by default: the prepare's --out stayed behind with a half-written all.bin.partial (and the
    folders made for it), the export's temporary folder beside --out, the run dir made for a run that never
    trained (its .lock and an empty checkpoints/). All now stop as after Ctrl-C, cleaning up; the boundary says
    one line and exits 143 (128 + SIGTERM)."""
    import subprocess
    import sys

    from cli_utils import ROOT, child_env

    (tmp_path / "a.txt").write_text("hello world this is a tiny corpus\n" * 50)
    proc = subprocess.run([sys.executable, "-c", SIGTERMED, str(tmp_path), str(zero_run)], cwd=ROOT, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    from zoo.train.loop import BETWEEN_STEPS

    said = proc.stdout.splitlines()[-3:]
    assert proc.returncode == 0 and said == ["15 stopped by SIGTERM; nothing half-written was left"] * 2 + [
        f"15 {BETWEEN_STEPS}"], proc.stdout + proc.stderr
    assert not (tmp_path / "new").exists()


def test_the_default_prompt_outside_the_vocabulary_is_named():
    """`python -m zoo.sample RUN` with no --prompt, on a run whose characters hold no newline (synthetic:text, a
    corpus of one line), said 'characters not in the vocabulary: '\\n'', a prompt the user never gave. The line now
    names the default and asks for a --prompt; a vocabulary with a newline takes the default as before."""
    from types import SimpleNamespace

    from zoo.data.tokenizer import CharTokenizer
    from zoo.sample import encode_prompt

    one_line = SimpleNamespace(encode=CharTokenizer.fit(["abc"]).encode)
    with pytest.raises(ValueError, match="this run's vocabulary has no newline, the default --prompt: give one"):
        encode_prompt(one_line, None)
    assert encode_prompt(one_line, "ba").tolist() == [1, 0]
    lines = SimpleNamespace(encode=CharTokenizer.fit(["a\nb"]).encode)
    assert encode_prompt(lines, None).tolist() == [0]
