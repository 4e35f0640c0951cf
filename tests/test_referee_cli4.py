"""An outside referee's inputs to the command lines, run dirs, checkpoints and data preparation that zoo's other
tests do not use: each was accepted silently, misreported or ended in a traceback before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_utils import one_line_error

from zoo.cli import train as train_cli


@pytest.mark.parametrize("mesh, why", [
    ("data=x", "'data=x' needs an integer size"), ("rows=2", "unknown axis 'rows'"),
    ("tensor=0", "axis tensor must have a positive size, got 0"), ("data=1,data=1", "axis data is given twice"),
    ("tensor=1000003", "data x fsdp x tensor = 1000003 must equal the")])
def test_print_config_refuses_a_mesh_training_would_refuse(mesh, why, capsys, monkeypatch):
    """`train.py --print-config --mesh <bad>` printed the config, the mesh refused only once training started: now
    its form is checked with the config (also in a config file) and its size against the devices here, each in
    one line; a mesh that fits any device count (data takes what the others leave) prints."""
    monkeypatch.delenv("JAX_COORDINATOR_ADDRESS", raising=False)
    assert why in one_line_error(train_cli.main, ["--print-config", "--mesh", mesh], capsys)
    train_cli.main(["--print-config", "--mesh", "fsdp=1,tensor=1"])
    assert "mesh: fsdp=1,tensor=1" in capsys.readouterr().out


def test_a_config_file_with_a_bad_mesh_is_refused(tmp_path, capsys):
    file = tmp_path / "run.yaml"
    file.write_text("loop: {mesh: 'fsdp=two'}\n")
    argv = ["--print-config", "--config", str(file)]
    assert "'fsdp=two' needs an integer size" in one_line_error(train_cli.main, argv, capsys)


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
    (tmp_path / "one.txt").write_text("a")
    with pytest.raises(ValueError, match="too small"):
        prepare("text", str(tmp_path / "one.txt"), str(tmp_path / "empty"), "char")
    assert list((tmp_path / "empty").iterdir()) == []  # a refused prepare leaves a folder that was there as it was


def test_a_16_bit_grayscale_image_keeps_its_levels(tmp_path):
    """A 16-bit grayscale PNG (PIL's mode I;16, common for scans and microscopy) was decoded as RGB through PIL's
    convert, which clips at 255: levels 0, 4369, ..., 65535 all came out 255 but the zeros, silently. It decodes
    now as grayscale scaled by 255 / 65535 (0, 17, ..., 255), and 32-bit pixels, whose range is unknown, are one
    line."""
    import io

    import numpy as np
    from PIL import Image

    from zoo.data.imagefolder import _decode_one, load

    levels = (np.arange(16, dtype=np.uint16).reshape(4, 4) * 4369)
    for split in ("train", "test"):
        for k, cls in enumerate(("a", "b")):
            (tmp_path / "set" / split / cls).mkdir(parents=True)
            Image.fromarray(levels if k else levels[::-1]).save(tmp_path / "set" / split / cls / "0.png")
    data = load(str(tmp_path / "set"), cache_dir="off", stream=False)
    x = data.splits["train"]["x"]
    assert x.shape == (2, 4, 4, 1) and x.dtype == np.uint8
    np.testing.assert_array_equal(x[1, ..., 0], np.arange(16).reshape(4, 4) * 17)
    tiff = io.BytesIO()
    Image.fromarray(levels.astype(np.int32)).save(tiff, format="TIFF")
    with pytest.raises(ValueError, match="32-bit integer pixels .* convert it to 8 or 16 bits"):
        _decode_one("wide.tif", tiff.getvalue())


@pytest.fixture(scope="module")
def zero_run(tmp_path_factory) -> Path:
    """A tiny run whose logits are 0: muP's zero_init with the output frozen (TP VI's depth runs freeze it)."""
    from zoo.config import resolve
    from zoo.train.loop import train

    run = tmp_path_factory.mktemp("zero") / "run"
    train(resolve({"model": "mlp_resnet", "width": 8, "depth": 1, "data": "synthetic:teacher", "batch_size": 8,
                   "eval_batch_size": 16, "steps": 2, "param": "mup",
                   "param_opt": {"zero_init": True, "freeze": "output"}, "run_dir": str(run)}))
    return run


def test_a_run_whose_logits_are_zero_exports(zero_run, tmp_path):
    """A run under zero_init with its output frozen has logits 0: the fold keeps them 0 exactly, but the check
    divided by their norm, 0 / 0 = nan, and refused the export ('differ from the run's by nan'). An --out that is
    a file is named as one (it read 'not an empty directory')."""
    from zoo.export import export

    run = zero_run
    lines: list[str] = []
    export(run, tmp_path / "sp", echo=lines.append)
    assert "logits agree to 0 (relative, f32)" in lines[0] and (tmp_path / "sp" / "model.safetensors").is_file()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="file is a file, not a directory"):
        export(run, tmp_path / "file")


def test_an_empty_config_or_fork_run_dir_is_refused(tmp_path, capsys, monkeypatch):
    """`train.py --config ""` (an unset shell variable) trained with no config file at all, silently, into the
    default run dir; `--fork-from :3` (the same, before a step) looked for the run in the current folder. Both are
    one line now, and nothing is written."""
    monkeypatch.chdir(tmp_path)
    line = one_line_error(train_cli.main, ["--config", "", "--steps", "1"], capsys)
    assert "argument --config: must not be empty" in line
    tiny = ["--width", "8", "--depth", "1", "--data", "synthetic:teacher", "--batch-size", "8", "--steps", "5"]
    line = one_line_error(train_cli.main, [*tiny, "--fork-from", ":3", "--run-dir", "fork"], capsys)
    assert line == "error: --fork-from :3 names no run dir before its step; give RUN_DIR:3"
    assert list(tmp_path.iterdir()) == []


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


SIGTERMED = """
import os, signal, sys
from zoo.data import prepare
from zoo.config import resolve
from zoo.errors import Stopped
from zoo.export import export, sp_form
from zoo.train import loop

def terminated(real):
    def call(*args):
        out = real(*args)  # its files half-written
        os.kill(os.getpid(), signal.SIGTERM)
        return out
    return call

tmp = sys.argv[1]
prepare.encode_to = terminated(prepare.encode_to)
sp_form.save_safetensors = terminated(sp_form.save_safetensors)
loop.restore_or_init = terminated(loop.restore_or_init)  # before the compile
run = resolve({"model": "mlp_resnet", "width": 8, "depth": 1, "data": "synthetic:teacher", "batch_size": 8,
               "steps": 2, "run_dir": tmp + "/new/run"})
for write, args in ((prepare.prepare, ("text", tmp + "/a.txt", tmp + "/new/tokens", "char")),
                    (export, (sys.argv[2], tmp + "/new/export")), (loop.train, (run,))):
    try:
        write(*args)
    except Stopped as stop:  # the boundary says its line and exits 128 + its signal
        print(stop.signum, stop.line)
"""


def test_sigterm_during_a_prepare_an_export_or_a_compile_leaves_nothing_half_written(zero_run, tmp_path):
    """SIGTERM (a job scheduler's stop) during a prepare, an export or a run's compile ended the process at once,
    as Python does by default: the prepare's --out stayed behind with a half-written all.bin.partial (and the
    folders made for it), the export's temporary folder beside --out, the run dir made for a run that never
    trained (its .lock and an empty checkpoints/). All now stop as after Ctrl-C, cleaning up; the boundary says
    one line and exits 143 (128 + SIGTERM)."""
    import subprocess
    import sys

    from cli_utils import ROOT, child_env

    (tmp_path / "a.txt").write_text("hello world this is a tiny corpus\n" * 50)
    proc = subprocess.run([sys.executable, "-c", SIGTERMED, str(tmp_path), str(zero_run)], cwd=ROOT, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    from zoo.train.loop import BETWEEN_STEPS

    said = proc.stdout.splitlines()[-3:]
    assert proc.returncode == 0 and said == ["15 stopped by SIGTERM; nothing half-written was left"] * 2 + [
        f"15 {BETWEEN_STEPS}"], proc.stdout + proc.stderr
    assert not (tmp_path / "new").exists()


def test_a_cache_dir_that_cannot_be_written_is_named_before_decoding(tmp_path, monkeypatch):
    """`--cache-dir FILE` decoded the whole image set, then failed as 'File exists: FILE' (and an unwritable one as
    'No such file or directory'): the line did not say it was the cache, nor how to choose another. It is now
    checked before anything is decoded, named, with --cache-dir DIR or off as the way out."""
    from PIL import Image

    from zoo.data import imagefolder

    for split in ("train", "test"):
        for cls in ("a", "b"):
            (tmp_path / "set" / split / cls).mkdir(parents=True)
            Image.new("RGB", (4, 4)).save(tmp_path / "set" / split / cls / "0.png")
    (tmp_path / "file").write_text("x")
    monkeypatch.setattr(imagefolder, "_decode", lambda *a: pytest.fail("decoded before the cache was checked"))
    with pytest.raises(ValueError, match=r"the decoded-data cache .*file \(--cache-dir DIR, or off\) cannot be "
                                         r"written: .*file is a file, not a folder"):
        imagefolder.load(str(tmp_path / "set"), cache_dir=str(tmp_path / "file"), stream=False)


def test_an_eval_class_without_train_images_is_refused(tmp_path):
    """An image folder whose test split holds a class the train split lacks (a misspelled folder: train/cat,
    test/Cat) trained with that label never seen and scored its test images wrong whatever the model did,
    silently (the eval accuracy of such a set: 0.0). Now one line naming the class, before anything is decoded
    (nothing is cached) or streamed."""
    from PIL import Image

    from zoo.data.imagefolder import load

    for split, classes in (("train", ("cat", "dog")), ("test", ("Cat", "dog"))):
        for cls in classes:
            (tmp_path / "set" / split / cls).mkdir(parents=True)
            Image.new("RGB", (4, 4)).save(tmp_path / "set" / split / cls / "0.png")
    for stream in (False, True):
        with pytest.raises(ValueError, match=r"the test split of image folder .* has classes the train split lacks "
                                             r"\(Cat\)"):
            load(str(tmp_path / "set"), cache_dir=str(tmp_path / "cache"), stream=stream)
    assert not list((tmp_path / "cache").glob("*.npz"))


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
