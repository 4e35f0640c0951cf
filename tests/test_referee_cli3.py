"""An outside referee's inputs to the command lines, run dirs, resume, finetune, export, sample and data
preparation that zoo's other tests do not use: each was misreported, accepted silently or ended in a traceback
before its fix."""

from __future__ import annotations

import json
import shlex
import shutil

import pytest

from zoo.config import resolve
from zoo.train.hooks import Hook
from zoo.train.loop import train

TINY = {"model": "mlp_resnet", "width": 8, "depth": 1, "data": "synthetic:teacher", "batch_size": 8,
        "eval_batch_size": 64, "log_every": 2}


def test_a_resumed_runs_best_eval_counts_the_evals_before_its_start(tmp_path):
    """A run's summary keeps the best eval over the whole run, also when it was stopped and resumed: the best was
    kept in memory only, so a run resumed from step 6 of 12 (evals every 3 at lr 0.3, where the eval loss climbs
    5.36, 5.47, 6.80, 7.29) reported a best loss of 6.80 where the uninterrupted run's is 5.36. And what a run-start
    hook adds to the summary (the `critical` plugin's report) was missing from a resumed run's, and a fork's."""
    def cfg(run):
        return resolve({**TINY, "steps": 12, "eval_every": 3, "ckpt_every": 3, "keep": 4, "lr": 0.3,
                        "run_dir": str(run)})

    report = [Hook("report", lambda loop, step: loop.evals.extra.update(report={"at": step}), at_start=True)]
    whole = train(cfg(tmp_path / "whole"), report)
    shutil.copytree(tmp_path / "whole", tmp_path / "resumed")  # as if stopped after saving step 6
    for step in (12, 9):
        shutil.rmtree(tmp_path / "resumed" / "checkpoints" / str(step))
    (tmp_path / "resumed" / "summary.json").unlink()
    resumed = train(cfg(tmp_path / "resumed"), report)
    assert whole["best_eval"]["loss"] < whole["final_eval"]["loss"]  # the best is an eval before step 6
    assert resumed["best_eval"] == whole["best_eval"]
    assert resumed["final_eval"] == whole["final_eval"]
    assert resumed["report"] == whole["report"] == {"at": 0}
    fork = train(resolve({**TINY, "steps": 12, "eval_every": 3, "lr": 0.3, "run_dir": str(tmp_path / "fork"),
                          "fork_from": f"{tmp_path / 'whole'}:6"}), report)
    assert fork["report"] == {"at": 0}  # a fork starts at its source's step: its run-start report is the source's


def test_a_run_killed_after_its_last_eval_is_not_evaluated_twice(tmp_path):
    """A run killed after its last checkpoint and eval, before summary.json, resumes at its last step: it evaluated
    that step again and appended a second eval row of it to metrics.jsonl. The row written before the kill is kept
    as the summary's, and no step's eval appears twice."""
    cfg = resolve({**TINY, "steps": 4, "eval_every": 2, "ckpt_every": 2, "run_dir": str(tmp_path / "run")})
    whole = train(cfg)
    (tmp_path / "run" / "summary.json").unlink()
    resumed = train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "eval"] == [2, 4]
    assert resumed["final_eval"] == whole["final_eval"] and resumed["best_eval"] == whole["best_eval"]
    (tmp_path / "run" / "summary.json").unlink()
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["split"] == "eval"
    (tmp_path / "run" / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # killed before the last eval
    assert train(cfg)["final_eval"] == whole["final_eval"]


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


def test_a_text_whose_vocabulary_changed_since_the_run_is_refused(tmp_path):
    """A char-level text file edited after its run: replacing every 'w' by a 'Q' keeps 18 characters but shifts
    the ids of all that sort after 'Q' (a resume trained on them, losses 3.281 and 3.128 at steps 3 and 4 where the
    run's own text gives 3.326 and 3.343, and a sample decoded 'hello QstQ' with them, silently); one more
    character made every checkpoint 'unreadable'. The checkpoint records the tokenizer, and a resume or a sample
    with another one is one line; with the text restored the run samples again."""
    from zoo.sample import sample

    corpus, run = tmp_path / "corpus.txt", str(tmp_path / "run")
    original = "hello world this is a tiny corpus\n" * 50
    corpus.write_text(original)
    cfg = resolve({"model": "gpt", "width": 64, "depth": 1, "steps": 1, "batch_size": 4, "eval_batch_size": 8,
                   "seq_len": 16, "data": f"text:{corpus}", "run_dir": run})
    train(cfg)
    (tmp_path / "run" / "summary.json").unlink()  # a resume at its last step reads the checkpoint
    refused = "does not tokenize as when .* trained on it"
    for edited, count in ((original.replace("w", "Q"), "as many as the run's"), (original + "Z", "the run's had 18")):
        corpus.write_text(edited)
        with pytest.raises(ValueError, match=f"{refused}: its char vocabulary of .* \\({count}\\)"):
            train(cfg)
        assert len(sample(run, "hello", 3)) == 3  # a sample decodes with the run's recorded tokenizer, not the file's
    corpus.write_text(original)
    assert len(sample(run, "hello", 3)) == 3


def test_a_refused_prepare_leaves_no_folders_behind(tmp_path, capsys):
    """`python -m zoo.data.prepare text ONE_CHARACTER --out a/b/c` is refused (its train split would hold no token)
    and removed c, but left the folders a and a/b it had made on the way, empty."""
    from zoo.cli import prepare

    (tmp_path / "one.txt").write_text("a")
    with pytest.raises(SystemExit) as stop:
        prepare.main(["text", str(tmp_path / "one.txt"), "--out", str(tmp_path / "a" / "b" / "c")])
    assert stop.value.code == 1 and "too small" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["one.txt"]


def test_a_run_refused_after_taking_its_dir_leaves_no_folders_behind(tmp_path):
    """`--run-dir a/b/run` for a run refused once it held its dir (here --init-from a run with no checkpoint yet;
    also another model's run, a Ctrl-C during the compile) removed run but left a and a/b behind, empty."""
    (tmp_path / "source" / "checkpoints").mkdir(parents=True)
    cfg = resolve({**TINY, "steps": 2, "init_from": str(tmp_path / "source"),
                   "run_dir": str(tmp_path / "a" / "b" / "run")})
    with pytest.raises(FileNotFoundError, match="no checkpoint yet"):
        train(cfg)
    assert [p.name for p in tmp_path.iterdir()] == ["source"]


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


def test_the_commands_zoo_suggests_quote_their_paths(tmp_path):
    """The commands zoo prints for the user to run (finetune an export, fork a run, use a token directory) put
    paths in unquoted: with a space ('my export') the shell split them, and the command named other paths."""
    from zoo.train.load import check_not_export

    export = tmp_path / "my export"
    export.mkdir()
    (export / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError) as refused:
        check_not_export(export)
    command = shlex.split(str(refused.value).split("finetune it in a new run dir: ")[1])
    assert command[2:] == ["--config", str(export / "config.json"), "--init-from", str(export)], command


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


def test_a_text_runs_bits_are_named_by_what_its_tokens_are(tmp_path):
    """A text run's eval reported loss / ln 2 as 'bpc' whatever its tokens: bits per character only for a char
    tokenizer; a byte-level run's are bits per byte, and a BPE run's bits per token (several characters each)."""
    import math

    from zoo.train.compiled import BITS

    (tmp_path / "a.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 20)
    cfg = resolve({"model": "gpt", "width": 64, "depth": 1, "data": f"text:{tmp_path / 'a.txt'}", "byte_level": True,
                   "seq_len": 16, "batch_size": 4, "eval_batch_size": 4, "steps": 2, "warmup": 0, "eval_every": 2,
                   "run_dir": str(tmp_path / "run")})
    best = train(cfg)["best_eval"]
    assert set(best) == {"loss", "accuracy", "bits_per_byte"}, best
    assert best["bits_per_byte"] == pytest.approx(best["loss"] / math.log(2), rel=1e-6)
    assert BITS == {"char": "bpc", "byte": "bits_per_byte", "bpe": "bits_per_token"}


def test_init_from_a_run_on_text_tokenized_otherwise_says_so():
    """--init-from a char run on another corpus with a vocabulary of the same size loaded its embedding rows by shape
    without a word, each row now standing for another character; a line now says so. The same text, an image set
    (no tokenizer) and a checkpoint from before tokenizers were recorded say nothing."""
    from types import SimpleNamespace

    from zoo.data.tokenizer import CharTokenizer, describe
    from zoo.train.load import other_tokens_note

    abc, xyz = (SimpleNamespace(tokenizer=CharTokenizer.fit([text])) for text in ("abca", "xyzx"))
    note = other_tokens_note({"tokenizer": describe(abc.tokenizer)}, xyz, "src")
    assert note == ("note: --init-from src trained on text tokenized otherwise (a char vocabulary of 3 tokens; this "
                    "run's: char, 3): its token rows of the same shape are loaded and stand for other tokens here")
    assert other_tokens_note({"tokenizer": describe(abc.tokenizer)}, abc, "src") is None
    assert other_tokens_note({"tokenizer": describe(abc.tokenizer)}, SimpleNamespace(tokenizer=None), "src") is None
    assert other_tokens_note({}, xyz, "src") is None


def test_a_resume_on_a_train_split_of_another_size_says_so():
    """Images or classes added to a folder (or text appended) since a run saved: the resume drew its batches as a
    permutation of the new size, other examples than an uninterrupted run's, without a word. The checkpoint records
    the train split's size, and a resume on another size says so in one line; the same size, and checkpoints from
    before the size was recorded, say nothing."""
    from types import SimpleNamespace

    from zoo.train.load import changed_data_note

    data = SimpleNamespace(size=lambda split: {"train": 120}[split])
    assert changed_data_note({"train_examples": 100, "step": 6}, data, "run") == (
        "note: the train split has 120 examples now and had 100 when run saved step 6: the data changed, and the "
        "batches from here differ from an uninterrupted run's")
    assert changed_data_note({"train_examples": 120, "step": 6}, data, "run") is None
    assert changed_data_note({"step": 6}, data, "run") is None


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
