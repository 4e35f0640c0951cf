"""An outside referee's inputs that zoo's other tests do not use: each was accepted, or failed in a line that named
neither the flag nor what is allowed, before its fix."""

from __future__ import annotations

import pytest

from zoo.data import tokenizer
from zoo.train import distributed
from zoo.train.load import parse_run_spec


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


def test_the_hosts_out_of_memory_is_the_out_of_memory_line():
    """A host allocation beyond the machine (numpy's MemoryError, or Python's bare one) is said as XLA's is: the
    size where it is known, never 'unexpected MemoryError'."""
    from numpy.exceptions import AxisError  # an error that is not about memory

    from zoo.errors import out_of_memory

    numpy_error = type("_ArrayMemoryError", (MemoryError,), {})(
        "Unable to allocate 72.8 TiB for an array with shape (1000000, 10000000) and data type float64")
    assert out_of_memory(numpy_error) == "72.8 TiB"
    assert out_of_memory(MemoryError()) == "memory"
    assert out_of_memory(AxisError(3, 2)) is None
