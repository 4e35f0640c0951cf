"""One line for every failure (issue 16, items 6-8, 12, 16 and the error boundary): a full disk, an unreadable
checkpoint index, Ctrl-C during the compile, junk in a config file, a non-finite float to any command, and an
unexpected error (its traceback goes to a file the line names)."""

from __future__ import annotations

import errno
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from cli_utils import NOISE, ROOT, SMALL, child_env, clean_error, run_main_many, run_mains

from zoo.cli.boundary import boundary
from zoo.errors import DiskFull, log_failures_in, naming_full_disk
from zoo.files import atomic
from zoo.train.checkpoint import CheckpointError, Checkpoints

pytestmark = pytest.mark.xdist_group("failures")
# The disk as the run's checkpoints see it: full (4 KB free) from the second save on; then, in the same process, the
# same command with the space back (the two runs' stderr split by a line "=== <exit status of the first>").
FULL_AFTER_FIRST_SAVE = """
import shutil, sys
real, saves = shutil.disk_usage, []
def disk_usage(path):
    usage = real(path)
    if str(path).endswith("checkpoints"):
        saves.append(path)
    return usage._replace(free=4096) if len(saves) > 1 else usage
shutil.disk_usage = disk_usage
from zoo.cli.train import main
try:
    main(sys.argv[1:])
    code = 0
except SystemExit as e:
    code = e.code
print(f"=== {code}", file=sys.stderr, flush=True)
shutil.disk_usage = real
main(sys.argv[1:])
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=child_env(), capture_output=True,
                          text=True, timeout=240)


@pytest.mark.slow
def test_full_disk_is_one_line_and_the_run_resumes_when_space_returns(tmp_path):
    """The second checkpoint finds 4 KB free: one line naming the checkpoint, what it needs and what is free, exit
    1; the first checkpoint is intact and the same command, with space back, resumes from it and finishes."""
    run = tmp_path / "run"
    args = [*SMALL, "--steps", "6", "--ckpt-every", "2", "--run-dir", str(run)]
    proc = _python(FULL_AFTER_FIRST_SAVE, *args)
    first, marker, resumed = proc.stderr.partition("\n=== ")
    assert marker, proc.stderr
    code, _, resumed = resumed.partition("\n")
    line = clean_error(int(code), first)
    assert re.search(rf"no space left on the device writing {re.escape(str(run))}/checkpoints/4 \(it needs about "
                     r"[\d.]+ MB, 0\.0 MB are free\)", line), line
    assert first.count("\n") <= 5 and not any(word in first for word in NOISE), first
    assert proc.returncode == 0 and f"resumed {run} from step 2" in resumed, proc.stderr


def test_an_async_write_that_runs_out_of_space_is_one_disk_full_line(tmp_path):
    """orbax's writer thread fails with ENOSPC (possibly wrapped): the wait turns it into DiskFull."""
    wrapped = RuntimeError("commit failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    for error in (OSError(errno.ENOSPC, "No space left on device"), wrapped):
        with pytest.raises(DiskFull, match=f"writing {re.escape(str(tmp_path))}"):
            with naming_full_disk(tmp_path):
                raise error


@pytest.mark.parametrize("fails", ["write", "fsync"])
def test_a_file_written_whole_names_itself_when_the_disk_is_full(tmp_path, monkeypatch, fails):
    """config.json, summary.json, the curves, meta.json (zoo.files.atomic): a full disk is one DiskFull line naming
    the file and its disk, not 'writing .' (a write error names no file, so the boundary named the working folder);
    no temporary file is left."""
    import os

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "run" / "summary.json"
    target.parent.mkdir()
    if fails == "fsync":
        monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFull, match=f"^no space left on the device writing {re.escape(str(target))} "):
        with atomic(target) as f:
            if fails == "write":
                full()
            f.write("{}")
    assert list(target.parent.iterdir()) == []


@pytest.mark.slow
def test_an_unreadable_checkpoint_index_is_one_line(tmp_path):
    """A flipped bit in the newest checkpoint's OCDBT manifest: one line for it (TensorStore's spec cut off), the
    run resumes from the one before, and nothing of orbax's or absl's logging reaches the terminal."""
    run = tmp_path / "run"
    args = [*SMALL, "--steps", "4", "--ckpt-every", "2", "--run-dir", str(run)]
    from zoo.cli.train import config_from_args, parser
    from zoo.train.loop import train

    train(config_from_args(parser().parse_args(args)))  # the run to damage: made here, only its files matter
    (run / "summary.json").unlink()
    manifest = run / "checkpoints" / "4" / "state" / "manifest.ocdbt"
    raw = bytearray(manifest.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    manifest.write_bytes(bytes(raw))
    (code, err), = run_main_many([args])
    assert code == 0, err
    bad = [line for line in err.splitlines() if "checkpoints/4" in line]
    assert len(bad) == 1 and "cannot be read" in bad[0] and "tensorstore_spec" not in bad[0], err
    assert f"moved the unreadable checkpoint 4 to {run / 'corrupt' / '4'}" in err
    assert f"resumed {run} from step 2" in err and not any(word in err for word in NOISE), err


def test_damage_anywhere_in_a_checkpoint_is_one_clean_line(tmp_path):
    """8 flipped bytes at the start, middle or end of each file of a checkpoint's arrays: restoring it either
    succeeds with the saved values (bytes nothing reads) or raises CheckpointError in one line that carries none of
    TensorStore's spec or pybind11's reprs, whatever layer (manifest, b-tree, chunk, JSON, checksum) notices."""
    state = {"w": jnp.arange(4096.0).reshape(64, 64), "b": jnp.linspace(-1.0, 1.0, 64), "step": jnp.int32(7)}
    with Checkpoints(tmp_path / "src") as ckpts:
        ckpts.save(7, state, {})
    files = sorted(p.relative_to(tmp_path / "src") for p in (tmp_path / "src").rglob("*") if p.is_file()
                   and "state" in p.parts)
    outcomes = set()
    for rel in files:
        for at in (0.0, 0.5, 1.0):
            run = tmp_path / f"{len(outcomes)}-{rel.name}-{at}"
            shutil.copytree(tmp_path / "src", run)
            raw = bytearray((run / rel).read_bytes())
            start = min(int(len(raw) * at), max(len(raw) - 8, 0))
            raw[start:start + 8] = bytes(b ^ 0xFF for b in raw[start:start + 8])
            (run / rel).write_bytes(bytes(raw))
            try:
                restored, _ = Checkpoints(run, read_only=True).restore(7)
            except CheckpointError as e:
                line = str(e)
                assert "\n" not in line and len(line) < 600, line
                assert not any(w in line for w in ("pybind", "<bound", "TensorStore(", "tensorstore_spec")), line
                outcomes.add("checksum" if "fails its checksum" in line else "unreadable")
            else:
                assert jax.tree.all(jax.tree.map(lambda a, b: bool((a == b).all()), restored, state))
                outcomes.add("intact")
            shutil.rmtree(run)
    assert "unreadable" in outcomes, outcomes  # the damage was noticed somewhere


@pytest.mark.slow
def test_ctrl_c_during_the_compile_is_one_line_and_status_130(tmp_path):
    """SIGINT sent when the compile starts: one line and 130 whether it lands in the compile or (a fast compile) in
    the first steps, which the run is far too long to finish first."""
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *SMALL, "--steps", "100000", "--log-every",
                             "100000", "--run-dir", str(run)], cwd=ROOT, env=child_env(), stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("compiling the train step"):
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, "".join(lines) + rest
    assert "Traceback" not in rest and len(rest.strip().splitlines()) <= 3, rest


def test_ctrl_c_landing_in_a_finalizer_still_stops_the_command(tmp_path):
    """A Ctrl-C that Python raises inside a finalizer (as it does when the signal lands in JAX's GC callback during
    a compile) cannot propagate there; the command must still stop with its one line and status 130, not run on."""
    script = (
        "import gc, time\n"
        "from zoo.cli.boundary import boundary\n"
        "class Landing:\n"
        "    def __del__(self):\n"
        "        raise KeyboardInterrupt\n"
        "@boundary(interrupted='interrupted (Ctrl-C)')\n"
        "def main():\n"
        "    Landing()\n"
        "    gc.collect()\n"
        "    for _ in range(500):\n"
        "        time.sleep(0.01)\n"
        "    print('ran on')\n"
        "main()\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 130 and "ran on" not in proc.stdout, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.strip() == "interrupted (Ctrl-C)", proc.stderr

def test_junk_and_non_finite_values_are_one_line(tmp_path):
    """Junk nested in model_opt or param_opt of a config file names the file, the key and what it must be; every
    float of every command is checked for finiteness before anything runs."""
    (tmp_path / "junk.yaml").write_text("model_opt:\n  activation: {a: 1}\n")
    (tmp_path / "junk2.yaml").write_text("param: depth_mup\nparam_opt:\n  alpha: [1, {b: 2}]\n")
    (tmp_path / "nested.yaml").write_text("optim: {lr: .nan}\n")
    train = [["--config", str(tmp_path / "junk.yaml")], ["--config", str(tmp_path / "junk2.yaml")],
             ["--config", str(tmp_path / "nested.yaml")], [*SMALL, "--max-loss-ratio", "inf"],
             [*SMALL, "--param", "ntk_mup", "--param-opt", "s=inf"]]
    others = [  # each command through its main, all in the one interpreter
        ("zoo.cli.sweep", ["--out", str(tmp_path / "s"), "--lrs", "nan"], "learning rates"),
        ("zoo.cli.transfer", ["--out", str(tmp_path / "t"), "--lrs", "1e-3,inf"], "learning rates"),
        ("zoo.cli.criticality", ["--grid", "sigma_w=0:nan:3", "--grid", "sigma_b=0:1:3"], "sigma_w"),
        ("zoo.cli.coord_check", ["--tol", "inf"], "expected a finite number"),
    ]
    results = run_mains([*(("zoo.cli.train", argv) for argv in train), *((m, argv) for m, argv, _ in others)])
    lines = [clean_error(code, err) for code, err in results]
    assert f"config file {tmp_path / 'junk.yaml'}: model_opt.activation must be a number, a string" in lines[0]
    assert "param_opt.alpha must be" in lines[1] and "junk2.yaml" in lines[1], lines[1]
    assert "lr must be a finite number, got nan" in lines[2], lines[2]
    assert "argument --max-loss-ratio: must be a finite number, got 'inf'" in lines[3], lines[3]
    assert "option s of 'ntk_mup' must be a finite number, got 'inf'" in lines[4], lines[4]
    for (module, argv, needle), line in zip(others, lines[len(train):], strict=True):
        assert needle in line, (module, argv, line)


def test_an_unexpected_error_names_the_file_with_its_traceback(tmp_path):
    """A plugin (given as module:Class) that raises: one line with the error and where its traceback was written."""
    (tmp_path / "broken_plugin.py").write_text(
        "import dataclasses\nfrom zoo.param.base import Parametrization\n\n"
        "@dataclasses.dataclass(frozen=True)\nclass Broken(Parametrization):\n    name = 'broken'\n\n"
        "    def init_std(self, tag, std0):\n        raise RuntimeError('boom')\n")
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), *SMALL, "--param", "broken_plugin:Broken",
                           "--run-dir", str(tmp_path / "run")], cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=240)
    line = clean_error(proc.returncode, proc.stderr)
    found = re.search(r"error: unexpected RuntimeError: boom \(full traceback in (.+)\)$", line)
    assert found and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    trace = Path(found.group(1))
    assert "Traceback" in trace.read_text() and "boom" in trace.read_text()
    trace.unlink()


def test_abandoned_reads_leave_no_failure_file_but_other_background_errors_do(tmp_path, monkeypatch):
    """The echoes of orbax's abandoned reads after one read of a corrupt checkpoint failed (a coroutine that fails
    while being closed, a thread that finds asyncio's loop closed) write nothing; an error raised in a finalizer or
    another thread is still kept in the failure file."""

    class Suspend:
        def __await__(self):
            yield

    async def read():
        try:
            await Suspend()
        except GeneratorExit as e:
            raise RuntimeError("read abandoned") from e

    class Finalized:
        def __del__(self):
            raise RuntimeError("finalizer failed")

    def in_thread(message: str) -> None:
        def fail():
            raise RuntimeError(message)
        thread = threading.Thread(target=fail)
        thread.start()
        thread.join()

    def main(kind: str) -> None:
        log_failures_in(tmp_path)
        if kind == "read":
            coroutine = read()
            coroutine.send(None)
            del coroutine  # closed by its finalizer: the RuntimeError is unraisable
            in_thread("Event loop is closed")
        elif kind == "finalizer":
            Finalized()
        else:
            in_thread("callback failed")

    for hook in ("unraisablehook", "excepthook"):
        monkeypatch.setattr(sys, hook, getattr(sys, hook))  # the boundary replaces them; restored after the test
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    boundary(main)("read")
    assert list(tmp_path.iterdir()) == []
    for kind, message in (("finalizer", "finalizer failed"), ("thread", "callback failed")):
        boundary(main)(kind)
        (log,) = tmp_path.iterdir()
        assert message in log.read_text()
        log.unlink()


def test_a_refusal_after_the_run_dir_was_made_removes_it(tmp_path):
    """The compiled step's memory check (a fake that refuses) comes after the run dir was claimed: the dir this
    command made is removed, so nothing is left behind; a dir that was there before stays."""
    code = ("import sys\nfrom zoo.train import memory\n"
            "def refuse(*a, **k):\n    raise ValueError('the compiled train step needs 99.0 GB per device')\n"
            "memory.check_compiled = refuse\nfrom zoo.cli.train import main\n"
            "*argv, run, kept = sys.argv[1:]\n"
            "for run_dir in (run, kept):\n"
            "    try:\n        main([*argv, '--run-dir', run_dir])\n    except SystemExit as e:\n"
            "        print(f'=== {e.code}', file=sys.stderr, flush=True)\n")
    run, kept = tmp_path / "run", tmp_path / "kept"
    kept.mkdir()
    # both commands in one process: "run" is made by the command, "kept" was there before
    proc = _python(code, *SMALL, "--steps", "2", str(run), str(kept))
    first, second, rest = proc.stderr.split("=== ")
    assert "needs 99.0 GB" in clean_error(int(second.split()[0]), first) and not run.exists(), proc.stderr
    assert rest.strip() == "1" and kept.is_dir() and not (kept / "config.json").exists(), proc.stderr


def test_an_allocation_the_machine_cannot_make_is_one_line(capsys):
    """XLA's out-of-memory error (a size no memory check foresaw) is one line with the size, not a traceback."""

    @boundary
    def main(argv: list[str] | None = None) -> None:
        jax.block_until_ready(jax.jit(lambda: jnp.ones(2**46, jnp.float32))())  # 281 TB: beyond any address space

    with pytest.raises(SystemExit) as e:
        main()
    line = clean_error(e.value.code, capsys.readouterr().err)
    assert line.startswith("error: out of memory: this machine could not allocate 281,475.0 GB"), line


def test_python_warnings_stay_off_the_terminal():
    """A library's Python warning (matplotlib's layout note on a one-LR transfer plot) is not printed by a zoo
    command; its output and status are unaffected."""
    proc = _python("import warnings\nfrom zoo.cli.boundary import boundary\n"
                   "boundary(lambda: (warnings.warn('Tight layout not applied'), print('done')))()")
    assert proc.returncode == 0 and proc.stdout == "done\n" and "Tight layout" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("level, shown", [(None, False), ("0", True)])
def test_xlas_cpp_warnings_stay_off_the_terminal_unless_asked_for(tmp_path, level, shown):
    """The documented `--mesh fsdp=4,tensor=2` on a small GPT: XLA's SPMD partitioner printed a 'W1130 ...
    spmd_partitioner.cc ... Involuntary full rematerialization' line on stderr. zoo sets TF_CPP_MIN_LOG_LEVEL=2
    where it is not set (on import, before JAX loads); TF_CPP_MIN_LOG_LEVEL=0 shows it again."""
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "TF_CPP_MIN_LOG_LEVEL": level}
    env = {k: v for k, v in child_env(env).items() if v is not None}
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--model", "gpt", "--width", "48", "--depth", "1",
                           "--data", "synthetic:text", "--seq-len", "16", "--model-opt", "head_dim=16", "--steps", "1",
                           "--batch-size", "8", "--param", "mup", "--mesh", "fsdp=4,tensor=2", "--compile-cache",
                           "off", "--run-dir", str(tmp_path / "run")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert ("spmd_partitioner" in proc.stderr) == shown, proc.stderr


def test_ctrl_c_outside_training_does_not_speak_of_training():
    """Ctrl-C in a command other than train.py (here zoo.sample, generating) is one line and status 130 that does
    not claim training was interrupted before it started; the text drawn before it stays printed."""
    proc = _python("import zoo.sample\n"
                   "def interrupted(*args):\n    yield 'drawn'\n    raise KeyboardInterrupt\n"
                   "zoo.sample.continuation = interrupted\n"
                   "from zoo.cli.sample import main\nmain(['RUN', '--prompt', 'P'])")
    assert proc.returncode == 130 and proc.stderr.strip() == "interrupted (Ctrl-C)", proc.stderr
    assert proc.stdout == "Pdrawn"


def test_the_hosts_out_of_memory_is_the_out_of_memory_line():
    """A host allocation beyond the machine (numpy's MemoryError, or Python's bare one) is said as XLA's is: the
    size where it is known, never 'unexpected MemoryError'."""
    from numpy.exceptions import AxisError  # an error that is not about memory

    from zoo.errors import out_of_memory

    numpy_error = type("_ArrayMemoryError", (MemoryError,), {})(
        "Unable to allocate 72.8 TiB for an array with shape (1000000, 10000000) and data type float64")
    assert out_of_memory(numpy_error) == "72.8 TiB"
    assert out_of_memory(MemoryError()) == "memory"
    assert out_of_memory(AxisError(3, 2)) is None


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_reader_of_the_output_that_went_away_ends_the_command_quietly(stream, tmp_path):
    """`zoo.sweep ... | head -1` (stdout) and `train.py ... 2>&1 | head -c 3000` (stderr, mid-run): the first print
    after the reader left was 'unexpected BrokenPipeError' with a traceback file, or nothing at all with status 1.
    Now any command ends as a closed pipe ends `yes`: status 141, no traceback file; another BrokenPipeError (a
    worker's pipe) stays an error."""
    import os

    read, write = os.pipe()
    os.close(read)
    code = ("import sys, rich.console\nfrom zoo.cli.boundary import boundary\n@boundary\ndef main():\n"
            f"    console = rich.console.Console(file=sys.{stream})\n"
            "    for i in range(1000):\n        console.print('step', i)\nmain()")  # rich's answer was exit 1
    other = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    other[stream] = write
    env = {**child_env(), "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True, timeout=120, **other)
    os.close(write)
    assert proc.returncode == 128 + signal.SIGPIPE, (proc.returncode, proc.stdout, proc.stderr)
    assert not (proc.stderr or "") and not list(tmp_path.glob("error-*.log"))
    code = ("from zoo.cli.boundary import boundary\n@boundary\ndef main():\n"
            "    raise BrokenPipeError(32, 'Broken pipe')\nmain()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "unexpected BrokenPipeError" in proc.stderr, proc.stderr
