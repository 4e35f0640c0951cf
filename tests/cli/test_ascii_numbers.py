"""Numbers a user types are ASCII everywhere zoo reads one from text: Python's int() and float() also read any
Unicode digit ('١', Arabic-Indic one; '３', full-width three) and underscores ('1_0' is 10). Every flag and
option of the command lines refuses them (zoo.schema.to_int / to_float), and so do the readers below them, which a
script or an environment reaches."""

from __future__ import annotations

import pytest
from cli_utils import one_line_error

import zoo.param
from zoo.cli import export as export_cli
from zoo.cli import sample as sample_cli
from zoo.cli import sweep as sweep_cli
from zoo.cli import train as train_cli
from zoo.data import tokenizer
from zoo.sweeps.grid import parse_ints, parse_lrs
from zoo.train import distributed
from zoo.train.load import parse_run_spec
from zoo.train.mesh import given_axes


@pytest.mark.parametrize("text", ["2^-٣", "١e-3", "-12:-٤:1", "-12:-4:١", "1_0e-3"])
def test_learning_rates_in_other_digits_are_refused(text):
    with pytest.raises(ValueError, match="cannot read learning rates"):
        parse_lrs(text)


def test_ascii_learning_rates_and_widths_still_read():
    assert parse_lrs("2^-12:2^-10:1") == [2.0**-12, 2.0**-11, 2.0**-10]
    assert parse_lrs(" 1e-3, 2^-8") == [1e-3, 2.0**-8]
    assert parse_ints(" 64, 128", "--widths") == [64, 128]


@pytest.mark.parametrize("text", ["٣٢", "３２", "6_4"])
def test_widths_in_other_digits_are_refused(text):
    with pytest.raises(ValueError, match="--widths must be a comma list of integers"):
        parse_ints(text, "--widths")


def test_a_mesh_size_in_other_digits_is_refused():
    assert given_axes("data= 2,tensor=1") == {"data": 2, "tensor": 1}
    with pytest.raises(ValueError, match="needs an integer size"):
        given_axes("data=١")


@pytest.mark.parametrize("var,value", [("JAX_NUM_PROCESSES", "٢"), ("JAX_PROCESS_ID", "１"),
                                       ("ZOO_COORDINATOR_TIMEOUT", "٣٠")])
def test_multi_host_environment_numbers_in_other_digits_are_refused(monkeypatch, var, value):
    """The JAX_* variables of a multi-host launch: '٢' processes read as 2 and went on to wait for a coordinator."""
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "localhost:1")
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=f"{var}=.* is not"):
        distributed.initialize()


@pytest.mark.parametrize("plugin,options", [("completep", {"gamma": "٠.٥"}), ("abcd", {"hidden": "0,٠.٥,1,1"}),
                                            ("critical", {"sigma_w": "١.٥"}), ("completep", {"gamma": "0_5"})])
def test_plugin_options_in_other_digits_are_refused(plugin, options):
    """--param-opt gamma=٠.٥ (Arabic-Indic 0.5) gave completep gamma 0.5: options without a default type, abcd's
    exponent lists and critical's sigmas read them with float()."""
    with pytest.raises(ValueError, match="must be a number|need four numbers"):
        zoo.param.get(plugin, **options)


def test_plugin_options_in_ascii_still_read():
    assert zoo.param.get("completep", gamma="0.5").gamma == 0.5
    assert zoo.param.get("abcd", hidden="0, 0.5,1,1").hidden == (0.0, 0.5, 1.0, 1.0)
    assert zoo.param.get("critical", sigma_w=" 1.5").sigma_w == 1.5


@pytest.mark.parametrize("number", ["²", "٢", "1²"])
def test_digit_like_characters_are_not_numbers(tmp_path, number):
    """str.isdigit takes '²' (and '٢'), which int() refuses: a fork step, a coordinator port and a BPE size
    written so failed with 'invalid literal for int() with base 10', naming no flag."""
    with pytest.raises(ValueError, match=f"--fork-from .*'{number}' is not a step"):
        parse_run_spec(f"{tmp_path}:{number}")
    with pytest.raises(ValueError, match="--coordinator must be HOST:PORT with a port in 1..65535"):
        distributed.initialize(f"127.0.0.1:{number}", 2, 1)
    with pytest.raises(ValueError, match="unknown tokenizer"):
        tokenizer.parse(f"bpe:{number}")


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
