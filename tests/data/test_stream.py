"""Streamed data: the same batches as the in-memory path for each (seed, step), resume from any step, the size
rule, tfds through mock_data, and failures (a corrupt image, a dying worker) as one line, not a hang."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from itertools import islice

import numpy as np
import pytest
from PIL import Image

import zoo.data
from zoo.data import DataError, Streamed, stream
from zoo.data.view import ImageArrays

LAYOUT = {"train": 10, "test": 4}  # images per class, classes a, b, c


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("imgs")
    rng = np.random.default_rng(0)
    for split, count in LAYOUT.items():
        for cls in "abc":
            (root / split / cls).mkdir(parents=True)
            for i in range(count):
                Image.fromarray(rng.integers(0, 256, (6, 5, 3), np.uint8)).save(root / split / cls / f"{i}.png")
    return root


@contextlib.contextmanager
def deadline(seconds: int):
    """Fails the test instead of hanging it."""
    def fail(*_):
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _same_batches(a: zoo.data.DataView, b: zoo.data.DataView, batch: int, steps: int) -> None:
    assert (a.kind, a.num_classes, a.in_shape, a.eval_split, a.seq_len) == \
        (b.kind, b.num_classes, b.in_shape, b.eval_split, b.seq_len)
    for split in ("train", a.eval_split):
        assert a.size(split) == b.size(split)
    for ia, ib in zip(a.eval_indices(7), b.eval_indices(7), strict=True):
        np.testing.assert_array_equal(ia, ib)
    for step in range(steps):
        idx = a.indices("train", step, batch, seed=5)
        np.testing.assert_array_equal(idx, b.indices("train", step, batch, seed=5))
        x, y = a.read("train", idx), b.read("train", idx)
        for k in ("x", "y"):
            assert x[k].dtype == y[k].dtype
            np.testing.assert_array_equal(x[k], y[k])


def test_streamed_images_equal_in_memory(folder, tmp_path):
    streamed = zoo.data.load(f"imagefolder:{folder}", cache_dir=str(tmp_path), stream=True)
    assert isinstance(streamed, Streamed) and streamed.streamed and not list(tmp_path.glob("*.npz"))  # no decode
    in_memory = zoo.data.load(f"imagefolder:{folder}", cache_dir=str(tmp_path), stream=False)
    assert isinstance(in_memory, zoo.data.Dataset) and not in_memory.streamed
    _same_batches(in_memory, streamed, batch=8, steps=8)  # 8 steps of 8 from 30 images: three epochs
    # the in-memory host read is the device gather's batch
    idx = in_memory.indices("train", 3, 8, seed=5)
    assert in_memory.read("train", idx)["x"].dtype == np.uint8
    np.testing.assert_array_equal(in_memory.read("train", idx)["x"], in_memory.splits["train"]["x"][idx])


def test_streamed_text_equals_in_memory(token_dir):
    in_memory = zoo.data.load(f"tokens:{token_dir}", seq_len=16)
    streamed = zoo.data.load(f"tokens:{token_dir}", seq_len=16, stream=True)
    assert isinstance(in_memory, zoo.data.Dataset) and isinstance(streamed, Streamed)
    _same_batches(in_memory, streamed, batch=32, steps=5)
    batch = streamed.read("val", np.array([0, 5]))
    tokens = in_memory.splits["val"]["tokens"]
    np.testing.assert_array_equal(batch["x"][1], tokens[5:21])
    np.testing.assert_array_equal(batch["y"][1], tokens[6:22])
    # a text file forced to stream reads its host arrays batch by batch
    forced = zoo.data.load(f"text:{token_dir.parent / 'corpus.txt'}", seq_len=16, stream=True)
    _same_batches(zoo.data.load(f"text:{token_dir.parent / 'corpus.txt'}", seq_len=16), forced, batch=32, steps=3)


def test_stream_is_a_function_of_seed_and_step(token_dir, folder, tmp_path):
    data = zoo.data.load(f"tokens:{token_dir}", seq_len=16, stream=True)
    whole = list(islice(stream(data, "train", batch_size=8, seed=1, start_step=0), 6))
    assert [s for s, _ in whole] == list(range(6))
    resumed = list(islice(stream(data, "train", batch_size=8, seed=1, start_step=4), 2))  # a resume at step 4
    for (s, a), (t, b) in zip(whole[4:], resumed, strict=True):
        assert s == t
        np.testing.assert_array_equal(a["x"], b["x"])
        np.testing.assert_array_equal(a["y"], b["y"])
    for step, batch in whole:
        np.testing.assert_array_equal(batch["x"], data.read("train", data.indices("train", step, 8, 1))["x"])
    other = next(stream(data, "train", batch_size=8, seed=2, start_step=0))[1]
    assert not np.array_equal(other["x"], whole[0][1]["x"])
    # multi-host: each process reads its rows of the global batch
    images = zoo.data.load(f"imagefolder:{folder}", cache_dir=str(tmp_path), stream=True)
    full = next(stream(images, "train", batch_size=6, seed=0, start_step=7))[1]
    parts = [next(stream(images, "train", batch_size=6, seed=0, start_step=7, rows=slice(i, i + 2)))[1]
             for i in (0, 2, 4)]
    np.testing.assert_array_equal(np.concatenate([p["x"] for p in parts]), full["x"])
    np.testing.assert_array_equal(np.concatenate([p["y"] for p in parts]), full["y"])
    with pytest.raises(ValueError, match="batch size 100 must be between 1 and the 30"):
        stream(images, "train", batch_size=100, seed=0)
    with pytest.raises(ValueError, match="no split 'validation'"):
        stream(images, "validation", batch_size=2, seed=0)


@pytest.mark.slow
def test_workers_give_the_same_batches_in_order(token_dir):
    """Two worker processes (each reading every other step from the memory-mapped file) and none: the same
    (step, batch) sequence."""
    data = zoo.data.load(f"tokens:{token_dir}", seq_len=16, stream=True)
    with deadline(120):
        parallel = list(islice(stream(data, "train", batch_size=8, seed=1, start_step=3, workers=2), 5))
    serial = list(islice(stream(data, "train", batch_size=8, seed=1, start_step=3), 5))
    assert [s for s, _ in parallel] == [s for s, _ in serial] == [3, 4, 5, 6, 7]
    for (_, a), (_, b) in zip(parallel, serial, strict=True):
        np.testing.assert_array_equal(a["x"], b["x"])
        np.testing.assert_array_equal(a["y"], b["y"])


def test_size_rule(token_dir, folder, tmp_path):
    assert zoo.data.load(f"tokens:{token_dir}", seq_len=16).streamed is False
    nbytes = 4 * (token_dir / "train.bin").stat().st_size // 2 + 4 * (token_dir / "val.bin").stat().st_size // 2
    assert zoo.data.load(f"tokens:{token_dir}", seq_len=16, limit=nbytes).streamed is False
    assert zoo.data.load(f"tokens:{token_dir}", seq_len=16, limit=nbytes - 1).streamed is True
    assert zoo.data.load(f"tokens:{token_dir}", seq_len=16, limit=0, stream=False).streamed is False
    images = 42 * 6 * 5 * 3
    assert zoo.data.load(f"imagefolder:{folder}", cache_dir=str(tmp_path), limit=images).streamed is False
    assert zoo.data.load(f"imagefolder:{folder}", cache_dir=str(tmp_path), limit=images - 1).streamed is True
    synthetic = zoo.data.load("synthetic", stream=True)
    assert isinstance(synthetic, Streamed) and isinstance(synthetic.reader("train"), ImageArrays)
    assert zoo.data.load("synthetic:text", seq_len=8, limit=1000).streamed is True
    archive = tmp_path / "imgs.tar"
    import tarfile

    with tarfile.open(archive, "w") as tf:
        tf.add(folder, arcname="imgs")
    with pytest.raises(ValueError, match="extract it to a folder to stream it"):
        zoo.data.load(f"imagefolder:{archive}", cache_dir=str(tmp_path), stream=True)


def test_tfds_streamed_through_mock_data(tmp_path):
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=20, policy=tfds.testing.MockPolicy.USE_CODE):
        streamed = zoo.data.load("tfds:mnist", data_dir=str(tmp_path), stream=True)
        in_memory = zoo.data.load("tfds:mnist", data_dir=str(tmp_path))
        assert zoo.data.load("tfds:mnist", data_dir=str(tmp_path), limit=40 * 28 * 28 - 1).streamed
        with deadline(120):  # images decoded in a worker process
            batches = list(islice(stream(streamed, "train", batch_size=8, seed=0, start_step=1, workers=1), 3))
    assert isinstance(streamed, Streamed) and isinstance(in_memory, zoo.data.Dataset)
    assert streamed.in_shape == (28, 28, 1) and streamed.num_classes == 10 and streamed.eval_split == "test"
    _same_batches(in_memory, streamed, batch=8, steps=4)
    for step, batch in batches:
        idx = in_memory.indices("train", step, 8, 0)
        assert batch["x"].shape == (8, 28, 28, 1) and batch["x"].dtype == np.uint8 and batch["y"].dtype == np.int32
        np.testing.assert_array_equal(batch["x"], in_memory.splits["train"]["x"][idx])
        np.testing.assert_array_equal(batch["y"], in_memory.splits["train"]["y"][idx])


def _one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


@pytest.mark.slow
def test_corrupt_image_is_one_line(folder, tmp_path):
    broken = tmp_path / "imgs"
    import shutil

    shutil.copytree(folder, broken)
    (broken / "train" / "b" / "3.png").write_bytes(b"\x89PNG not really")
    data = zoo.data.load(f"imagefolder:{broken}", stream=True)
    target = next(s for s in range(1, 100) if 13 in data.indices("train", s, 6, 0))  # b/3.png is image 13
    with pytest.raises(DataError) as err:
        list(islice(stream(data, "train", batch_size=6, seed=0, start_step=target - 1), 3))
    line = _one_line(err)
    assert f"reading step {target} of split 'train' failed" in line and "b/3.png" in line
    with deadline(120), pytest.raises(DataError) as err:  # decoded in a worker process: the same line
        list(islice(stream(data, "train", batch_size=6, seed=0, start_step=target - 1, workers=1), 3))
    assert _one_line(err) == line


class DiesAtImage(ImageArrays):
    """A reader whose process is killed (as by the OOM killer) when it reads image `fatal`."""

    def __init__(self, x, y, fatal: int):
        super().__init__(x, y)
        self.fatal = fatal

    def read(self, idx):
        if self.fatal in idx:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().read(idx)


@pytest.mark.slow
def test_dying_worker_is_one_line():
    ds = zoo.data.load("synthetic")
    arrays = ds.splits["train"]
    data = Streamed(kind="image", readers={"train": DiesAtImage(arrays["x"], arrays["y"], fatal=7), "test":
                    ds.reader("test")}, num_classes=10, in_shape=ds.in_shape, eval_split="test")
    target = next(s for s in range(100) if 7 in data.indices("train", s, 64, 0))
    with deadline(120), pytest.raises(DataError) as err:
        next(stream(data, "train", batch_size=64, seed=0, start_step=target, workers=1))
    line = _one_line(err)
    assert f"reading step {target} of split 'train' failed" in line and "exit code -9" in line


PROBE = """
import json, os, resource, sys
from itertools import islice
import grain  # imported by zoo.data.stream: before the first measurement
import zoo.data

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

data = zoo.data.load("tokens:" + sys.argv[1], seq_len=256)
before = rss()
for step in range(300):
    data.read("train", data.indices("train", step, 64, 0))
after = rss()
for _ in islice(zoo.data.stream(data, "train", batch_size=64, seed=0), 300):
    pass
print(json.dumps({"streamed": data.streamed, "read_growth": after - before,
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10}))
"""


def _token_dir(root, train_bytes: int):
    """A token directory whose train.bin has `train_bytes` bytes: 1 MB of random tokens, the rest a sparse hole."""
    from zoo.data import tokens
    from zoo.data.tokenizer import CharTokenizer

    root.mkdir()
    rng = np.random.default_rng(0)
    with (root / "train.bin").open("wb") as f:
        f.write(rng.integers(0, 64, min(train_bytes, 1 << 20) // 2, np.uint16).tobytes())
        f.truncate(train_bytes)
    (root / "val.bin").write_bytes(rng.integers(0, 64, 4096, np.uint16).tobytes())
    tokens.write_meta(root, CharTokenizer(chr(48 + i) for i in range(64)), {"train": train_bytes // 2, "val": 4096},
                      "test")
    return root


@pytest.mark.slow
def test_memory_does_not_grow_with_the_token_file(tmp_path):
    """Peak RSS reading 300 batches of 64 x 256 tokens through zoo.data.stream: a 1 GB file (streamed) within
    1.5x of a 10 MB one (in memory); and reading batches from the mapped file leaves nothing resident (a map
    kept open would hold every page read and read ahead: about 700 MB here)."""
    from cli_utils import ROOT

    runs = {}
    for name, size in (("small", 10 << 20), ("big", 1 << 30)):
        proc = subprocess.run([sys.executable, "-c", PROBE, str(_token_dir(tmp_path / name, size))], cwd=ROOT,
                              capture_output=True, text=True, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
        assert proc.returncode == 0, proc.stderr
        runs[name] = json.loads(proc.stdout)
    assert (runs["small"]["streamed"], runs["big"]["streamed"]) == (False, True)
    assert runs["big"]["peak"] <= 1.5 * runs["small"]["peak"], runs
    assert runs["big"]["read_growth"] < 16 << 20, runs


@pytest.mark.parametrize("streamed", [False, True])
def test_an_eval_batch_beyond_the_eval_set_holds_the_set_once(folder, tmp_path, streamed):
    """--eval-batch-size far beyond the eval set's 12 images: one batch of those 12, on either path (padding the
    batch up to the size asked would cost gigabytes for no example)."""
    from zoo.config import resolve
    from zoo.train.input import open_input
    from zoo.train.mesh import MeshPlan

    data = zoo.data.load(f"imagefolder:{folder}", cache_dir=str(tmp_path), stream=streamed)
    loader = open_input(data, MeshPlan.from_spec(None), resolve({"batch_size": 6, "eval_batch_size": 2**31 - 1}), 0)
    try:
        assert loader.eval_batch_size == 12
        (batch,) = loader.eval_args()
        assert float(batch["weight"].sum()) == 12
    finally:
        loader.close()


def _image(root, rel: str, image: Image.Image) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    image.save(root / rel)


RED = (200, 30, 60)


def test_a_corrupt_image_met_while_streaming_is_one_expected_line(tmp_path, capsys):
    """A truncated PNG read by the stream was 'error: unexpected DataError: ... (full traceback in RUN/error-...log)':
    DataError was no ZooError, so the boundary took a corrupt file for a bug in zoo."""
    from zoo.cli.boundary import boundary

    root = tmp_path / "set"
    for rel in ("train/a/0.png", "train/b/1.png", "test/a/2.png"):
        _image(root, rel, Image.new("RGB", (4, 4), RED))
    whole = (root / "train/b/1.png").read_bytes()
    (root / "train/b/1.png").write_bytes(whole[:len(whole) // 2])
    data = zoo.data.load(f"imagefolder:{root}", cache_dir="off", stream=True)

    @boundary
    def main() -> None:
        next(zoo.data.stream(data, "train", batch_size=2, seed=0))

    with pytest.raises(SystemExit) as stop:
        main()
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 1 and err.startswith("error: reading step 0 of split 'train' failed: cannot decode "
                                                   f"image {root / 'train/b/1.png'}") and "\n" not in err


def test_a_corrupt_image_in_a_batch_no_step_trains_costs_no_checkpoint(tmp_path, capsys):
    """Streamed: the check before the last save reads the next step's batch, which no step trains. A corrupt image
    there failed the run after its last step ('cannot decode image', naming no step) and left no checkpoint; now a
    warning names the step, the state is checked on the last trained batch, and it is saved."""
    from zoo.cli import train as train_cli

    root = tmp_path / "set"
    for i in range(12):  # the train split's example i is image i (sorted by class, then name)
        _image(root, f"train/{'ab'[i // 6]}/{i:02d}.png", Image.new("RGB", (4, 4), (20 * i, 30, 60)))
    _image(root, "test/a/t.png", Image.new("RGB", (4, 4), RED))
    data = zoo.data.load(f"imagefolder:{root}", cache_dir="off", stream=True)
    trained = {int(i) for step in (0, 1) for i in data.indices("train", step, 4, 0)}
    (bad,) = [int(i) for i in data.indices("train", 2, 4, 0) if int(i) not in trained][:1]
    path = root / f"train/{'ab'[bad // 6]}/{bad:02d}.png"
    path.write_bytes(path.read_bytes()[:20])
    train_cli.main(["--model", "mlp_resnet", "--width", "8", "--depth", "1", "--batch-size", "4", "--steps", "2",
                    "--seed", "0", "--data", f"imagefolder:{root}", "--stream", "true", "--eval-every", "1000",
                    "--cache-dir", "off", "--run-dir", str(tmp_path / "run")])
    out = capsys.readouterr()
    assert (f"warning: reading step 2 of split 'train' failed: cannot decode image {path}" in out.out + out.err
            and "the state of step 2 is checked on step 1's batch instead" in out.out + out.err), out
    assert (tmp_path / "run" / "checkpoints" / "2").is_dir()


@pytest.mark.long
def test_a_corrupt_eval_image_streamed_names_the_eval_batch_and_saves_the_step(tmp_path, capsys):
    """Read directly, not through the stream, a corrupt image named its file only; as the stream's, its line names
    what was read. The eval runs before its step's checkpoint, so the failed read lost every step since the last
    one (all of a run whose first eval is its last step); now the step is saved first, and once the file is fixed
    the rerun evaluates it and finishes, training nothing again."""
    from zoo.cli import train as train_cli

    root = tmp_path / "set"
    for rel in ("train/a/0.png", "train/b/1.png", "test/a/2.png", "test/b/3.png"):
        _image(root, rel, Image.new("RGB", (4, 4), RED))
    good = (root / "test/b/3.png").read_bytes()
    (root / "test/b/3.png").write_bytes(b"not a png")
    argv = ["--model", "mlp_resnet", "--width", "8", "--depth", "1", "--batch-size", "2", "--steps", "3",
            "--data", f"imagefolder:{root}", "--stream", "true", "--cache-dir", "off", "--run-dir",
            str(tmp_path / "run")]
    with pytest.raises(SystemExit) as stop:
        train_cli.main(argv)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 1 and line.startswith(
        f"error: reading eval batch 0 of split 'test' failed: cannot decode image {root / 'test/b/3.png'}"), line
    assert line.endswith("; step 3 is saved: fix it and rerun to go on") and (tmp_path / "run/checkpoints/3").is_dir()
    (root / "test/b/3.png").write_bytes(good)
    train_cli.main(argv)
    out = capsys.readouterr()
    assert "step 3 eval:" in out.out + out.err and "compiling the train step" not in out.out + out.err, out
