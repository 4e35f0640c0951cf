"""A run's data, recorded in its checkpoints, is compared with the data a resume, a fork, --init-from or a sample
reads: a text whose vocabulary changed, another tokenizer, a train split of another size or an image folder given a
class are refused or said in one line, before any array is read."""

from __future__ import annotations

import pytest
from PIL import Image

import zoo.data
from zoo.config import resolve
from zoo.train.loop import train


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


def test_a_resume_on_other_text_of_the_same_size_and_characters_is_refused(tmp_path, monkeypatch):
    """`--data text:corpus.txt` is read against the working folder: a resume from another folder whose corpus.txt
    has the same characters in another order tokenized as the run's and trained on (eval loss 2.4385 where the
    uninterrupted run ends at 2.4616), without a word. The checkpoint records a digest of the train split, and a
    resume on other examples of the same count is one line; the run's own text resumes; a fork onto another --data
    (other settings) is not held to it."""
    text = "the quick brown fox jumps over the lazy dog\n" * 40
    for folder, corpus in (("a", text), ("b", text[::-1])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "corpus.txt").write_text(corpus)
    cfg = resolve({"model": "gpt", "width": 64, "depth": 1, "steps": 2, "batch_size": 4, "eval_batch_size": 8,
                   "seq_len": 16, "data": "text:corpus.txt", "run_dir": str(tmp_path / "run")})
    monkeypatch.chdir(tmp_path / "a")
    train(cfg)
    (tmp_path / "run" / "summary.json").unlink()  # a resume at its last step reads the checkpoint
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(ValueError, match="--data text:corpus.txt is not the data .* trained on: its train split has "
                                         "as many examples but others"):
        train(cfg)
    monkeypatch.chdir(tmp_path / "a")
    assert train(cfg)["steps"] == 2


def test_the_digest_of_a_split_is_of_its_examples():
    """Dataset.digest: the same arrays give the same digest, one token changed or moved gives another, and a
    streamed set (whose examples are not read whole) gives none."""
    import numpy as np

    from zoo.data.dataset import Dataset
    from zoo.data.view import DataView

    def text(tokens):
        return Dataset("text", {"train": {"tokens": np.asarray(tokens, np.int32)}}, 5, (8,), "train", 8)

    tokens = np.arange(40) % 5
    assert text(tokens).digest("train") == text(tokens.copy()).digest("train")
    assert text(tokens).digest("train") != text(np.roll(tokens, 1)).digest("train")
    assert DataView.digest(text(tokens), "train") is None


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
                    "run's: char, 3): where its token table has this one's shape it is loaded, and its rows stand for "
                    "other tokens here")
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


def test_a_data_read_with_another_tokenizer_is_not_called_a_changed_text():
    """A fork or resume of a char run with --byte-level (or on a token directory of another tokenizer) was refused
    as 'its byte vocabulary of 256 tokens (the run's had 18) gives other ids; the text changed since the run:
    restore it', though the text had not changed: how it is read had. The line now names both tokenizers; an
    edited text keeps its line."""
    from types import SimpleNamespace

    from zoo.data.card import described
    from zoo.data.tokenizer import ByteTokenizer, CharTokenizer
    from zoo.train.load import same_data

    char = SimpleNamespace(tokenizer=CharTokenizer.fit(["hello world"]))
    saved = {"tokenizer": described(char)}
    with pytest.raises(ValueError) as refused:
        same_data(SimpleNamespace(tokenizer=ByteTokenizer()), "text:a.txt", "run")(saved)
    assert str(refused.value) == ("--data text:a.txt gives byte tokens (a vocabulary of 256), but run trained on char "
                                  "tokens (a vocabulary of 8): read the data as the run did, or train a new run on it")
    with pytest.raises(ValueError, match="the text changed since the run"):
        same_data(SimpleNamespace(tokenizer=CharTokenizer.fit(["hello world!"])), "text:a.txt", "run")(saved)
    same_data(char, "text:a.txt", "run")(saved)  # the same tokens pass


def test_a_resume_on_a_folder_given_a_class_since_the_run_is_refused_as_changed_data(tmp_path):
    """A class folder added since the run failed every checkpoint's read ('Requested shape (3, 32) is not compatible
    with the stored shape (2, 32)'), and the resume said no checkpoint could be read: move them away. The data card
    each checkpoint records is now compared before any array is read."""
    from zoo.data.card import record
    from zoo.train.load import same_data

    root = tmp_path / "set"
    for rel in ("train/a/0.png", "train/b/1.png", "test/a/2.png"):
        (root / rel).parent.mkdir(parents=True)
        Image.new("RGB", (4, 4), (200, 30, 60)).save(root / rel)
    meta = record(zoo.data.load(f"imagefolder:{root}", cache_dir="off"))
    same_data(zoo.data.load(f"imagefolder:{root}", cache_dir="off"), "imagefolder:set", "RUN")(meta)
    (root / "train/c").mkdir()  # a class added since the run
    Image.new("RGB", (4, 4), (200, 30, 60)).save(root / "train/c/3.png")
    grown = zoo.data.load(f"imagefolder:{root}", cache_dir="off")
    with pytest.raises(ValueError, match=r"imagefolder:set has 3 classes of examples of shape \(4, 4, 3\), but RUN "
                       r"trained on 2 of shape \(4, 4, 3\), which its checkpoints fit .* --init-from RUN"):
        same_data(grown, "imagefolder:set", "RUN")(meta)
