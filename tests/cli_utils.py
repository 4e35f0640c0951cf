"""Running train.py as a user would: a subprocess in the repo root, CPU only, output to pipes (not a terminal)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

# A test runner started in the background (`cmd &` in a script) ignores SIGINT, and children inherit an ignored
# signal, so the Ctrl-C that the signal tests send would be dropped. A caught signal is reset to its default at exec:
# catching it here (as Python does by default) gives every child the terminal's behaviour.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--model", "mlp_resnet", "--width", "32", "--depth", "2", "--batch-size", "16", "--data", "synthetic",
         "--eval-every", "1000", "--log-every", "5"]
# a tiny run's settings in-process (zoo.config.resolve, then zoo.train.loop.train)
TINY_RUN = {"model": "mlp_resnet", "width": 8, "depth": 1, "data": "synthetic:teacher", "batch_size": 8,
            "eval_batch_size": 64, "log_every": 2}
NOISE = ("Traceback", "Event loop is closed", "pybind", "absl", "tensorstore", "WARNING")


def bench_script(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/NAME.py imported as a module (bench/ on the path for the scripts it imports), for its functions."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment on the CPU, with `extra`; XLA flags in `extra` join the session's (conftest.py's
    FAST_COMPILE), replacing the ones of the same name."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", **(extra or {})}
    if extra and "XLA_FLAGS" in extra:
        names = {f.split("=")[0] for f in extra["XLA_FLAGS"].split()}
        kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if f.split("=")[0] not in names]
        env["XLA_FLAGS"] = " ".join([*kept, extra["XLA_FLAGS"]])
    return env


def run_train(args: list[str], env: dict[str, str] | None = None, timeout: float = 600,
              **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "train.py"), *args], cwd=ROOT, env=child_env(env),
                          capture_output=True, text=True, timeout=timeout, **popen)


def start_train(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=ROOT, env=child_env(env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for_rows(run: Path, proc: subprocess.Popen, rows: int, timeout: float = 180) -> None:
    """Until metrics.jsonl has `rows` rows (the run is training); asserts it is still running."""
    metrics = run / "metrics.jsonl"
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= rows:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished (or failed) before it could be interrupted: " + (
        proc.stderr.read() if proc.stderr else "")


_MAINS = """
import contextlib, importlib, io, json, sys, traceback
out = []
for module, argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    code = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            importlib.import_module(module).main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc(file=err)
            code = -1
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""


def run_mains(calls: list[tuple[str, list[str]]], timeout: float = 240, env: dict[str, str] | None = None
              ) -> list[tuple[int, str]]:
    """Each (module, argv) through `module.main(argv)` in ONE subprocess, in order (one interpreter and its JAX
    runtime serve many commands): (exit status, stderr) each, stdout dropped; an exception escaping main shows as a
    traceback."""
    proc = subprocess.run([sys.executable, "-c", _MAINS, json.dumps(calls)], cwd=ROOT, env=child_env(env),
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return [tuple(r) for r in json.loads(proc.stdout.splitlines()[-1])]


def run_main_many(argvs: list[list[str]], timeout: float = 240, env: dict[str, str] | None = None
                  ) -> list[tuple[int, str]]:
    """Each argv through `zoo.cli.train.main` in ONE subprocess (run_mains)."""
    return run_mains([("zoo.cli.train", argv) for argv in argvs], timeout, env)


def final_params(run_dir: Path) -> dict[str, np.ndarray]:
    from zoo.train.load import read_params

    return read_params(run_dir)[0]


def assert_same_params(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def metrics(run: Path, split: str = "train") -> list[dict]:
    return [r for r in (json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines())
            if r["split"] == split]


def one_clean_line(proc: subprocess.CompletedProcess) -> str:
    """The error line of a failed run; asserts there is no traceback."""
    return clean_error(proc.returncode, proc.stderr)


def clean_error(code: int, stderr: str) -> str:
    assert code not in (0, -1), stderr
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "no error message"
    return lines[-1]


def kill_after_checkpoint(args: list[str], run: Path, step: int, timeout: float = 180) -> None:
    """Starts train.py with `args` in `run` and SIGKILLs it once a checkpoint at `step` or later is on disk (it must
    still be running then)."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args, "--run-dir", str(run)], cwd=ROOT,
                            env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        steps = [int(p.name) for p in (run / "checkpoints").glob("*") if p.name.isdigit()] if run.exists() else []
        if steps and max(steps) >= step:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def one_line_error(main, argv: list[str], capsys) -> str:
    """main(argv) refuses with exit status 1 or 2, one line on stderr, no traceback and nothing on stdout (as if it
    were a result); that line."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    out = capsys.readouterr()
    lines = [line for line in out.err.splitlines() if line.strip()]
    assert stop.value.code in (1, 2) and len(lines) == 1 and "Traceback" not in lines[0], lines
    assert not out.out, out.out
    return lines[0]


TINY = ["--model", "mlp_resnet", "--width", "8", "--depth", "1", "--batch-size", "8", "--data", "synthetic",
        "--eval-every", "1000", "--log-every", "1000"]


def saved_run(run_dir: Path, steps: tuple[int, ...] = (2, 4), argv: list[str] | None = None) -> Path:
    """A run dir as train.py leaves it (config.json, and a checkpoint at each of `steps` with the metadata the loop
    saves), made in this process for tests of its readers: its state has the run's shapes and types and holds zeros
    (no init or train step is compiled)."""
    import jax
    import jax.numpy as jnp

    from zoo.cli.train import config_from_args, parser
    from zoo.data import card
    from zoo.train.checkpoint import Checkpoints
    from zoo.train.setup import setup

    cfg = config_from_args(parser().parse_args([*(argv or TINY), "--steps", str(max(steps)), "--run-dir",
                                                str(run_dir)]))
    s = setup(cfg)
    state = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), jax.eval_shape(s.program.init, jax.random.PRNGKey(0)))
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(s.cfg.to_json(), indent=2))
    with Checkpoints(run_dir, keep=len(steps)) as ckpts:
        for step in steps:
            ckpts.save(step, state, {"step": step, "data_position": step, "config": s.cfg.to_json(),
                                     "plugin": s.plugin.spec(), "first_loss": None, "summary_extra": {},
                                     "train_examples": s.data.size("train"), **card.record(s.data)})
    return run_dir


def metadata_files(run_dir: Path) -> list[Path]:
    """The metadata file (meta/metadata) of each checkpoint of a run dir."""
    return sorted(p for p in (run_dir / "checkpoints").glob("*/meta/metadata"))


def exported_model(out: Path):
    """The export as another program would see it: the SP model its config.json builds, with the params read back
    by path (as --init-from reads them). Returns (config, logits(params, x) to trace, params, loaded, meta)."""
    import jax
    from flax import nnx

    import zoo.models as M
    import zoo.param as P
    from zoo.config import RunConfig
    from zoo.train.load import read_params
    from zoo.train.setup import setup
    from zoo.tree import key_path

    cfg = RunConfig.from_json(json.loads((out / "config.json").read_text()))
    model_cfg = setup(cfg).model_cfg

    def create():
        return M.create(cfg.model.name, model_cfg, P.get(cfg.param.name), nnx.Rngs(0))

    loaded, meta = read_params(out)
    graphdef, params = nnx.split(nnx.eval_shape(create), nnx.Param, ...)[:2]
    flat, treedef = jax.tree_util.tree_flatten_with_path(params)
    assert {key_path(p) for p, _ in flat} == set(loaded)
    params = jax.tree_util.tree_unflatten(treedef, [loaded[key_path(p)] for p, _ in flat])

    def logits(params, x):  # the multipliers from the SP model's own init (the rest of it is dead code)
        return nnx.merge(graphdef, params, nnx.split(create(), nnx.Param, ...)[2])(x)[0]

    return cfg, logits, params, loaded, meta
