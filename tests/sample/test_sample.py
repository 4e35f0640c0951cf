"""prepare -> tokens:DIR -> train.py -> zoo.sample, for the char, byte and BPE tokenizers; bad input as one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_utils import ROOT, child_env, one_line_error, run_main_many

from zoo import sample
from zoo.cli import sample as sample_cli
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
        assert capsys.readouterr().err == "error: --prompt: characters not in the vocabulary: 'ABC'\n"
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
    assert "trained the model mlp_resnet; sampling needs a GPT run" in error(str(tmp_path))
    gpt = RunConfig.from_flat({"model": "gpt", "data": "synthetic:text"})
    (tmp_path / "config.json").write_text(json.dumps(gpt.to_json()))
    assert "checkpoints" in error(str(tmp_path))
    assert "--tokens: expected a positive integer" in error(str(tmp_path), "--tokens", "0", status=2)
    assert "--temperature must be a number from 0 to float32's largest" in error(str(tmp_path), "--temperature", "-1")
    assert "--temperature must be a number from 0 to float32's largest" in error(str(tmp_path), "--temperature",
                                                                                  "1e39")
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


def test_the_default_prompt_outside_the_vocabulary_is_named():
    """`python -m zoo.sample RUN` with no --prompt, on a run whose characters hold no newline (synthetic:text, a
    corpus of one line), said 'characters not in the vocabulary: '\\n'', a prompt the user never gave. The line now
    names the default and asks for a --prompt; a vocabulary with a newline takes the default as before."""
    from types import SimpleNamespace

    from zoo.data.tokenizer import CharTokenizer
    from zoo.sample import encode_prompt

    one_line = SimpleNamespace(encode=CharTokenizer.fit(["abc"]).encode)
    with pytest.raises(ValueError, match="this run's vocabulary has no newline, the default --prompt: give one"):
        encode_prompt(one_line, None)
    assert encode_prompt(one_line, "ba").tolist() == [1, 0]
    lines = SimpleNamespace(encode=CharTokenizer.fit(["a\nb"]).encode)
    assert encode_prompt(lines, None).tolist() == [0]


TINY_GPT = {"model": "gpt", "width": 16, "depth": 1, "model_opt": {"head_dim": 8, "dropout": 0.0}, "seq_len": 8,
            "batch_size": 4, "steps": 2, "ckpt_every": 2, "eval_every": 100}


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory):
    """A tiny GPT trained on a text file (char tokens), and the file; the run dir is copied before it is changed.
    Trained in this process, as zoo.train.loop.train (these tests are about the run dir, not the command line; a
    train.py process would import JAX again), without dropout (its RNG would only add to the compile)."""
    from zoo.config import resolve
    from zoo.train.loop import train

    root = tmp_path_factory.mktemp("gpt")
    corpus = root / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog\n" * 40)
    train(resolve({**TINY_GPT, "data": f"text:{corpus}", "run_dir": str(root / "run")}))
    return root / "run", corpus


def _moved_away(corpus, tmp_path):
    """The run's data gone from where it trained (as on another machine): the corpus moved into tmp_path."""
    import shutil

    shutil.copy(corpus, tmp_path / "kept.txt")
    corpus.unlink()


def _without_data_record(run, tmp_path):
    """A copy of `run` as a zoo before the data was recorded saved it: its checkpoints' metadata has no "data"."""
    import json
    import shutil

    old = tmp_path / "old"
    shutil.copytree(run, old)
    for meta in old.glob("checkpoints/*/meta/metadata"):
        values = json.loads(meta.read_text())
        del values["data"]
        meta.write_text(json.dumps(values))
    return old


def test_sample_and_export_need_no_data_files(gpt_run, tmp_path):
    """`zoo.sample RUN` and `zoo.export RUN` loaded the run's data set to know its vocabulary, shapes and tokenizer:
    a run dir copied to a machine without the text file could be neither sampled nor exported. The checkpoints now
    record what they need (shapes and the whole tokenizer), and the same text comes out without the file."""
    from zoo import sample
    from zoo.export import export

    run, corpus = gpt_run
    before = sample.sample(str(run), "the ", 12, seed=3)
    _moved_away(corpus, tmp_path)
    try:
        assert sample.sample(str(run), "the ", 12, seed=3) == before
        cfg = export(run, tmp_path / "exp", echo=lambda line: None)
        assert cfg["param"]["name"] == "sp" and (tmp_path / "exp" / "model.safetensors").is_file()
        old = _without_data_record(run, tmp_path)
        with pytest.raises(FileNotFoundError, match="did not record its data in its checkpoints, and --data text:"):
            sample.sample(str(old), "the ", 4)  # an older run dir without its data: one line
    finally:
        (tmp_path / "kept.txt").rename(corpus)
    assert sample.sample(str(old), "the ", 12, seed=3) == before  # an older run dir with its data still reads


def test_a_malformed_data_record_is_one_line(gpt_run, tmp_path):
    import json
    import shutil

    from zoo import sample
    from zoo.errors import CheckpointError

    run = tmp_path / "run"
    shutil.copytree(gpt_run[0], run)
    meta = next(run.glob("checkpoints/*/meta/metadata"))
    values = json.loads(meta.read_text())
    values["data"]["tokenizer"] = {"kind": "char", "chars": 7}
    meta.write_text(json.dumps(values))
    with pytest.raises(CheckpointError, match="its record of the run's data is malformed"):
        sample.sample(str(run), "the ", 4)


def test_a_prompt_that_is_not_utf8_is_one_line_for_a_text_tokenizer(gpt_run, capsys, tmp_path, monkeypatch):
    """`zoo.sample RUN --prompt $'a\\xff'` (argv bytes that are not UTF-8, held as surrogate escapes): a char run said
    "'utf-32-le' codec can't encode character '\\udcff'", a BPE run failed with sentencepiece's 'Unable to cast'
    (an unexpected error). A byte-level run reads those bytes; the others refuse the prompt in one line."""
    monkeypatch.chdir(tmp_path)
    line = one_line_error(sample_cli.main, [str(gpt_run[0]), "--prompt", "a\udcff", "--tokens", "2"], capsys)
    assert "--prompt 'a\\udcff' holds bytes that are not UTF-8 text, which this run's char tokenizer" in line, line


def test_top_k_holds_at_any_temperature():
    """Masked logits (-inf) over a temperature near float32's largest (3e38) were nan, and the draw picked masked
    tokens (`--top-k 1 --temperature 3e38` printed what greedy never does). The mask now follows the scaling: top-1
    is greedy at any temperature, and top-2 draws only the two largest."""
    import jax
    import jax.numpy as jnp

    logits = jnp.array([[[0.0, 1.0, 5.0, 2.0]]])
    model, window = (lambda w: (logits,)), jnp.zeros((1, 1), jnp.int32)
    for temperature in (1.0, 1e30, 3e38):
        draws = {int(sample._next_token(model, window, 0, jax.random.key(s), jnp.float32(temperature), k))
                 for s in range(20) for k in (1, 2)}
        assert draws <= {2, 3} and 2 in draws, (temperature, draws)


def test_an_output_that_cannot_encode_the_text_is_one_line():
    """A stdout in ASCII (PYTHONIOENCODING=ascii, a C locale's terminal): the first character it cannot encode was
    "'ascii' codec can't encode characters in position 0-3", which said neither what nor how to fix it."""
    code = ("import itertools, zoo.sample\n"
            "zoo.sample.continuation = lambda *a: iter(['plain ', 'caf\\u00e9'])\n"
            "from zoo.cli.sample import main\nmain(['RUN'])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**child_env(), "PYTHONIOENCODING": "ascii"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("error: stdout's encoding, ascii, cannot print '\\xe9': run with "
                                  "PYTHONIOENCODING=utf-8"), proc.stderr  # stderr's ascii too: escaped


def test_a_prompt_longer_than_the_context_is_said_to_be_cut(gpt_run, capsys):
    """A prompt longer than the model's context was cut to its last seq_len tokens without a word; the continuation
    is the same (the model sees only its context), and stderr now says so. A prompt that fits says nothing."""
    run, _ = gpt_run
    long = "the quick brown fox jumps over"  # 30 characters, 30 tokens; the context is 8
    assert sample.sample(str(run), long, 6, temperature=0) == sample.sample(str(run), long[-8:], 6, temperature=0)
    err = capsys.readouterr().err
    assert "note: the prompt is 30 tokens; the model sees the last 8 of them, its context" in err, err
    sample.sample(str(run), long[-8:], 6, temperature=0)
    assert "note: the prompt" not in capsys.readouterr().err
