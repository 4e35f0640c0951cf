"""Tokenizers, `python -m zoo.data.prepare` and `tokens:DIR` (in memory and memory-mapped)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from cli_utils import ROOT

import zoo.data
from zoo.cli.prepare import main as prepare_main
from zoo.data import prepare, tokenizer
from zoo.data.tokenizer import BPETokenizer, ByteTokenizer, CharTokenizer

CORPUS = "".join(f"{i} the quick brown fox jumps over the lazy dog; é ü\n" for i in range(300))  # 16 kB


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(CORPUS, encoding="utf-8")
    return path


def _all_tokens(ds: zoo.data.Dataset) -> np.ndarray:
    return np.concatenate([ds.splits["train"]["tokens"], ds.splits["val"]["tokens"]])


def test_tokenizers_round_trip_and_rebuild_from_meta(tmp_path):
    text = "Hello  wörld\n\n\ttabs 日本 12345\r\n"
    char = CharTokenizer.fit([text])
    assert char.chars == sorted(set(text)) and char.decode(char.encode(text)) == text
    assert char.encode("lo").tolist() == [char.chars.index("l"), char.chars.index("o")]
    with pytest.raises(ValueError, match="not in the vocabulary: 'Zz'"):
        char.encode("zoZ")
    byte = ByteTokenizer()
    assert byte.encode(text).tolist() == list(text.encode()) and byte.decode(byte.encode(text)) == text
    raw = b"caf\xe9 \xff\n"  # not UTF-8: read with surrogateescape, the bytes come back as they were
    assert byte.encode(raw.decode("utf-8", "surrogateescape")).tolist() == list(raw)
    bpe = BPETokenizer.fit(iter(CORPUS.splitlines()), 400)
    assert 300 < bpe.vocab_size <= 400  # 3 specials, 256 bytes, the newline, 40 characters, and merges
    unseen = "Zebra ☃ 北京\n  x\n\u2581a\u2581 \u2581"  # characters the corpus lacks fall back to bytes; U+2581,
    # sentencepiece's sign for a space, came back a space
    assert bpe.decode(bpe.encode(CORPUS)) == CORPUS and bpe.decode(bpe.encode(unseen)) == unseen
    assert len(bpe.encode(CORPUS)) < len(CORPUS) / 3  # the merges compress
    bpe.save(tmp_path)
    for tok in (char, byte, bpe):
        again = tokenizer.from_meta(json.loads(json.dumps(tok.meta())), tmp_path)
        assert again.vocab_size == tok.vocab_size and again.encode(text).tolist() == tok.encode(text).tolist()
    assert tokenizer.parse("bpe:512") == ("bpe", 512) and tokenizer.parse("char") == ("char", None)
    for bad in ("bpe", "bpe:0", "bpe:x", "word", "char:3", f"bpe:{2**31}"):
        with pytest.raises(ValueError, match="unknown tokenizer"):
            tokenizer.parse(bad)


@pytest.mark.parametrize("line", ["abc\n", "日本語のテキスト\n", "ACGTTGCA"])
def test_a_bpe_of_a_corpus_without_a_space_round_trips_spaces(line):
    """With no space in the corpus sentencepiece learns no piece for one, and maps a space to U+2581, which fell
    back to its bytes and decoded as U+2581: 'a b' came back 'a\u2581b'."""
    bpe = BPETokenizer.fit(iter([line] * 50), 300)
    for text in ("a b", "  two  spaces ", " ", line + " " + line, "a\u2581 b\u2581"):
        assert bpe.decode(bpe.encode(text)) == text


def test_prepare_char_equals_text_source(tmp_path, corpus):
    counts = prepare.prepare("text", str(corpus), str(tmp_path / "tok"), "char")
    direct = zoo.data.load(f"text:{corpus}", seq_len=8)
    ds = zoo.data.load(f"tokens:{tmp_path / 'tok'}", seq_len=8)
    assert isinstance(ds, zoo.data.Dataset) and ds.kind == "text" and ds.eval_split == "val"
    assert counts == {"train": int(0.9 * len(CORPUS)), "val": len(CORPUS) - int(0.9 * len(CORPUS))}
    for split in ("train", "val"):  # the same 90/10 split of the same ids
        np.testing.assert_array_equal(ds.splits[split]["tokens"], direct.splits[split]["tokens"])
    assert ds.num_classes == direct.num_classes == len(set(CORPUS)) and ds.decode(_all_tokens(ds)) == CORPUS
    meta = json.loads((tmp_path / "tok" / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["train_tokens"] == counts["train"]
    assert (tmp_path / "tok" / "train.bin").stat().st_size == 2 * counts["train"]


def test_prepare_byte_and_bpe_round_trip_a_folder(tmp_path):
    folder = tmp_path / "docs"
    (folder / "b").mkdir(parents=True)
    (folder / "b" / "2.txt").write_bytes(b"second \xff\xfe file\n")  # not UTF-8: only bytes can hold it
    (folder / "a.txt").write_text(CORPUS)
    (folder / ".hidden").write_text("skipped")
    prepare.prepare("text", str(folder), str(tmp_path / "byte"), "byte")
    ds = zoo.data.load(f"tokens:{tmp_path / 'byte'}", seq_len=8)
    assert ds.num_classes == 256 and _all_tokens(ds).tolist() == list(CORPUS.encode() + b"second \xff\xfe file\n")
    with pytest.raises(ValueError, match="2.txt is not UTF-8"):
        prepare.prepare("text", str(folder), str(tmp_path / "bpe"), "bpe:400")
    (folder / "b" / "2.txt").write_text("second file\n")
    prepare.prepare("text", str(folder), str(tmp_path / "bpe"), "bpe:400")
    ds = zoo.data.load(f"tokens:{tmp_path / 'bpe'}", seq_len=8)
    assert 300 < ds.num_classes <= 400 and (tmp_path / "bpe" / "tokenizer.model").is_file()
    assert ds.decode(_all_tokens(ds)) == CORPUS + "second file\n"


def test_prepare_writes_meta_json_last(tmp_path, corpus, monkeypatch):
    """meta.json marks a token directory done: it is written after the BPE model (a prepare killed between the two
    left a directory that read as done but had no tokenizer), whole or not at all."""
    write_meta = prepare.tokens.write_meta

    def after_the_model(out, *args):
        assert (out / "tokenizer.model").is_file() and not (out / "meta.json").exists()
        write_meta(out, *args)

    monkeypatch.setattr(prepare.tokens, "write_meta", after_the_model)
    prepare.prepare("text", str(corpus), str(tmp_path / "bpe"), "bpe:300")
    assert sorted(p.name for p in (tmp_path / "bpe").iterdir()) == ["meta.json", "tokenizer.model", "train.bin",
                                                                    "val.bin"]


def test_prepare_uint32_for_a_large_vocabulary(tmp_path):
    chars = [chr(c) for c in (*range(0x3400, 0x4DC0), *range(0x4E00, 0xA000), *range(0x20000, 0x2A6E0))]
    assert len(chars) > 1 << 16
    text = "".join(chars) + "".join(chars[:1000])
    (tmp_path / "big.txt").write_text(text)
    prepare.prepare("text", str(tmp_path / "big.txt"), str(tmp_path / "tok"), "char")
    assert json.loads((tmp_path / "tok" / "meta.json").read_text())["dtype"] == "uint32"
    ds = zoo.data.load(f"tokens:{tmp_path / 'tok'}", seq_len=8)
    assert ds.num_classes == len(chars) and ds.decode(_all_tokens(ds)) == text
    streamed = zoo.data.load(f"tokens:{tmp_path / 'tok'}", seq_len=8, stream=True)
    idx = np.array([0, 2000, ds.size("val") - 1], np.int32)
    batch = streamed.read("val", idx)
    assert batch["y"].max() > 1 << 16 and batch["y"].dtype == np.int32
    np.testing.assert_array_equal(batch["y"], ds.read("val", idx)["y"])


def test_prepare_tfds_text_set(tmp_path):
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=6, policy=tfds.testing.MockPolicy.USE_CODE):
        prepare.prepare("tfds", "tiny_shakespeare", str(tmp_path / "tok"), "char", data_dir=str(tmp_path))
        in_memory = zoo.data.load("tfds:tiny_shakespeare", seq_len=4, data_dir=str(tmp_path))
        docs = {s: [e["text"] for e in tfds.data_source("tiny_shakespeare", split=s, data_dir=str(tmp_path))]
                for s in ("train", "test")}
    ds = zoo.data.load(f"tokens:{tmp_path / 'tok'}", seq_len=4)
    assert ds.decode(ds.splits["train"]["tokens"]) == "\n".join(docs["train"])
    assert ds.decode(ds.splits["val"]["tokens"]) == "\n".join(docs["test"])
    # `tfds:` of a text set tokenizes the same documents in memory
    assert in_memory.kind == "text" and in_memory.eval_split == "test"
    np.testing.assert_array_equal(in_memory.splits["train"]["tokens"], ds.splits["train"]["tokens"])
    with tfds.testing.mock_data(num_examples=6, policy=tfds.testing.MockPolicy.USE_CODE):
        with pytest.raises(ValueError, match="prepare it as token files"):
            zoo.data.load("tfds:tiny_shakespeare", seq_len=4, data_dir=str(tmp_path), stream=True)
        with pytest.raises(ValueError, match="no text feature"):
            prepare.prepare("tfds", "mnist", str(tmp_path / "mnist"), "char", data_dir=str(tmp_path))


def test_prepare_command_line(tmp_path, corpus, capsys):
    ok = subprocess.run([sys.executable, "-m", "zoo.data.prepare", "text", str(corpus), "--out", str(tmp_path / "tok"),
                         "--tokenizer", "byte"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "tokenizing corpus.txt" in ok.stderr and f"tokens:{tmp_path / 'tok'}" in ok.stdout
    for args, message in [((str(corpus), "--out", str(tmp_path / "tok")), "already holds a token directory"),
                          ((str(corpus), "--out", str(tmp_path / "x"), "--tokenizer", "bpe"), "unknown tokenizer"),
                          ((str(tmp_path / "nope.txt"), "--out", str(tmp_path / "y")), "no file or folder"),
                          (("/dev/zero", "--out", str(tmp_path / "z")), "not a regular file but a character device")]:
        with pytest.raises(SystemExit) as stop:
            prepare_main(["text", *args])
        lines = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 1 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_token_directory_errors(tmp_path, corpus):
    prepare.prepare("text", str(corpus), str(tmp_path / "tok"), "char")
    tok = tmp_path / "tok"
    with pytest.raises(FileNotFoundError, match="token directory not found"):
        zoo.data.load(f"tokens:{tmp_path / 'none'}")
    with pytest.raises(ValueError, match=re.escape(f"tokens:{corpus} is a file; tokens: takes the directory")):
        zoo.data.load(f"tokens:{corpus}")  # it said 'token directory not found', naming the file that was there
    for stream in (True, False):
        with pytest.raises(ValueError, match="fewer than seq_len"):
            zoo.data.load(f"tokens:{tok}", seq_len=5000, stream=stream)
    empty = tmp_path / "empty"  # nanoGPT's files (no token counts in meta.json), val.bin empty: in memory 'cannot
    empty.mkdir()  # mmap an empty file', naming neither the folder nor the split
    for name in ("meta.json", "train.bin"):
        shutil.copy(tok / name, empty / name)
    (empty / "val.bin").write_bytes(b"")
    meta = json.loads((tok / "meta.json").read_text())
    (empty / "meta.json").write_text(json.dumps({k: v for k, v in meta.items() if not k.endswith("_tokens")}))
    for stream in (True, False):
        with pytest.raises(ValueError, match=f"{empty}: the val split has 0 tokens, fewer than seq_len"):
            zoo.data.load(f"tokens:{empty}", seq_len=8, stream=stream)
    # a token outside the vocabulary: named with its position, on the streamed and the in-memory path
    meta = json.loads((tok / "meta.json").read_text())
    with (tok / "train.bin").open("r+b") as f:
        f.seek(2 * 100)
        f.write(np.array([60000], "<u2").tobytes())
    with pytest.raises(ValueError, match="token 60000 at position 100 is outside the vocabulary"):
        zoo.data.load(f"tokens:{tok}", seq_len=8)
    streamed = zoo.data.load(f"tokens:{tok}", seq_len=8, stream=True)
    streamed.read("train", np.array([0, 200]))  # windows that miss it read fine
    with pytest.raises(ValueError, match="position 100"):
        streamed.read("train", np.array([95]))
    with (tok / "train.bin").open("r+b") as f:
        f.truncate(2 * 1000)
    with pytest.raises(ValueError, match="has 1000 tokens but meta.json says"):
        zoo.data.load(f"tokens:{tok}", seq_len=8)
    (tok / "meta.json").write_text(json.dumps({**meta, "dtype": "int8"}))
    with pytest.raises(ValueError, match="not uint16 or uint32"):
        zoo.data.load(f"tokens:{tok}", seq_len=8)
    (tok / "meta.json").write_text("{}")
    with pytest.raises(ValueError, match="is not a token directory's meta"):
        zoo.data.load(f"tokens:{tok}", seq_len=8)
    for wrong, match in [({"vocab_size": meta["vocab_size"] + 0.5}, "vocab_size must be a positive integer"),
                         ({"vocab_size": True}, "vocab_size must be a positive integer, got True"),
                         ({"tokenizer": None}, "tokenizer must be a mapping"),
                         ({"tokenizer": {"kind": "char"}}, "a char tokenizer needs its 'chars'"),
                         ({"tokenizer": {"kind": "bpe", "model": 3}}, "a bpe tokenizer needs its 'model'")]:
        (tok / "meta.json").write_text(json.dumps({**meta, "dtype": "uint16", **wrong}))
        with pytest.raises(ValueError, match=match):
            zoo.data.load(f"tokens:{tok}", seq_len=8)
    (tok / "meta.json").unlink()
    with pytest.raises(FileNotFoundError, match="zoo.data.prepare"):
        zoo.data.load(f"tokens:{tok}", seq_len=8)


def test_a_text_file_that_is_not_utf8_names_the_flag_that_reads_it(tmp_path):
    """Char-level text must be UTF-8; the line names --byte-level, which reads any file as bytes."""
    from zoo.data import text

    (tmp_path / "bin.txt").write_bytes(b"\x97\xff abc" * 20)
    with pytest.raises(ValueError, match="is not UTF-8 .*; --byte-level reads it as bytes"):
        text.load(str(tmp_path / "bin.txt"), seq_len=8)
    assert text.load(str(tmp_path / "bin.txt"), seq_len=8, byte_level=True).num_classes == 256


@pytest.mark.parametrize("name", ["meta.json", "train.bin", "val.bin"])
def test_a_folder_in_a_token_directory_is_named_as_one(tmp_path, name):
    """A folder where a token directory's file goes said '<file> not found', a file that is there."""
    from zoo.data import prepare, tokens

    (tmp_path / "corpus.txt").write_text("abcdefgh\n" * 200)
    out = tmp_path / "tok"
    prepare.prepare("text", str(tmp_path / "corpus.txt"), str(out), "char")
    (out / name).unlink()
    (out / name).mkdir()
    with pytest.raises(IsADirectoryError, match=f"{name} is a directory, not a file of the token directory"):
        tokens.load(str(out), seq_len=8)


def test_a_bpe_smaller_than_its_fixed_pieces_is_refused_before_any_work():
    """bpe:1 and bpe:2 reached sentencepiece, whose line named a C++ check ('INTERNAL: src/trainer_interface.cc(828)
    [insert_id(trainer_spec_.bos_id() ...)]'); every BPE holds 256 byte pieces, 3 special ones and the newline."""
    for size in (1, 2, 259):
        with pytest.raises(ValueError, match=f"bpe:{size}: a BPE needs at least 260 tokens"):
            tokenizer.parse(f"bpe:{size}")
    assert tokenizer.parse("bpe:260") == ("bpe", 260)


@pytest.mark.parametrize("spec", ["byte:", "char:"])
def test_a_tokenizer_with_an_empty_size_is_refused(spec):
    """'byte:' and 'char:' (a size from an unset variable after them) were read as 'byte' and 'char'."""
    from zoo.data.tokenizer import parse

    assert parse(spec[:-1]) == (spec[:-1], None)
    with pytest.raises(ValueError, match=f"unknown tokenizer '{spec}'"):
        parse(spec)


def test_a_damaged_bpe_model_is_one_line_naming_it(tmp_path):
    """sentencepiece raises a RuntimeError naming its C++ check ('INTERNAL: src/sentencepiece_processor.cc(109)
    [model_proto->ParseFromArray(...)]'), which the boundary took for a bug: 'unexpected RuntimeError'."""
    from zoo.data.tokenizer import from_meta

    (tmp_path / "tokenizer.model").write_bytes(b"\x0a\x05hello" * 10)
    with pytest.raises(ValueError, match=f"the BPE model {tmp_path / 'tokenizer.model'} named in .*meta.json is not a "
                       r"sentencepiece model \(70 bytes"):
        from_meta({"kind": "bpe", "model": "tokenizer.model"}, tmp_path)


def test_a_bpe_trains_on_a_corpus_without_line_ends(tmp_path):
    """sentencepiece skips a sentence over 4,192 bytes without a word: a corpus of one 12,000-character line
    trained on nothing ('sentencepiece could not train a BPE of size 300: INTERNAL: src/trainer_interface.cc(467)
    [!sentences_.empty()]'). Lines are cut into pieces of 1,024 characters to train on."""
    from zoo.data.tokenizer import BPE_MIN, BPETokenizer

    text = "the cat sat on the mat. " * 500
    bpe = BPETokenizer.fit(iter([text]), 300)
    assert BPE_MIN < bpe.vocab_size <= 300
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text and len(ids) < len(text) / 3  # merges learnt: 'the cat' is a few pieces, not 7
    with pytest.raises(ValueError, match=r"of size 300: the corpus has no text to learn pieces from \(only line ends"):
        BPETokenizer.fit(iter(["\n", "", "\n"]), 300)  # sentencepiece's own check was the reason
