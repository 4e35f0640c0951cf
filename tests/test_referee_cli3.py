"""An outside referee's inputs to the command lines, run dirs, resume, finetune, export, sample and data
preparation that zoo's other tests do not use: each was misreported, accepted silently or ended in a traceback
before its fix."""

from __future__ import annotations

import shutil

import pytest


def test_an_empty_criticality_out_is_a_bad_command_line(tmp_path, monkeypatch, capsys):
    """`python -m zoo.criticality --out ""` (an unset shell variable) wrote criticality.json into the current folder,
    where every other command refuses an empty path in one line."""
    from zoo.cli import criticality

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        criticality.main(["--width", "8", "--depth", "2", "--seeds", "1", "--out", ""])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and len(err.splitlines()) == 1 and "--out" in err and "empty" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_refused_prepare_leaves_no_folders_behind(tmp_path, capsys):
    """`python -m zoo.data.prepare text ONE_CHARACTER --out a/b/c` is refused (its train split would hold no token)
    and removed c, but left the folders a and a/b it had made on the way, empty."""
    from zoo.cli import prepare

    (tmp_path / "one.txt").write_text("a")
    with pytest.raises(SystemExit) as stop:
        prepare.main(["text", str(tmp_path / "one.txt"), "--out", str(tmp_path / "a" / "b" / "c")])
    assert stop.value.code == 1 and "too small" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["one.txt"]


def test_a_prepare_never_reads_a_token_directory_as_text(tmp_path):
    """A token directory written inside its corpus folder (--out corpus/tokens) was read as text by the next prepare
    of the folder, silently: 1,700 bytes of text became 5,293 byte tokens, or 16,037 characters in a vocabulary of
    57 instead of 18. An --out inside the source folder, and a corpus holding a token directory, are one line."""
    from zoo.data.prepare import prepare

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("hello world this is a tiny corpus\n" * 50)
    with pytest.raises(ValueError, match="inside the source folder"):
        prepare("text", str(corpus), str(corpus / "tokens"), "char")
    assert [p.name for p in corpus.iterdir()] == ["a.txt"]
    assert prepare("text", str(corpus), str(tmp_path / "tokens"), "char") == {"train": 1530, "val": 170}
    shutil.move(tmp_path / "tokens", corpus / "tokens")
    with pytest.raises(ValueError, match="holds a token directory"):
        prepare("text", str(corpus), str(tmp_path / "again"), "byte")
    assert not (tmp_path / "again").exists()


def test_an_archive_that_is_no_tar_says_why_in_its_one_line(tmp_path):
    """An --data imagefolder:X.tar.gz that is no archive was 'corrupt or unreadable archive X: file could not be
    opened successfully:', the line a user sees ending at the colon (tarfile gives the reasons on the next lines)."""
    from zoo.data.imagefolder import load

    (tmp_path / "junk.tar.gz").write_text("junk\n")
    with pytest.raises(ValueError) as refused:
        load(str(tmp_path / "junk.tar.gz"), cache_dir=str(tmp_path / "cache"))
    line = str(refused.value)
    assert "\n" not in line and "not a gzip file" in line, line


@pytest.mark.parametrize("tool, flag", [("zoo.cli.coord_check", "--out"), ("zoo.cli.audit", "--json")])
def test_an_empty_output_path_is_refused_by_every_tool(tool, flag, capsys):
    """coord_check's --out and the audit's --json took '' (an unset shell variable) as the current folder, where the
    other tools refuse it in one line: they now take the same path_arg."""
    import importlib

    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(tool).parser().parse_args([flag, ""])
    assert exit_.value.code == 2
    assert f"argument {flag}: must not be empty" in capsys.readouterr().err


def test_cache_dir_off_decodes_each_time_and_writes_nothing(tmp_path, monkeypatch):
    """`--cache-dir off` turns the sweep's compile cache off, but train.py's (the decoded image sets') made a folder
    named 'off' in the current folder and cached there. 'off' now means no cache for both."""
    from PIL import Image

    from zoo.data.imagefolder import load

    for split in ("train", "test"):
        for cls in ("a", "b"):
            (tmp_path / "set" / split / cls).mkdir(parents=True)
            Image.new("RGB", (4, 4), (200 if cls == "a" else 10, 0, 0)).save(tmp_path / "set" / split / cls / "0.png")
    monkeypatch.chdir(tmp_path)
    data = load(str(tmp_path / "set"), cache_dir="off", stream=False)
    assert data.size("train") == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["set"]
