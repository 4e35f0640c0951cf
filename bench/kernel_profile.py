"""Where a step's device time goes: a few calls traced with jax.profiler, the device's kernels summed by name and by
kind (matrix products, attention, reductions, elementwise fusions, copies, scatters) per call, against the step's
wall time (the rest is the device waiting: launch gaps, host work).

    times = kernel_times(run, calls=5, folder=tmp)   # run() -> a value of the step (blocked on after the last call)
    print("\n".join(summary(times, calls=5, step_s=0.025)))
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

# A kernel's kind from its name, the first match in this order: cuBLAS (nvjet, xmma, cutlass) and XLA's Triton
# products (gemm_fusion), cuDNN's fused attention (sdpa), XLA's fusions by their names' first words.
KINDS = (("matmul", r"gemm|nvjet|xmma|cutlass|gemv|matmul|wgmma|\bdot"), ("attention", r"sdpa|fmha|flash|attention"),
         ("scatter/gather", r"scatter|gather"), ("reduction", r"reduc"), ("copy", r"copy|transpose|memcpy|memset"),
         ("elementwise", r"fusion|loop|convert|multiply|add"))


def kind(name: str) -> str:
    low = name.lower()
    return next((k for k, pattern in KINDS if re.search(pattern, low)), "other")


def kernel_times(run: Callable[[], Any], calls: int, folder: str | Path) -> dict[str, tuple[int, float]] | None:
    """Kernel name -> (launches, total ns) over `calls` calls of run(), from the device planes' stream lines of the
    trace written under `folder`; None where the trace has no device plane (XLA:CPU)."""
    from jax._src.lib import _profile_data  # jax.profiler.ProfileData in later versions

    with jax.profiler.trace(str(folder)):
        out = None
        for _ in range(calls):
            out = run()
        jax.block_until_ready(out)
    newest = max(Path(folder).rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    profile = getattr(jax.profiler, "ProfileData", _profile_data.ProfileData).from_file(str(newest))
    planes = [p for p in profile.planes if p.name.startswith("/device:")]
    if not planes:
        return None
    times: dict[str, tuple[int, float]] = {}
    for plane in planes:
        lines = list(plane.lines)
        streams = [line for line in lines if line.name.startswith("Stream")] or lines
        for line in streams:
            for event in line.events:
                n, total = times.get(event.name, (0, 0.0))
                times[event.name] = (n + 1, total + event.duration_ns)
    return times


def summary(times: dict[str, tuple[int, float]] | None, calls: int, step_s: float, top: int = 12) -> list[str]:
    """Lines: device busy time per call against the step time, each kind's share, the `top` kernels."""
    if times is None:
        return ["no device plane in the trace (XLA:CPU): no kernels to break down"]
    busy = sum(t for _, t in times.values()) / calls / 1e6
    lines = [f"device kernels {busy:.2f} ms per step of {step_s * 1e3:.2f} ms ({busy / (step_s * 1e3):.0%} busy), "
             f"{sum(n for n, _ in times.values()) / calls:.0f} launches per step"]
    by_kind: dict[str, list[float]] = {}
    for name, (n, t) in times.items():
        acc = by_kind.setdefault(kind(name), [0, 0.0])
        acc[0], acc[1] = acc[0] + n, acc[1] + t
    for k, (n, t) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"  {k:15s} {t / calls / 1e6:7.2f} ms  {t / calls / 1e6 / busy:4.0%}  {n / calls:5.0f} launches")
    lines.append(f"top {top} kernels (ms per step, launches per step):")
    for name, (n, t) in sorted(times.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"  {t / calls / 1e6:7.3f} ms {n / calls:4.0f}x  {kind(name):12s} {name[:90]}")
    return lines
