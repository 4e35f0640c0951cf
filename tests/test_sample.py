"""prepare -> tokens:DIR -> train.py -> zoo.sample, for the char, byte and BPE tokenizers; bad input as one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_utils import ROOT, child_env, run_main_many

from zoo import sample
from zoo.cli.sample import main as sample_main
from zoo.config import RunConfig
from zoo.data import prepare
from zoo.data.tokenizer import BPETokenizer, ByteTokenizer, CharTokenizer

LINE = "abcdefghijklmnopqrstuvwxyz\n"  # one successor per token: a 2-block GPT learns it in 100 steps (loss ~0.01)
TRAIN = ["--model", "gpt", "--width", "64", "--depth", "2", "--model-opt", "dropout=0", "--seq-len", "16",
         "--batch-size", "16", "--lr", "3e-3", "--warmup", "0", "--schedule", "constant", "--steps", "100",
         "--ckpt-every", "50", "--eval-every", "100"]
TOKENIZERS = ["char", "byte", "bpe:300"]


def _train(tmp_path) -> dict[str, Path]:
    """One run per tokenizer on the same corpus, the three trained one after another in one subprocess."""
    (tmp_path / "corpus.txt").write_text(LINE * 400)
    runs = {tokenizer: tmp_path / tokenizer.replace(":", "") for tokenizer in TOKENIZERS}
    for tokenizer, run in runs.items():
        prepare.prepare("text", str(tmp_path / "corpus.txt"), f"{run}-tok", tokenizer)
    out = run_main_many([[*TRAIN, "--data", f"tokens:{run}-tok", "--run-dir", str(run)] for run in runs.values()],
                        timeout=600)
    assert [code for code, _ in out] == [0] * len(runs), out
    return runs


@pytest.mark.long
def test_prepare_train_sample_round_trip(tmp_path, capsys):
    """The trained model continues the corpus, under each tokenizer: greedy samples decode to the corpus's own
    text."""
    for tokenizer, run in _train(tmp_path).items():
        _round_trip(run, tokenizer, capsys)


def _round_trip(run: Path, tokenizer: str, capsys) -> None:
    model, data = sample.load_gpt(str(run))
    prompt = data.encode(LINE)

    def text(**kw) -> str:
        return data.decode(sample.generate(model, prompt, 40, **kw))

    greedy = text(temperature=0)
    assert len(greedy) >= 40 and greedy == (LINE * 20)[:len(greedy)], tokenizer
    assert text(temperature=0.5, top_k=1) == greedy, tokenizer  # top-1 is greedy
    assert text(temperature=1.0, seed=3) == text(temperature=1.0, seed=3), tokenizer
    if tokenizer == "char":
        sample_main([str(run), "--prompt", LINE, "--tokens", "30", "--temperature", "0"])
        assert capsys.readouterr().out == LINE + (LINE * 2)[:30] + "\n"
        with pytest.raises(SystemExit):
            sample_main([str(run), "--prompt", "ABC"])
        assert capsys.readouterr().err == "error: characters not in the vocabulary: 'ABC'\n"
        with pytest.raises(ValueError, match="top-k must be between 1 and the vocabulary size 27"):
            sample.sample(str(run), LINE, tokens=5, top_k=28)
        assert len(sample.sample(str(run), LINE, tokens=5, step=50)) == 5
        with pytest.raises(FileNotFoundError, match="no checkpoint at step 7"):
            sample.sample(str(run), LINE, tokens=5, step=7)


def test_bad_input_is_one_line(tmp_path, capsys):
    def error(*args: str, status: int = 1) -> str:
        with pytest.raises(SystemExit) as stop:
            sample_main(list(args))
        lines = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == status and len(lines) == 1 and lines[0].startswith("error: ")
        return lines[0]

    assert "neither a config.json nor a checkpoint there (is it a zoo run dir?)" in error(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps(RunConfig.from_flat({"model": "mlp_resnet"}).to_json()))
    assert "trained a mlp_resnet; sampling needs a GPT run" in error(str(tmp_path))
    gpt = RunConfig.from_flat({"model": "gpt", "data": "synthetic:text"})
    (tmp_path / "config.json").write_text(json.dumps(gpt.to_json()))
    assert "checkpoints" in error(str(tmp_path))
    assert "--tokens: expected a positive integer" in error(str(tmp_path), "--tokens", "0", status=2)
    assert "--temperature must be a finite number >= 0" in error(str(tmp_path), "--temperature", "-1")
    assert "--temperature: expected a finite number" in error(str(tmp_path), "--temperature", "nan", status=2)


def test_tokens_beyond_int32_are_refused_before_the_run_is_read(tmp_path, capsys):
    """--tokens 100000000000 drew silently for hours (all of it held, then printed at the end) and would have failed
    at draw 2^32 (the draws' counter is a uint32): now one line, before anything is read."""
    with pytest.raises(SystemExit) as stop:
        sample_main([str(tmp_path), "--tokens", "100000000000"])
    assert stop.value.code == 2
    assert "argument --tokens: must be at most 2^31 - 1 (an int32)" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--tokens must be between 1 and 2.31 - 1"):
        sample.continuation(str(tmp_path), "x", 2**31)


def test_the_continuation_is_printed_as_it_is_drawn(monkeypatch, capsys):
    """Each piece is on stdout before the next is drawn (it was printed only after the last token)."""
    seen = []

    def pieces(*args):
        yield "ab"
        seen.append(capsys.readouterr().out)
        yield "cd"

    monkeypatch.setattr(sample, "continuation", pieces)
    sample_main(["RUN", "--prompt", "P"])
    assert seen == ["Pab"] and capsys.readouterr().out == "cd\n"


@pytest.mark.parametrize("tokenizer", ["char", "byte", "bpe"])
def test_pieces_join_to_the_decoded_text(tokenizer):
    """Pieces decoded token by token join to the text of all the ids: a character split over byte tokens (or BPE
    byte-fallback pieces) waits for its last byte instead of printing U+FFFD."""
    text = "snow ☃ and € and 日本語\n" * 3
    tok = {"char": lambda: CharTokenizer(text), "byte": ByteTokenizer,
           "bpe": lambda: BPETokenizer.fit(iter(["snow and\n"] * 50), 270)}[tokenizer]()
    ids = tok.encode(text).tolist()
    pieces = list(sample.decoded(ids, tok.decode))
    assert "".join(pieces) == tok.decode(ids) == text
    assert not any("\ufffd" in p for p in pieces) and len(pieces) > len(text) // 4


def test_a_reader_that_stops_ends_the_command_quietly():
    """`zoo.sample RUN | head -c 10`: the closed pipe stops the drawing with SIGPIPE's status and no line (a
    BrokenPipeError would be an 'unexpected' failure with a traceback file)."""
    read, write = os.pipe()
    os.close(read)
    code = ("import itertools, zoo.sample\n"
            "zoo.sample.continuation = lambda *a: itertools.repeat('text')\n"
            "from zoo.cli.sample import main\nmain(['RUN'])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=child_env(), stdout=write,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert proc.returncode == 128 + signal.SIGPIPE and proc.stderr == "", proc.stderr


def test_a_fallback_to_an_older_checkpoint_is_said_on_stderr(monkeypatch, capsys):
    """A newest checkpoint that cannot be read is reported as the older one is taken; the line went to stdout, into
    the sampled text (`zoo.sample RUN > out.txt` held it)."""
    def load_run(run_dir, step, report=print):
        report("checkpoint RUN/checkpoints/4 cannot be read (...); trying an older checkpoint")
        raise FileNotFoundError("stopped here")

    monkeypatch.setattr(sample, "read_config", lambda run_dir: RunConfig.from_flat({"model": "gpt"}))
    monkeypatch.setattr(sample, "load_run", load_run)
    with pytest.raises(FileNotFoundError, match="stopped here"):
        sample.load_gpt("RUN")
    out, err = capsys.readouterr()
    assert out == "" and "trying an older checkpoint" in err
