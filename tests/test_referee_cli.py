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


def test_export_under_a_file_is_refused_before_the_work(tmp_path, capsys):
    """--out under a file: the export loaded, folded and checked the run, then failed naming its temporary folder
    ('Not a directory: .../.sub.tmp-PID'); now one line naming --out and the file, before the run is read."""
    from zoo.cli.export import main

    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "no-run-read"), "--out", str(tmp_path / "afile" / "sub")])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and err.count("\n") == 1, err
    assert f"--out {tmp_path / 'afile' / 'sub'} cannot be written: {tmp_path / 'afile'} is a file, not a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
