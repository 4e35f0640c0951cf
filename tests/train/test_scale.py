"""Sharded models, multi-host, gradient accumulation, rematerialisation and the presets (issue 10).

Meshes need several devices: they run in subprocesses with 8 forced CPU devices (or 2 processes of 4 through
jax.distributed and gloo), and their losses are compared with a 1-device run of the same GPT."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest
import yaml
from cli_utils import ROOT, child_env, clean_error, metrics, run_mains

import zoo.models
import zoo.param
from zoo.config import RunConfig, resolve
from zoo.config_file import read_file
from zoo.optim import OptimConfig
from zoo.train.setup import setup
from zoo.train.step import build_program, run_once_options

GPT = ["--model", "gpt", "--width", "64", "--depth", "1", "--batch-size", "16", "--seq-len", "32", "--data",
       "shakespeare", "--log-every", "1", "--eval-every", "1000", "--eval-batch-size", "64", "--warmup", "2",
       "--schedule", "constant", "--ckpt-every", "10"]  # constant: 10 and 11 steps share their LRs
MESHES = ["data=8", "fsdp=8", "fsdp=4,tensor=2"]  # data, fsdp and tensor axes, and two at once
EIGHT = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}


def _losses(run) -> np.ndarray:
    return np.array([r["loss"] for r in metrics(run)])


def _held(stderr: str) -> float:
    return float(re.search(r"optimizer state ([0-9.]+) MiB per device", stderr).group(1))


def _train_here(argv: list[str]) -> None:
    """train.py's run of `argv` in this process (its one CPU device): the 1-device runs need no interpreter of
    their own."""
    from zoo.cli.train import config_from_args, parser
    from zoo.train.loop import train

    train(config_from_args(parser().parse_args(argv)))


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    """The 1-device reference: 11 steps (the 11th is the next step after a checkpoint at 10)."""
    run = tmp_path_factory.mktemp("one") / "run"
    _train_here([*GPT, "--steps", "11", "--run-dir", str(run)])
    return _losses(run)


@pytest.mark.long
@pytest.mark.xdist_group("mesh")
def test_meshes_equal_one_device_and_checkpoints_move_between_meshes(tmp_path, one_device, capsys):
    """10 GPT steps on 8 CPU devices under data=8, fsdp=8 and fsdp=4,tensor=2 give the 1-device
    losses (f32, rtol 1e-5); fsdp=8 holds at most 1/6 of data=8's parameter and optimizer bytes per device; the
    checkpoint saved under fsdp=4,tensor=2 continues (--fork-from, one more step) under data=8 and under 1 device
    with the 1-device run's next-step loss. Meshes that do not divide the devices, the batch or any split model
    dimension are one line, and so is a tensor axis on a model with nothing for it to split; an fsdp axis that
    divides no parameter (it replicated every one, without a word); and the audit refuses what train.py refuses (it
    printed JAX's sharding error for a batch the mesh cannot split, and measured under a tensor axis no run has)."""
    runs = {m: tmp_path / m.replace(",", "_").replace("=", "") for m in MESHES}
    bad = [([*GPT, "--mesh", "data=3"], "must equal the 8 devices"),
           ([*GPT, "--mesh", "fsdp=8", "--batch-size", "12"], "not divisible by the 8 ways"),
           ([*GPT, "--mesh", "tensor=8", "--width", "20", "--model-opt", "head_dim=4", "--model-opt", "mlp_ratio=1"],
            "divides none of the model's head or MLP dimensions"),
           (["--model", "mlp_resnet", "--width", "32", "--depth", "1", "--data", "synthetic", "--batch-size", "16",
             "--mesh", "data=4,tensor=2"], "--mesh tensor=2: the model has no head or MLP dimension for the tensor "
                                           "axis to split (the transformers' and the Mixer's have); use data and fsdp"),
           ([*GPT, "--mesh", "fsdp=2", "--width", "21", "--seq-len", "31", "--model-opt", "head_dim=7", "--model-opt",
             "mlp_ratio=1"], "--mesh fsdp=2 divides none of the model's parameter dimensions"),  # 21, 31, 65 tokens
           ([*GPT, "--mesh", "fsdp=3"], "fsdp x tensor = 3 does not divide the 8 devices present")]
    audit = ["--model", "mlp_resnet", "--widths", "16,32", "--depth", "1"]
    bad_audits = [([*audit, "--mesh", "data=8", "--batch-size", "12"], "--batch-size 12 is not divisible by the 8"),
                  ([*audit, "--mesh", "data=8", "--batch-size", "16", "--grad-accum", "4"],
                   "the microbatch (--batch-size / --grad-accum 4) 4 is not divisible by the 8 ways"),
                  ([*audit, "--mesh", "data=4,tensor=2"], "--mesh tensor=2: the model has no head or MLP dimension")]
    src, to8, to1 = runs["fsdp=4,tensor=2"], tmp_path / "to8", tmp_path / "to1"
    argvs = [[*GPT, "--steps", "10", "--mesh", m, "--run-dir", str(runs[m])] for m in MESHES]
    argvs += [[*args, "--steps", "10", "--run-dir", str(tmp_path / f"bad{i}")] for i, (args, _) in enumerate(bad)]
    argvs += [[*GPT, "--steps", "11", "--mesh", "data=8", "--fork-from", str(src), "--run-dir", str(to8)]]
    out = run_mains([("zoo.cli.train", argv) for argv in argvs] + [("zoo.cli.audit", argv) for argv, _ in bad_audits],
                    env=EIGHT, timeout=600)  # in order: the fork reads the finished fsdp=4,tensor=2 run
    out, audits = out[:len(argvs)], out[len(argvs):]
    for (args, expect), (code, err) in zip(bad_audits, audits, strict=True):
        assert code != 0 and expect in clean_error(code, err), (args, err)
    for m, (code, err) in zip(MESHES, out, strict=False):
        assert code == 0 and "on 8 cpu device(s)" in err, err
        np.testing.assert_allclose(_losses(runs[m]), one_device[:10], rtol=1e-5, err_msg=m)
    assert _held(out[1][1]) <= _held(out[0][1]) / 6
    for (args, expect), (code, err) in zip(bad, out[len(MESHES):-1], strict=True):
        assert expect in clean_error(code, err), (args, err)

    code, err = out[-1]
    assert code == 0 and f"forked {src} at step 10" in err, err
    capsys.readouterr()
    _train_here([*GPT, "--steps", "11", "--fork-from", str(src), "--run-dir", str(to1)])
    assert f"forked {src} at step 10" in capsys.readouterr().err
    for run in (to8, to1):
        np.testing.assert_allclose(_losses(run)[-1], one_device[10], rtol=1e-5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.long
@pytest.mark.xdist_group("mesh")
def test_two_processes_train_as_one_program(tmp_path, one_device, capsys):
    """Two processes on 127.0.0.1 (jax.distributed, gloo, 4 CPU devices each) train 10 GPT steps with the
    1-device losses, each reading only its half of every batch; their checkpoint continues in one process."""
    run = tmp_path / "multi"
    outs = _two_processes([[*GPT, "--steps", "10", "--run-dir", str(run)]] * 2)
    for code, out, err in outs:
        assert code == 0, out + err
    outs = [(out, err) for _, out, err in outs]
    assert "process 0 of 2 reads rows 0:8 of every batch of 16" in outs[0][1]
    assert "process 1 of 2 reads rows 8:16 of every batch of 16" in outs[1][1]
    assert "step 10/10" in outs[0][1] and "step 10/10" not in outs[1][1]  # only process 0 reports
    np.testing.assert_allclose(_losses(run), one_device[:10], rtol=1e-5)
    one = tmp_path / "one"
    capsys.readouterr()
    _train_here([*GPT, "--steps", "11", "--fork-from", str(run), "--run-dir", str(one)])
    assert f"forked {run} at step 10" in capsys.readouterr().err
    np.testing.assert_allclose(_losses(one)[-1], one_device[10], rtol=1e-5)


@pytest.mark.long
@pytest.mark.xdist_group("mesh")
@pytest.mark.parametrize("flags, differ", [(["--lr", "0.01"], "lr 0.01 there, 0.001 in process 0"),
                                           (["--num-processes", "3"], "num_processes 3 there, 2 in process 0")])
def test_processes_started_with_other_settings_are_refused_on_every_process(tmp_path, flags, differ):
    """A second process given another --lr joined and trained silently, its gradients averaged with the first's: the
    run was neither setting's; one given --num-processes 3 (as process 1) joined process 0's run of 2. Now both
    processes end with the same one line before anything is written."""
    argv = [*GPT, "--steps", "3", "--run-dir", str(tmp_path / "run")]
    outs = _two_processes([argv, [*argv, *flags]])
    for code, _, err in outs:
        assert clean_error(code, err) == (f"error: process 1 was started with other settings than process 0 ({differ}"
                                          "); start every process with the same flags"), err
    assert not (tmp_path / "run").exists()


def _two_processes(argvs: list[list[str]]) -> list[tuple[int, str, str]]:
    """train.py's `argvs[i]` as process i of two on 127.0.0.1 (jax.distributed, gloo, 4 CPU devices each; an argv
    may give another --num-processes): each one's exit status, stdout and stderr."""
    port = _free_port()
    env = child_env({"XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    procs = [subprocess.Popen([sys.executable, str(ROOT / "train.py"), "--coordinator", f"127.0.0.1:{port}",
                               "--num-processes", "2", "--process-id", str(i), *argv], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i, argv in enumerate(argvs)]
    outs = [p.communicate(timeout=600) for p in procs]
    return [(p.returncode, *out) for p, out in zip(procs, outs, strict=True)]


def _program(model: str, accum: int = 1, remat: bool = False, **cfg):
    plugin = zoo.param.get("mup")
    model_cfg = zoo.models.config(model, remat=remat, **cfg)
    return build_program(lambda r: zoo.models.create(model, model_cfg, plugin, r), plugin,
                         OptimConfig(name="adam", lr=3e-3), grad_accum=accum)


def _batch(model: str, n: int, tokens: int = 16):
    rng = np.random.default_rng(0)
    if model == "gpt":
        x = rng.integers(0, 32, (n, tokens)).astype(np.int32)
        return {"x": x, "y": np.roll(x, -1, 1)}
    return {"x": rng.integers(0, 256, (n, 8, 8, 3)).astype(np.uint8), "y": rng.integers(0, 10, n).astype(np.int32)}


@pytest.mark.long
@pytest.mark.parametrize("model, cfg", [
    ("mlp_resnet", dict(width=64, depth=3, base_width=32, in_shape=(8, 8, 3))),
    ("gpt", dict(width=64, depth=2, base_width=64, vocab_size=32, seq_len=16, dropout=0.0)),
])
def test_grad_accumulation_equals_the_whole_batch(model, cfg):
    """--grad-accum 4 (microbatches of B/4 scanned in the step) gives batch B's mean gradient (per parameter, error
    <= 1e-5 of its norm, plus 1e-7 of the global norm for gradients that vanish mathematically, like a key bias's)
    and its losses over 3 Adam steps (f32, rtol 1e-5)."""
    batch = _batch(model, 16)
    losses, grads = [], []
    for accum in (1, 4):
        prog = _program(model, accum, **cfg)
        state = prog.init(jax.random.PRNGKey(0))

        def both(state, batch, prog=prog):  # one compile per accum: the gradient comes with the step
            return prog._grads(state, batch, jax.random.PRNGKey(1))[1], *prog.train_step(state, batch)

        # 3 steps of tiny shapes: compiling is the cost, and XLA's backend optimisation off halves it (both arms
        # alike; the accumulation is the same arithmetic)
        step = jax.jit(both).lower(state, batch).compile(run_once_options())
        out = []
        for t in range(3):
            g, state, m = step(state, batch)
            grads += [jax.tree.leaves(g)] if t == 0 else []
            out.append(float(m["loss"]))
        losses.append(out)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    total = np.sqrt(sum(np.sum(np.square(b)) for b in grads[0]))
    for a, b in zip(*grads, strict=True):
        assert np.linalg.norm(a - b) <= 1e-5 * np.linalg.norm(b) + 1e-7 * total


@pytest.mark.long
def test_remat_keeps_losses_and_lowers_peak_memory():
    """--remat block recomputes each block in the backward pass: the same losses, and XLA's compiled temporary
    memory of the train step is lower (activations dominate at batch 64 x 64 tokens, width 32)."""
    cfg = dict(width=32, depth=3, base_width=32, head_dim=16, vocab_size=32, seq_len=64, dropout=0.0)
    batch = _batch("gpt", 64, 64)
    losses, temp = [], []
    for remat in (False, True):
        prog = _program("gpt", remat=remat, **cfg)
        state = prog.init(jax.random.PRNGKey(0))
        # 2 steps: compiling is the cost; XLA's backend optimisation off halves it and leaves the buffer assignment
        # (temp bytes: 73.8 vs 29.5 MB either way) and the losses as they were
        compiled = jax.jit(prog.train_step).lower(state, batch).compile(run_once_options())
        temp.append(compiled.memory_analysis().temp_size_in_bytes)
        out = []
        for _ in range(2):
            state, m = compiled(state, batch)
            out.append(float(m["loss"]))
        losses.append(out)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-6)
    assert temp[1] < 0.6 * temp[0], temp


PRESETS = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))


@pytest.mark.parametrize("model", ["mlp_resnet", "mixer", "vit", "gpt"])
def test_print_config_is_the_models_recipe(model, capsys):
    """`train.py --model M --print-config` prints what --model M runs: the model's recipe over the schema's defaults,
    nested by part; the printed YAML, given back as --config, resolves to the same config."""
    from zoo.cli.train import main

    main(["--model", model, "--print-config"])
    printed = yaml.safe_load(capsys.readouterr().out)
    cfg = resolve({"model": model})
    assert printed == cfg.to_json()
    recipe = zoo.models.recipe(model)
    assert recipe and all(cfg.flat()[k] == v for k, v in recipe.items())
    assert RunConfig.from_json(printed) == cfg


@pytest.mark.long
@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_builds_and_trains_two_steps(name):
    """Each configs/*.yaml, shrunk (width 64, depth 1, batch 8 as 2 microbatches, synthetic data of its kind,
    32-token windows or 32x32 images), builds its model and program and trains 2 steps to a finite loss."""
    values = read_file(str(ROOT / "configs" / name))
    text = values.get("model") == "gpt"  # read_file gives flat settings
    shrink = {"width": 64, "depth": 1, "batch_size": 8, "grad_accum": 2, "steps": 2,
              **({"data": "synthetic:text", "seq_len": 32} if text else {"data": "synthetic", "image_size": 32})}
    s = setup(resolve(shrink, values))
    state = jax.jit(s.program.init, compiler_options=run_once_options())(jax.random.PRNGKey(0))
    step = jax.jit(s.program.train_step, compiler_options=run_once_options())  # 2 steps: compiling is the cost
    for t in range(2):
        batch = s.data.read("train", s.data.indices("train", t, 8, 0))
        state, metrics = step(state, batch)
        assert np.isfinite(float(metrics["loss"])), name


@pytest.mark.long
def test_sweep_members_split_over_devices_equal_one_device(tmp_path):
    """A vmapped sweep of 8 members on 8 devices (a data mesh, one member each, optimizer state sharded with them)
    gives the 1-device results to float precision: rtol 1e-5.

    Why that tolerance, and why momentum SGD. The two runs add the same numbers in a different order (a batched
    contraction over 8 vmapped members on one device, a plain one per device: float reassociation, not a different
    computation; the 8-device run equals training the members one at a time on one device to 2e-7). With momentum
    the update is linear in the gradient, so the reassociation stays at float level: over these 10 steps the 1- and
    8-device losses agree to 2.2e-7 relative, as do the 1-device run and a rerun with every initial weight moved by
    one ulp, while neighbouring members differ by 1.4e-3 or more. Under Adam with eps = 1e-8 (this test's earlier
    setting) one member of 8 moved by 8.7e-4: Adam's update g / (|g| + eps) turns the rounding noise of a gradient
    entry within a few eps of 0 (4e-8 in the embedding at step 1, against 1.6e-2 typical) into an O(lr) change, and
    the loss followed from step 5. The vmapped and the one-at-a-time runs on one device differ the same way, and
    with eps = 1e-6 the 1- and 8-device Adam runs agree to 3e-7 again: the trajectory's own sensitivity, not the
    device split."""
    args = ["-m", "zoo.sweep", "--model", "mlp_resnet", "--param", "mup", "--width", "32", "--depth", "2", "--lrs",
            "2^-9:2^-5.5:0.5", "--optimizer", "momentum", "--steps", "10", "--batch-size", "16", "--data",
            "synthetic"]
    from zoo.cli.sweep import build_spec, parser
    from zoo.sweeps.runner import run_sweep

    out = {}
    for devices in (1, 8):
        run = tmp_path / f"d{devices}"
        if devices == jax.device_count():  # this process's devices (an in-process sweep before may have made 2)
            run_sweep(build_spec(parser().parse_args([*args[2:], "--out", str(run)])))
        else:
            flags = f"--xla_force_host_platform_device_count={devices}"
            proc = subprocess.run([sys.executable, *args, "--out", str(run)], cwd=ROOT, capture_output=True,
                                  text=True, env=child_env({"XLA_FLAGS": flags}))
            assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
        out[devices] = np.array([[r["train_loss"], r["eval_loss"]] for r in sorted(rows, key=lambda r: r["lr"])])
    assert out[1].shape == (8, 2) and np.min(np.abs(np.diff(out[1][:, 0]))) > 1e-3 * out[1][0, 0]
    np.testing.assert_allclose(out[8], out[1], rtol=1e-5)
