"""zoo's train step against PyTorch's on the same CPU: each of the four models (`sp`, f32, AdamW, no dropout) next
to a minimal PyTorch model of the same math (bench/torch_models.py: the zoo init copied in, so both start from
the same function), same shapes, both on all cores, at three sizes per model (a tiny one, the model's default,
and one about 4x the default's FLOPs). The GPT is also timed as a plain-JAX model of the same math
(bench/gpt_step.py), which measures zoo's own overhead (plugin multipliers, NNX merge, the tagged optax chain).

    python bench/vs_torch.py                       # every model and size, 5 interleaved pairs each
    python bench/vs_torch.py --models gpt --sizes default --pairs 7
    python bench/vs_torch.py --quick               # CI smoke test: tiny sizes, 1 pair; asserts nothing about speed

Each model and size runs in a process of its own, started as zoo's train command starts its backend for that step
(zoo.train.backend.start: on one CPU device a large step runs on the calling thread with glibc's heap kept; the
`inline` column). The heap setting is process-wide, so torch's side runs under it too. In that process the runs are
interleaved (zoo, torch[, plain JAX], then the reverse order, ...; each run times `--steps` steps after warm-up), so
machine load hits both sides alike; reported are the medians of the runs and the median of the per-pair ratios.
FLOPs per step are XLA's count of the lowered zoo step; compile time is zoo's first step.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from gpt_step import SAME_MATH, baseline_loss, baseline_params

import zoo.models
import zoo.param
from zoo.optim import OptimConfig
from zoo.train import backend, memory
from zoo.train.step import build_program, flops_of, on_leaves, run_once_options

if TYPE_CHECKING:  # torch is imported where it runs: the flags (--help) need no torch
    import torch

# Per model: a tiny size, the default (the model's config) and one of about 4x its FLOPs; the batch of each.
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "gpt": {"tiny": dict(width=128, depth=2, seq_len=64), "default": {}, "4x": dict(width=768)},
    "vit": {"tiny": dict(width=64, depth=2), "default": {}, "4x": dict(width=384)},
    "mixer": {"tiny": dict(width=64, depth=2), "default": {}, "4x": dict(width=512)},
    "mlp_resnet": {"tiny": dict(width=64, depth=2), "default": {}, "4x": dict(width=512, depth=12)},
}
BATCH = {"gpt": 8, "vit": 32, "mixer": 32, "mlp_resnet": 128}
VOCAB, CLASSES, IMAGE = 65, 10, (32, 32, 3)
LR, B2, WD = 1e-3, 0.99, 0.1


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


class Case:
    """One model at one size: zoo's jitted step, torch's step and (GPT) plain JAX's, on one random batch.

    `steps` maps each side to a function running one step and returning its loss (of the parameters before the
    step); `fast_compile` compiles at XLA's backend optimisation level 0 (the smoke test: seconds, not speed). Made
    first in its process, it starts the backend as train.py would for this step (`inline`)."""

    def __init__(self, name: str, overrides: dict[str, Any], batch: int, fast_compile: bool = False):
        self.name, self.batch = name, batch
        lm = name == "gpt"
        facts = {"vocab_size": VOCAB, "dropout": 0.0, **SAME_MATH} if lm else {"in_shape": IMAGE,
                                                                                "num_classes": CLASSES}
        cfg = self.cfg = zoo.models.config(name, **{**facts, **overrides})
        rng = np.random.default_rng(0)
        if lm:
            tokens = rng.integers(0, VOCAB, (batch, cfg.seq_len + 1))
            self.x, self.y = tokens[:, :-1].astype(np.int32), tokens[:, 1:].astype(np.int32)
        else:
            self.x = rng.standard_normal((batch, *IMAGE)).astype(np.float32)
            self.y = rng.integers(0, CLASSES, batch).astype(np.int32)
        self.options = run_once_options() if fast_compile else None
        plugin = zoo.param.get("sp")
        opt = OptimConfig(name="adamw", lr=LR, b2=B2, weight_decay=WD)
        prog = build_program(lambda r: zoo.models.create(name, cfg, plugin, r), plugin, opt)
        shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), {"x": self.x, "y": self.y})
        self.inline = backend.start(memory.forward_bytes(prog, shapes))  # as train.py: before the backend starts
        key = jax.random.PRNGKey(0)
        state = jax.jit(prog.init).lower(key).compile(run_once_options())(key)
        torch_model = self._torch_model()
        torch_model.load_zoo(jax.tree.map(np.asarray, nnx.to_pure_dict(state["params"])))
        batch_j = {"x": jnp.asarray(self.x), "y": jnp.asarray(self.y)}
        self.gflops = step_gflop(name, cfg, plugin, opt, state, batch_j)
        leaves, treedef = jax.tree.flatten(state)  # as zoo's training loop calls the step (zoo.train.compiled)
        t0 = time.perf_counter()
        compiled = (jax.jit(on_leaves(prog.train_step, treedef), donate_argnums=0).lower(leaves, batch_j)
                    .compile(self.options))
        self.compile_s = time.perf_counter() - t0
        holder = {"leaves": leaves}

        def zoo_step() -> Any:
            holder["leaves"], metrics = compiled(holder["leaves"], batch_j)
            return metrics["loss"]

        self.steps: dict[str, Callable[[], Any]] = {"zoo": zoo_step, "torch": self._torch_step(torch_model)}
        if lm:
            self.steps["jax"] = self._plain_jax(batch_j)

    def _torch_model(self) -> torch.nn.Module:
        import torch_models

        c = self.cfg
        if self.name == "gpt":
            return torch_models.GPT(VOCAB, c.seq_len, c.width, c.depth, c.head_dim)
        if self.name == "vit":
            return torch_models.ViT(c.width, c.depth, c.patch, IMAGE[0], IMAGE[2], CLASSES, c.head_dim)
        if self.name == "mixer":
            return torch_models.Mixer(c.width, c.depth, c.patch, IMAGE[0], IMAGE[2], CLASSES, c.token_dim)
        return torch_models.MLPResNet(c.width, c.depth, int(np.prod(IMAGE)), CLASSES)

    def _torch_step(self, model: torch.nn.Module) -> Callable[[], Any]:
        import torch

        # zoo decays matrices and embeddings, not vectors (biases, norms) nor scalar-kind weights (Mixer tokens)
        decayed = {n for n, p in model.named_parameters() if p.ndim >= 2 and "token_mlp" not in n}
        groups = [{"params": [p for n, p in model.named_parameters() if (n in decayed) == d],
                   "weight_decay": WD if d else 0.0} for d in (True, False)]
        opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, B2), eps=1e-8)
        x, y = torch.from_numpy(self.x), torch.from_numpy(self.y).long()
        x = x.long() if self.name == "gpt" else x

        def step() -> Any:
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.detach()

        return step

    def _plain_jax(self, batch: dict[str, jax.Array]) -> Callable[[], Any]:
        c = self.cfg
        tx = optax.adamw(LR, b2=B2, weight_decay=WD)

        def step(state, xb, yb):
            params, opt_state = state
            loss, g = jax.value_and_grad(baseline_loss)(params, xb, yb, c.width // c.head_dim, jnp.float32)
            upd, opt_state = tx.update(g, opt_state, params)
            return (optax.apply_updates(params, upd), opt_state), loss

        init = jax.jit(baseline_params, static_argnums=(1, 2, 3, 4)).lower(jax.random.key(0), VOCAB, c.seq_len,
                                                                          c.width, c.depth).compile(run_once_options())
        params = init(jax.random.key(0))
        holder = {"state": (params, tx.init(params))}
        compiled = (jax.jit(step, donate_argnums=0).lower(holder["state"], batch["x"], batch["y"])
                    .compile(self.options))

        def run() -> Any:
            holder["state"], loss = compiled(holder["state"], batch["x"], batch["y"])
            return loss

        return run


def step_gflop(name: str, cfg: Any, plugin: Any, opt: OptimConfig, state: Any, batch: Any) -> float:
    """XLA's FLOP count of the train step, from the unrolled program (a scanned loop's body counts once); nan where
    the backend counts none (a GPU behind JAX's CUDA plugin)."""
    flat = dataclasses.replace(cfg, scan=False)
    prog = build_program(lambda r: zoo.models.create(name, flat, plugin, r), plugin, opt)
    flops = flops_of(jax.jit(prog.train_step).lower(state, batch))
    return float("nan") if flops is None else flops / 1e9


def timed(step: Callable[[], Any], steps: int) -> float:
    """Seconds per step over `steps` steps (the last loss fetched, so every step has finished)."""
    t0 = time.perf_counter()
    for _ in range(steps):
        out = step()
    np.asarray(out)
    return (time.perf_counter() - t0) / steps


def same_function(case: Case) -> None:
    """zoo's and torch's first losses agree (the torch model holds zoo's init): they compute the same function."""
    zoo_loss, torch_loss = float(case.steps["zoo"]()), float(case.steps["torch"]())
    if abs(zoo_loss - torch_loss) > 1e-4 * abs(torch_loss):
        raise SystemExit(f"{case.name}: zoo and torch start from different losses ({zoo_loss} vs {torch_loss}): the "
                         "models do not compute the same function")


def measure(case: Case, sides: list[str], pairs: int, steps: int, warmup: int,
            min_run_s: float) -> dict[str, list[float]]:
    """`pairs` rounds of one run of each of `sides`; a run is `steps` steps, or more where the slowest side's runs
    would be shorter than `min_run_s` (a tiny model's 3 steps take milliseconds: noise)."""
    same_function(case)
    chosen = {k: v for k, v in case.steps.items() if k in sides}
    for step in chosen.values():
        for _ in range(warmup):
            np.asarray(step())
    slowest = max(timed(step, 1) for step in chosen.values())
    steps = max(steps, math.ceil(min_run_s / slowest))
    runs: dict[str, list[float]] = {k: [] for k in chosen}
    names = list(chosen)
    for i in range(pairs):  # the order reversed every other round: a run's speed depends on which ran before it
        for name in names if i % 2 == 0 else names[::-1]:
            runs[name].append(timed(chosen[name], steps))
    return runs


def paired_ratio(a: list[float], b: list[float]) -> float:
    """The median over interleaved pairs of a / b."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(SIZES), help="comma-separated, from " + ", ".join(SIZES))
    p.add_argument("--sizes", default="tiny,default,4x")
    p.add_argument("--pairs", type=int, default=5, help="interleaved runs of each side")
    p.add_argument("--steps", type=int, default=3, help="steps per run")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--sides", default="zoo,torch,jax", help="what is timed: zoo,jax alone measures zoo's overhead "
                   "over plain JAX without torch's threads in the process")
    p.add_argument("--min-run-s", type=float, default=1.0, help="more steps per run where a run would be shorter")
    p.add_argument("--quick", action="store_true", help="smoke test: tiny sizes, 1 pair of 1 step, quick compiles")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.pairs, args.steps, args.warmup, args.min_run_s = "tiny", 1, 1, 0, 0.0
    models, sizes = args.models.split(","), args.sizes.split(",")
    sides = args.sides.split(",")
    bad = ([m for m in models if m not in SIZES] + [s for s in sizes if s not in SIZES["gpt"]] +
           [s for s in sides if s not in ("zoo", "torch", "jax")] + ([] if "zoo" in sides else ["(no zoo side)"]))
    if bad or min(args.pairs, args.steps) < 1:
        print(f"error: unknown model, size or side {', '.join(bad)} (models: {', '.join(SIZES)}; sizes: tiny, "
              "default, 4x; sides: zoo and torch or jax), or --pairs/--steps below 1", file=sys.stderr)
        raise SystemExit(1)
    import torch

    print(f"jax {jax.__version__}, torch {torch.__version__}, {cores()} cores; {args.pairs} rounds of runs of "
          f"{args.steps}+ steps (at least {args.min_run_s:g} s); f32, AdamW")
    print(f"{'model':10s} {'size':8s} {'shape':20s} {'GFLOP':>7s} {'compile s':>9s} {'zoo ms':>9s} {'torch ms':>9s}"
          f" {'zoo/torch':>9s} {'jax ms':>8s} {'zoo/jax':>7s} inline  load")
    rows = []
    spawn = multiprocessing.get_context("spawn")
    # Each row in a fresh process, its backend not yet started; --quick times nothing, so one process serves all.
    with contextlib.ExitStack() as stack:
        shared = stack.enter_context(spawn.Pool(1)) if args.quick else None
        for name, size in itertools.product(models, sizes):
            with contextlib.nullcontext(shared) if shared else spawn.Pool(1) as pool:
                rows.append(pool.apply(case_row, (name, size, args.quick,
                                                  (sides, args.pairs, args.steps, args.warmup, args.min_run_s))))
            r = rows[-1]
            jax_cols = f"{r['jax_ms']:8.1f} {r['zoo/jax']:7.3f}" if "jax_ms" in r else f"{'':8s} {'':7s}"
            torch_cols = f"{r['torch_ms']:9.1f} {r['zoo/torch']:9.3f}" if "torch_ms" in r else f"{'':9s} {'':9s}"
            print(f"{name:10s} {size:8s} {r['shape']:20s} {r['gflop']:7.2f} {r['compile_s']:9.1f} {r['zoo_ms']:9.1f} "
                  f"{torch_cols} {jax_cols} {'yes' if r['inline'] else 'no':6s}  {r['load']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def case_row(name: str, size: str, quick: bool, measure_args: tuple[list[str], int, int, int, float]
             ) -> dict[str, Any]:
    """One table row, measured in a process of its own: the medians (ms), the paired ratios, XLA's FLOPs and
    compile time, whether zoo's steps ran inline, the load after it."""
    import torch

    torch.set_num_threads(cores())
    case = Case(name, SIZES[name][size], BATCH[name], fast_compile=quick)
    runs = measure(case, *measure_args)
    c = case.cfg
    out = {"model": case.name, "size": size, "gflop": case.gflops, "compile_s": case.compile_s,
           "shape": f"w{c.width} d{c.depth} b{case.batch}" + (f" T{c.seq_len}" if case.name == "gpt" else ""),
           **{f"{k}_ms": statistics.median(v) * 1e3 for k, v in runs.items()},
           **{f"zoo/{k}": paired_ratio(runs["zoo"], runs[k]) for k in ("torch", "jax") if k in runs},
           "inline": case.inline}
    return {**out, "load": load()}

if __name__ == "__main__":
    main()
