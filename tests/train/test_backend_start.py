"""How a run's backend starts (zoo.train.backend.start): a large step on one CPU device runs on the calling thread
with glibc's heap kept, so its temporaries are reused instead of mapped and page-faulted afresh every step; small
steps, several devices, an explicit JAX_CPU_ENABLE_ASYNC_DISPATCH or a backend already started keep JAX's default.
Each case is a fresh process: the choice can only be made before a backend starts."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from cli_utils import ROOT, child_env, run_train

from zoo.train import heap

PROBE = """
import ctypes, ctypes.util, json, resource, sys
import jax
from zoo.train import backend
if sys.argv[2] == "started":
    jax.devices()
inline = backend.start(int(sys.argv[1]))
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
block = 96 * 2**20
faults = []
for _ in range(2):  # a block past glibc's mmap ceiling, allocated, written and freed twice on this thread
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p = libc.malloc(block)
    ctypes.memset(p, 1, block)
    libc.free(p)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"inline": inline, "async": jax.config.read("jax_cpu_enable_async_dispatch"), "refaults": faults[1]}))
"""
PAGES = 96 * 2**20 // 4096


def probe(activations: int, env: dict[str, str] | None = None, started: bool = False) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, str(activations), "started" if started else "fresh"], cwd=ROOT,
                         env=child_env(env), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.skipif(not heap.is_glibc(), reason="the kept heap is glibc's")
def test_a_large_step_runs_inline_with_the_heap_kept_and_a_small_one_does_not():
    from zoo.train.backend import INLINE_FROM

    large = probe(INLINE_FROM)
    assert large["inline"] and not large["async"]
    assert large["refaults"] < PAGES // 20, large  # the freed block is reused: its pages stay mapped
    small = probe(INLINE_FROM - 1)
    assert not small["inline"] and small["async"]
    assert small["refaults"] > PAGES // 2, small  # glibc's default: mapped afresh, every page faulted in again
    for env, started in [({"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}, False),
                         ({"JAX_CPU_ENABLE_ASYNC_DISPATCH": "true"}, False), (None, True)]:
        kept = probe(INLINE_FROM, env, started)
        assert not kept["inline"] and kept["async"], (env, started, kept)


@pytest.mark.skipif(not heap.is_glibc(), reason="the kept heap is glibc's")
def test_inline_steps_train_to_the_same_losses(tmp_path):
    """A run whose step is large enough (an MLP-ResNet at batch 512: 8.5 MiB of activations) says it runs inline,
    its metrics equal those of the same run with JAX's async dispatch asked for, and the rates it shows are of the
    steps' own times (they were 9k and 1.1M img/s when a step was timed at the end of the next one)."""
    args = ["--model", "mlp_resnet", "--width", "256", "--depth", "8", "--batch-size", "512", "--data", "synthetic",
            "--steps", "4", "--eval-every", "2", "--log-every", "1"]
    runs = {}
    for name, env in [("inline", None), ("async", {"JAX_CPU_ENABLE_ASYNC_DISPATCH": "true"})]:
        out = run_train([*args, "--run-dir", str(tmp_path / name)], env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        runs[name] = out.stdout + out.stderr
        runs[name + "_metrics"] = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text()
                                   .splitlines()]
    assert "steps run on this thread" in runs["inline"] and "steps run on this thread" not in runs["async"]
    strip = [[{k: v for k, v in m.items() if "per_s" not in k and k not in ("time", "ms")} for m in runs[n]]
             for n in ("inline_metrics", "async_metrics")]
    assert strip[0] == strip[1] and len(strip[0]) >= 4
    rates = [float(r.replace(",", "")) for r in re.findall(r"([\d,]+) img/s", runs["inline"])]
    assert len(rates) >= 3 and max(rates) < 10 * min(rates), rates  # each step timed when it ends, not the next


def test_importing_zoo_starts_no_backend():
    """No module of zoo starts a backend when imported (a jit made at import with options that ask for the backend,
    say): jax.distributed.initialize, the CPU's inline steps and the device count must come before any backend
    starts, and train.py imports the training loop before it sets them."""
    code = """
import importlib, pkgutil, zoo
from jax._src import xla_bridge
names = [m.name for m in pkgutil.walk_packages(zoo.__path__, "zoo.") if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
    assert not xla_bridge.backends_are_initialized(), name
print(len(names))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) > 50  # every module was walked
