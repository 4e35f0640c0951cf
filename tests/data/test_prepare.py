"""`python -m zoo.data.prepare`: a token directory written a chunk at a time from a corpus (links followed, no token
directory read as text), one writer per --out, and a refused, full-disk or killed prepare leaving no folder or half
file behind."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from zoo.cli.prepare import main as prepare_main


def test_a_refused_prepare_leaves_no_folders_behind(tmp_path, capsys):
    """`python -m zoo.data.prepare text TWO_CHARACTERS --out a/b/c` is refused (each split would hold one token, no
    window: the folder was written, and every run on it refused) and removed c, but left the folders a and a/b it
    had made on the way, empty. One character repeated is a vocabulary of one, refused the same way."""
    from zoo.cli import prepare

    (tmp_path / "two.txt").write_text("ab")
    (tmp_path / "same.txt").write_text("a" * 5000)
    for name, message in (("two.txt", "two.txt is too small: its train and val splits would hold fewer than the 2 "
                                      "tokens a window needs (1 train, 1 val)"),
                          ("same.txt", "same.txt under --tokenizer char has 1 token in its vocabulary")):
        with pytest.raises(SystemExit) as stop:
            prepare.main(["text", str(tmp_path / name), "--out", str(tmp_path / "a" / "b" / "c")])
        assert stop.value.code == 1 and message in capsys.readouterr().err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["same.txt", "two.txt"]


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


def test_two_prepares_into_one_out_are_locked_against_each_other(tmp_path):
    """Two `prepare` runs writing into one --out at once interleaved their train.bin, val.bin and meta.json (each
    removes the other's partial files when it starts). --out is now locked while written, with the lock run dirs
    and sweeps take: the second is refused in one line naming the first, and writes nothing; the lock left by an
    earlier prepare is no obstacle."""
    from zoo.data.prepare import prepare
    from zoo.errors import RunLocked
    from zoo.train.lock import claim

    (tmp_path / "a.txt").write_text("hello world this is a tiny corpus\n" * 50)
    out = tmp_path / "tokens"
    with claim(out, what="prepare", flag="--out"):  # a prepare writing `out` now
        (out / "train.bin").write_bytes(b"first")
        with pytest.raises(RunLocked, match=r"tokens is in use by another prepare \(pid \d+ .*pass another --out"):
            prepare("text", str(tmp_path / "a.txt"), str(out), "char")
        assert sorted(p.name for p in out.iterdir()) == [".lock", "train.bin"]
        assert (out / "train.bin").read_bytes() == b"first"
    assert prepare("text", str(tmp_path / "a.txt"), str(out), "char") == {"train": 1530, "val": 170}
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "train.bin", "val.bin"]  # no lock left in it
    with pytest.raises(ValueError, match="already holds a token directory"):
        prepare("text", str(tmp_path / "a.txt"), str(out), "byte")
    (tmp_path / "empty").mkdir()
    (tmp_path / "one.txt").write_text("ab")
    with pytest.raises(ValueError, match="too small"):
        prepare("text", str(tmp_path / "one.txt"), str(tmp_path / "empty"), "char")
    assert list((tmp_path / "empty").iterdir()) == []  # a refused prepare leaves a folder that was there as it was


def test_a_prepare_killed_while_writing_its_meta_can_be_rerun(tmp_path):
    """A prepare SIGKILLed while meta.json was being written (atomically, through .meta.json.XXXX.tmp) left that
    temporary in --out, and the rerun of the same command was refused: '--out holds other files
    (.meta.json.k2j8.tmp)'. A prepare's own temporary is now one of the partial files a rerun removes."""
    from zoo.data.prepare import prepare

    (tmp_path / "a.txt").write_text("hello world this is a tiny corpus\n" * 50)
    out = tmp_path / "tokens"
    out.mkdir()
    for name in ("all.bin.partial", ".meta.json.k2j8.tmp", ".lock"):
        (out / name).write_text("x")
    assert prepare("text", str(tmp_path / "a.txt"), str(out), "char") == {"train": 1530, "val": 170}
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "train.bin", "val.bin"]


def test_prepare_refuses_a_data_dir_a_text_source_does_not_read(tmp_path, capsys):
    """`prepare text FILE --data-dir D` wrote the token directory and ignored --data-dir (tfds's data dir) without
    a word, as train.py refuses a setting the run does not read; now a bad command line (exit 2), nothing written."""
    from zoo.cli import prepare

    (tmp_path / "a.txt").write_text("hello world\n" * 20)
    with pytest.raises(SystemExit) as stop:
        prepare.main(["text", str(tmp_path / "a.txt"), "--out", str(tmp_path / "t"), "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and len(err.splitlines()) == 1 and "--data-dir" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_a_full_disk_during_a_prepare_names_the_file_and_leaves_no_out(tmp_path, monkeypatch, capsys):
    """A write error names no file, so a prepare that ran out of space said 'no space left on the device writing .
    (79,107 MB free)', the free space of the working folder's disk, not of --out's."""
    import errno

    from zoo.cli.prepare import main
    from zoo.data import prepare

    class FullDisk(prepare.ByteTokenizer):
        def encode(self, text: str) -> np.ndarray:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(prepare, "ByteTokenizer", FullDisk)
    corpus, out = tmp_path / "corpus.txt", tmp_path / "tokens"
    corpus.write_text("some text\n" * 50)
    with pytest.raises(SystemExit) as stop:
        main(["text", str(corpus), "--out", str(out), "--tokenizer", "byte"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 1 and err.startswith(f"error: no space left on the device writing {out}/all.bin.partial")
    assert not out.exists()


def test_a_prepare_reads_a_linked_folder_of_the_corpus(tmp_path):
    """Path.rglob follows no links either (Python 3.11): a folder of the corpus linked in from elsewhere was left
    out of the token directory without a word."""
    from zoo.data.prepare import text_files

    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    (corpus / "a").mkdir(parents=True)
    elsewhere.mkdir()
    (corpus / "a" / "one.txt").write_text("one\n")
    (elsewhere / "two.txt").write_text("two\n")
    (corpus / "b").symlink_to(elsewhere, target_is_directory=True)
    (corpus / "a" / "up").symlink_to(corpus, target_is_directory=True)
    assert text_files(corpus) == [corpus / "a" / "one.txt", corpus / "b" / "two.txt"]


def test_a_prepare_reads_a_file_without_line_ends_a_chunk_at_a_time(tmp_path, monkeypatch):
    """Each chunk ran on to the next line end: a file without line ends was read whole at once (the rest of the
    line after the first chunk), so memory grew with the file. A chunk is now at most twice CHUNK characters."""
    from zoo.data import prepare

    monkeypatch.setattr(prepare, "CHUNK", 10)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("x" * 95 + "\nshort\n" + "y" * 12)
    chunks = list(prepare.read_chunks([corpus], "strict"))
    assert "".join(chunks) == corpus.read_text() and max(map(len, chunks)) == 20
    assert "x" * 15 + "\n" in chunks  # a chunk still runs on to its line end when that is near


def test_a_refused_prepare_leaves_no_out(tmp_path, capsys):
    """An unprepared tfds set is refused before --out is made; a tokenizer that fails on the corpus (a BPE smaller
    than its characters) removes the --out it made."""
    (tmp_path / "corpus.txt").write_text("hello world, a small corpus\n" * 20)
    cases = [(["tfds", "lm1b", "--data-dir", str(tmp_path)], "'lm1b' is not prepared"),
             (["text", str(tmp_path / "corpus.txt"), "--tokenizer", "bpe:265"],
              "could not train a BPE of size 265: the corpus has 15 characters, so it needs at least 275 tokens")]
    for argv, expected in cases:
        out = tmp_path / "out"
        with pytest.raises(SystemExit) as e:
            prepare_main([*argv, "--out", str(out)])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert e.value.code == 1 and len(err) == 1 and expected in err[0], err
        assert not out.exists()


def test_prepare_refuses_an_empty_corpus_and_a_folder_of_other_files(tmp_path, capsys):
    """An empty corpus, and an --out that holds other files (a run dir), are one line; nothing is written or left in
    either. A BPE smaller than asked says so."""
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "corpus.txt").write_text("hello world, a small corpus\n" * 20)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    cases = [(["text", str(tmp_path / "empty.txt"), "--out", str(tmp_path / "out")], "is empty"),
             (["text", str(tmp_path / "corpus.txt"), "--out", str(run)], "holds other files (config.json)")]
    for argv, expected in cases:
        with pytest.raises(SystemExit) as e:
            prepare_main(argv)
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert e.value.code == 1 and len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "out").exists() and sorted(p.name for p in run.iterdir()) == ["config.json"]
    prepare_main(["text", str(tmp_path / "corpus.txt"), "--out", str(tmp_path / "bpe"), "--tokenizer", "bpe:5000"])
    said = capsys.readouterr().out
    assert "fewer than the 5,000 asked" in said and "a vocabulary of" in said, said
