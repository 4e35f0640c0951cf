"""An outside referee's inputs (round 8) to the command lines, run dirs, checkpoints, sampling and export that zoo's
other tests do not use: each was accepted silently, misreported or ended in a traceback before its fix."""

from __future__ import annotations

import pytest
from cli_utils import one_line_error

from zoo.cli import export as export_cli
from zoo.cli import sample as sample_cli
from zoo.cli import sweep as sweep_cli
from zoo.cli import train as train_cli


@pytest.mark.parametrize("argv", [
    ["--lr", "\u0661"],  # Arabic-Indic one: float() reads it as 1.0
    ["--lr", "\u0663.\u0665"],  # 3.5 in Arabic-Indic digits
    ["--lr", "1e\u0663"],  # an exponent in Arabic-Indic digits: 1000
    ["--width", "\uff13\uff12"],  # full-width 32
    ["--seed", "\u0967"],  # Devanagari one
    ["--lr", "1_0"],  # 10 to Python
    ["--model-opt", "activation=relu", "--model-opt", "depth=\u0663"],
    ["--param", "depth_mup", "--param-opt", "alpha=\u0661"],
])
def test_numbers_not_written_in_ascii_are_refused(argv, capsys, tmp_path, monkeypatch):
    """int() and float() read any Unicode digit and underscores: `--lr ١` trained at LR 1 without a word. A number
    is ASCII digits, sign, point and exponent, in flags and in model and plugin options alike."""
    monkeypatch.chdir(tmp_path)
    line = one_line_error(train_cli.main, ["--print-config", *argv], capsys)
    assert "must be" in line and repr(argv[-1].split("=")[-1]) in line, line


def test_ascii_numbers_still_read(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train_cli.main(["--print-config", "--lr", "+3e-3", "--width", " 32", "--param", "depth_mup",
                    "--param-opt", "alpha=1.0"])
    out = capsys.readouterr().out
    assert "lr: 0.003" in out and "width: 32" in out


@pytest.mark.parametrize("main, argv", [
    (sample_cli.main, ["runs/none", "--step", "\u0661\u0660"]),
    (export_cli.main, ["runs/none", "--out", "x", "--step", "\u0661"]),
    (export_cli.main, ["runs/none", "--out", "x", "--step", "-1"]),
    (sweep_cli.main, ["--out", "x", "--lrs", "2^-\u0669"]),
    (sweep_cli.main, ["--out", "x", "--lrs", "1e-3", "--widths", "\u0663\u0662"]),
    (train_cli.main, ["--num-processes", "\u0662"]),
])
def test_other_numeric_flags_refuse_non_ascii_digits(main, argv, capsys, tmp_path, monkeypatch):
    """`--step ١٠` sampled step 10; a sweep's `--lrs 2^-٩` swept 2^-9: every numeric flag takes ASCII numbers."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "\n" not in err and f"argument {argv[-2]}" in err, err


@pytest.mark.parametrize("argv, both", [
    (["--model-opt", "dtype=bfloat16", "--precision", "f32"], ("dtype=bfloat16", "--precision f32")),
    (["--model-opt", "dtype=bfloat16"], ("dtype=bfloat16", "--precision f32")),
    (["--model-opt", "dtype=float32", "--precision", "bf16"], ("dtype=float32", "--precision bf16")),
    (["--model", "gpt", "--model-opt", "dtype=float16", "--precision", "bf16"], ("dtype=float16", "--precision bf16")),
    (["--remat", "block", "--model-opt", "remat=false"], ("remat=false", "--remat block")),
])
def test_a_model_dtype_or_remat_that_contradicts_the_loop_flags_is_refused(argv, both, capsys, tmp_path, monkeypatch):
    """`--model-opt dtype=bfloat16 --precision f32` trained in bf16 (the option won over the flag, and the run
    recorded f32): the flags set these options, and an option that says otherwise is refused naming both."""
    monkeypatch.chdir(tmp_path)
    line = one_line_error(train_cli.main, ["--print-config", *argv], capsys)
    assert all(part in line for part in both), line


def test_the_same_contradiction_is_refused_by_the_sweep_and_the_audit(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from zoo.cli import audit as audit_cli

    for main, argv in ((sweep_cli.main, ["--out", "x", "--lrs", "1e-3"]), (audit_cli.main, [])):
        line = one_line_error(main, [*argv, "--model-opt", "dtype=bfloat16", "--precision", "f32"], capsys)
        assert "--model-opt dtype=bfloat16 contradicts --precision f32" in line, line


def test_model_options_that_agree_with_the_loop_flags_are_taken(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train_cli.main(["--print-config", "--model-opt", "dtype=bfloat16", "--precision", "bf16", "--remat", "block",
                    "--model-opt", "remat=true"])
    out = capsys.readouterr().out
    assert "precision: bf16" in out and "remat: block" in out


def test_a_remat_option_without_remat_given_is_taken():
    """The sweeps and the audit have no --remat: the model option is how they recompute blocks (the same losses),
    so it is refused only against a --remat given; --precision, which changes every number, always counts."""
    from zoo.cli.sweep import run_config

    cfg = run_config(sweep_cli.parser().parse_args(["--out", "x", "--lrs", "1e-3", "--model-opt", "remat=true"]))
    assert cfg.model.options == {"remat": "true"} and cfg.loop.remat == "none"


def test_the_program_computes_in_the_precision_the_run_records():
    """What setup gives the model: --precision bf16's dtype, as config.json records it."""
    from zoo.config import resolve
    from zoo.train.setup import _model_overrides

    class Data:
        in_shape, num_classes, seq_len = (8,), 4, None

    cfg = resolve({"precision": "bf16", "remat": "block", "width": 8, "depth": 1})
    over = _model_overrides(cfg, Data())
    assert over["dtype"] == "bfloat16" and over["remat"] is True


@pytest.mark.parametrize("text, want", [
    ("steps: 010\n", 10),  # YAML 1.1: octal 8, where --steps 010 is 10
    ("steps: +12\n", 12), ("lr: 1e-3\n", 1e-3), ("lr: +.5\n", 0.5), ("lr: 3.\n", 3.0),
    ("steps: 1:30\n", "'1:30'"),  # YAML 1.1: base 60, 90
    ("width: 0x40\n", "'0x40'"), ("width: 0b101\n", "'0b101'"), ("steps: 1_000\n", "'1_000'"),
    ("lr: 1_0.5\n", "'1_0.5'"),
])
def test_config_file_numbers_read_as_typed_on_the_command_line(text, want, tmp_path, capsys, monkeypatch):
    """A YAML config file read `steps: 010` as 8 and `steps: 1:30` as 90 (YAML 1.1's octal and base 60), `width:
    0x40` as 64 and `1_000` as 1000: numbers in a file now read as the same text on the command line does, and the
    other forms are refused in one line."""
    monkeypatch.chdir(tmp_path)
    from zoo.config import read_file

    (tmp_path / "run.yaml").write_text(text)
    if isinstance(want, str):
        line = one_line_error(train_cli.main, ["--print-config", "--config", str(tmp_path / "run.yaml")], capsys)
        assert f"must be an integer, got {want}" in line or f"must be a number, got {want}" in line, line
    else:
        assert list(read_file(str(tmp_path / "run.yaml")).values()) == [want]


def test_a_run_dir_under_the_home_folder_in_a_config_file(tmp_path, monkeypatch, capsys):
    """`run_dir: ~/runs/a` in a config file (or a quoted '~/runs/a') trained into ./~/runs/a, where the data paths
    of the same file read ~ as the home folder: every path setting and path flag reads it so."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "run.yaml").write_text("run_dir: ~/runs/a\ninit_from: ~/runs/b\n")
    train_cli.main(["--print-config", "--config", "~/../run.yaml"])
    out = capsys.readouterr().out
    assert f"run_dir: {tmp_path}/home/runs/a" in out and f"init_from: {tmp_path}/home/runs/b" in out, out


def test_the_audit_refuses_an_empty_run_dir(capsys, tmp_path, monkeypatch):
    """`python -m zoo.audit "$RUN"` with RUN unset audited the default model instead (the empty run dir read as none
    given), printing PASS for a run it never looked at."""
    monkeypatch.chdir(tmp_path)
    from zoo.cli import audit as audit_cli

    with pytest.raises(SystemExit) as stop:
        audit_cli.main([""])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "argument run_dir: must not be empty" in err, err
