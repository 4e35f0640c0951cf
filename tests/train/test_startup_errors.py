"""Failures before a run starts are one line and a non-zero exit, and leave no run dir: a JAX_PLATFORMS this machine
cannot start (issue 16 item 9), a multi-host coordinator that never gathers every process (item 11: a line says
what it waits for, and it gives up after --coordinator-timeout), a coordinator address or port that cannot work."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_utils import ROOT, SMALL, TINY, child_env, clean_error, one_line_error, run_main_many

from zoo.cli import train as train_cli
from zoo.train import distributed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="a GPU is visible: JAX_PLATFORMS=cuda can start here")
def test_unavailable_backend_and_bad_coordinator_are_one_line(tmp_path):
    run = tmp_path / "r"
    with socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET) as busy:
        busy.bind(("::" if socket.has_ipv6 else "0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        multi = ["--num-processes", "2", "--process-id", "0", "--run-dir", str(run)]
        (backend, _), (address, _), (in_use, _) = [
            (clean_error(code, err), err) for code, err in run_main_many(
                [[*SMALL, "--steps", "1", "--run-dir", str(run)],
                 [*SMALL, "--coordinator", "nonsense", *multi],
                 [*SMALL, "--coordinator", f"127.0.0.1:{port}", *multi]], env={"JAX_PLATFORMS": "cuda"})]
    assert "JAX_PLATFORMS=cuda" in backend and "available here: cpu" in backend, backend
    assert "HOST:PORT" in address and "'nonsense'" in address, address
    assert f"cannot serve the coordinator on port {port}" in in_use, in_use
    assert not run.exists()


def test_a_coordinator_host_without_an_address_is_refused_at_once(monkeypatch):
    """A coordinator host the resolver says does not exist waited out the whole --coordinator-timeout, then gave
    the generic 'gave up' line; a resolver that cannot answer now (EAI_AGAIN) is left to JAX's retries."""
    def no_such_host(host, *_):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    with pytest.raises(ValueError, match=r"^--coordinator nosuchhost.invalid:29515: the host 'nosuchhost.invalid' "
                                         r"has no address \(Name or service not known\)$"):
        distributed.initialize("nosuchhost.invalid:29515", 2, 1, timeout_s=5)


def test_a_coordinator_that_never_gathers_every_process_gives_up_in_one_line(tmp_path):
    """Process 0 of 2 with no peer: it says it waits for 2 processes, and after --coordinator-timeout 1 s it ends
    with one line (JAX alone waits 300 s in silence, then aborts with a C++ stack dump)."""
    run = tmp_path / "r"
    address = f"127.0.0.1:{_free_port()}"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), *SMALL, "--steps", "1", "--run-dir", str(run),
                           "--coordinator", address, "--num-processes", "2", "--process-id", "0",
                           "--coordinator-timeout", "1"], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                          timeout=120)
    assert time.monotonic() - start < 60
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 2, proc.stderr
    assert f"waiting for all 2 processes at the coordinator {address}" in lines[0]
    assert lines[1].startswith("error: gave up after 1 s") and address in lines[1]
    assert not run.exists()


def test_processes_with_other_device_counts_are_one_line(tmp_path):
    """Processes of 3 and 2 CPU devices: each ended in JAX's 'cannot reshape array of size 5 into shape (2,3)' at
    the first barrier; now one line saying every process needs the same number, and no run dir."""
    run, address = tmp_path / "r", f"127.0.0.1:{_free_port()}"
    procs = [subprocess.Popen([sys.executable, str(ROOT / "train.py"), *SMALL, "--steps", "1", "--run-dir", str(run),
                               "--coordinator", address, "--num-processes", "2", "--process-id", str(i),
                               "--coordinator-timeout", "120"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=child_env({"XLA_FLAGS": f"--xla_force_host_platform_device_count={3 - i}"}))
             for i in range(2)]
    for proc, (_, err) in zip(procs, [p.communicate(timeout=300) for p in procs], strict=True):
        assert clean_error(proc.returncode, err) == (
            "error: the 2 processes have 3, 2 devices (process 0, 1, ...): every process needs the same number (on "
            "CPU, the same --xla_force_host_platform_device_count in XLA_FLAGS)"), err
    assert not run.exists()


def test_unequal_device_counts_of_three_processes_are_seen_by_each(monkeypatch):
    """Each process compared its own count times the process count with the total: of processes with 1, 2 and 3
    devices, the one with 2 (the mean) passed and failed later in JAX. The global device list names every count."""
    import types

    import jax

    devices = [types.SimpleNamespace(process_index=i) for i, n in enumerate((1, 2, 3)) for _ in range(n)]
    monkeypatch.setattr(jax, "devices", lambda: devices)
    with pytest.raises(ValueError, match=r"the 3 processes have 1, 2, 3 devices \(process 0, 1, ...\): every process "
                                         "needs the same number"):
        distributed.check_same_devices()
    monkeypatch.setattr(jax, "devices", lambda: devices[1:3] + devices[3:5])
    distributed.check_same_devices()


@pytest.mark.parametrize("bad", [dict(timeout_s=0.0), dict(timeout_s=math.nan), dict(timeout_s=math.inf),
                                 dict(coordinator="127.0.0.1:0"), dict(coordinator="127.0.0.1:99999"),
                                 dict(coordinator=":80"), dict(num_processes=2**31),
                                 dict(coordinator=None, num_processes=None),  # --process-id 1 alone
                                 dict(coordinator=None, num_processes=None, process_id=None, timeout_s=5.0)])
def test_multi_host_settings_are_checked_before_joining(bad):
    with pytest.raises(ValueError):
        distributed.initialize(**{"coordinator": "127.0.0.1:1", "num_processes": 2, "process_id": 1, **bad})


def test_coordinator_timeout_from_the_environment(monkeypatch):
    monkeypatch.setenv("ZOO_COORDINATOR_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="ZOO_COORDINATOR_TIMEOUT='soon' is not a number"):
        distributed.initialize("127.0.0.1:1", 2, 1)
    monkeypatch.setenv("ZOO_COORDINATOR_TIMEOUT", "-5")
    with pytest.raises(ValueError, match="positive number of seconds below 2\\^31 - 31, got -5"):
        distributed.initialize("127.0.0.1:1", 2, 1)
    for huge in ("2147483617", "1e12"):  # JAX's runtime takes int32 seconds: its TypeError named no flag
        monkeypatch.setenv("ZOO_COORDINATOR_TIMEOUT", huge)
        with pytest.raises(ValueError, match="positive number of seconds below"):
            distributed.initialize("127.0.0.1:1", 2, 1)


def test_a_batch_larger_than_the_training_set_is_refused_before_the_compile(tmp_path, capsys):
    """It was refused when the first batch was drawn, after the train step compiled (minutes for a large model),
    the 'compiling the train step' line before the error: now it is the one line, and nothing is on disk."""
    run = tmp_path / "r"
    line = one_line_error(train_cli.main, [*TINY, "--batch-size", "100000", "--steps", "3", "--run-dir", str(run)],
                          capsys)
    assert "batch size 100000 must be between 1 and the 4096 examples of split 'train'" in line
    assert not run.exists()


def test_a_model_parameter_without_a_tag_or_with_one_its_shape_contradicts_is_named():
    """A model that made one nnx.Param without tag= stopped in the optimizer's rules with "unexpected KeyError:
    missing key 'tag'", naming neither the parameter nor the cause; a gain [n] tagged hidden (fan-in 1) trained with
    muP's hidden LR n^-1, the coordinate check passing, and only the audit said so. The program now names each and
    says how to tag it; the tagged ones around it build as before."""
    import jax.numpy as jnp
    from flax import nnx

    import zoo.param
    from zoo.models.layers import tagged_param
    from zoo.optim import OptimConfig
    from zoo.param.tags import Tag
    from zoo.train.step import build_program

    class Net(nnx.Module):
        def __init__(self, rngs: nnx.Rngs, gain_tag: Tag | None):
            self.w = tagged_param(rngs.params(), zoo.param.get("sp"), Tag("hidden", 4, 4), (4, 4))
            self.gain = nnx.Param(jnp.ones(4), **({"tag": gain_tag} if gain_tag else {}))

        def __call__(self, x):
            return x @ self.w[...] * self.gain[...]

    build_program(lambda rngs: Net(rngs, Tag("vector", 1, 4)), zoo.param.get("sp"), OptimConfig())
    with pytest.raises(ValueError, match=r"^the model's parameter gain has no tag, which its plugin scales it by: "
                                         r"create it with zoo.models.layers.tagged_param"):
        build_program(lambda rngs: Net(rngs, None), zoo.param.get("sp"), OptimConfig())
    for wrong, why in ((Tag("hidden", 1, 4), "hidden parameters read the width, but its fan-in is 1"),
                       (Tag("output", 1, 4), "output parameters read the width, but its fan-in is 1"),
                       (Tag("vector", 1, 8), r"its fans \(1 x 8\) do not multiply to its layer's entries")):
        with pytest.raises(ValueError, match=rf"^the model's parameter gain \(4,\) is tagged {wrong.kind}, fan-in "
                                             rf"{wrong.fan_in}, fan-out {wrong.fan_out}: {why}"):
            build_program(lambda rngs, t=wrong: Net(rngs, t), zoo.param.get("sp"), OptimConfig())


def test_an_attention_option_on_a_model_without_attention_is_refused():
    """`--param-opt attn_mult=2` on an MLP-ResNet (or abcd's attn_exp on a Mixer) was recorded in the run's identity
    and changed nothing, no word said. Refused now, naming the model; a GPT takes it, and a default value is no
    option given."""
    from zoo.config import resolve
    from zoo.train.setup import setup

    small = {"width": 16, "depth": 1, "batch_size": 8, "steps": 1}
    for model, param, opt in (("mlp_resnet", "sp", {"attn_mult": 2.0}), ("mixer", "abcd", {"attn_exp": 1.0})):
        with pytest.raises(ValueError, match=rf"^--param-opt {next(iter(opt))}=[0-9.]+ scales attention logits, and "
                                             rf"{model} has no attention: leave it out$"):
            setup(resolve({**small, "model": model, "data": "synthetic", "param": param, "param_opt": opt}))
    setup(resolve({**small, "model": "mlp_resnet", "data": "synthetic", "param_opt": {"attn_mult": 1.0}}))
    gpt = setup(resolve({**small, "model": "gpt", "data": "synthetic:text", "seq_len": 8, "model_opt": {"head_dim": 8},
                         "param_opt": {"attn_mult": 2.0}}))
    assert gpt.plugin.attn_mult == 2.0
