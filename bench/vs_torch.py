"""zoo's train step against PyTorch's on the same CPU: each of the four models (`sp`, f32, AdamW, no dropout) next
to a minimal PyTorch model of the same math (bench/torch_models.py: the zoo init copied in, so both start from
the same function), same shapes, both on all cores, at three sizes per model (a tiny one, the model's default,
and one about 4x the default's FLOPs). The GPT is also timed as a plain-JAX model of the same math
(bench/gpt_step.py), which measures zoo's own overhead (plugin multipliers, NNX merge, the tagged optax chain).

    python bench/vs_torch.py                       # every model and size, 5 interleaved pairs each
    python bench/vs_torch.py --models gpt --sizes default --pairs 7
    python bench/vs_torch.py --quick               # CI smoke test: tiny sizes, 1 pair; asserts nothing about speed

Runs are interleaved in one process (zoo, torch[, plain JAX], zoo, torch, ...; each run times `--steps` steps
after warm-up), so machine load hits both sides alike; reported are the medians of the runs and the median of
the per-pair ratios. FLOPs per step are XLA's count of the compiled zoo step; compile time is zoo's first step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch
import torch_models
from flax import nnx
from gpt_step import baseline_loss, baseline_params

import zoo.models
import zoo.param
from zoo.optim import OptimConfig
from zoo.train.step import build_program

# Per model: a tiny size, the default (the model's config) and one of about 4x its FLOPs; the batch of each.
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "gpt": {"tiny": dict(width=128, depth=2, seq_len=64), "default": {}, "4x": dict(width=768)},
    "vit": {"tiny": dict(width=64, depth=2), "default": {}, "4x": dict(width=384)},
    "mixer": {"tiny": dict(width=64, depth=2), "default": {}, "4x": dict(width=512)},
    "mlp_resnet": {"tiny": dict(width=64, depth=2), "default": {}, "4x": dict(width=512, depth=16)},
}
BATCH = {"gpt": 8, "vit": 32, "mixer": 32, "mlp_resnet": 128}
VOCAB, CLASSES, IMAGE = 65, 10, (32, 32, 3)
LR, B2, WD = 1e-3, 0.99, 0.1


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


class Case:
    """One model at one size: zoo's jitted step, torch's step and (GPT) plain JAX's, on one random batch."""

    def __init__(self, name: str, overrides: dict[str, Any], batch: int):
        self.name = name
        lm = name == "gpt"
        facts = {"vocab_size": VOCAB, "dropout": 0.0} if lm else {"in_shape": IMAGE, "num_classes": CLASSES}
        cfg = zoo.models.config(name, **{**facts, **overrides})
        self.cfg = cfg
        rng = np.random.default_rng(0)
        if lm:
            x = rng.integers(0, VOCAB, (batch, cfg.seq_len + 1))
            self.x, self.y = x[:, :-1].astype(np.int32), x[:, 1:].astype(np.int32)
        else:
            self.x = rng.standard_normal((batch, *IMAGE)).astype(np.float32)
            self.y = rng.integers(0, CLASSES, batch).astype(np.int32)
        plugin = zoo.param.get("sp")
        opt = OptimConfig(name="adamw", lr=LR, b2=B2, weight_decay=WD)
        prog = build_program(lambda r: zoo.models.create(name, cfg, plugin, r), plugin, opt)
        state = jax.jit(prog.init)(jax.random.PRNGKey(0))
        zoo_params = nnx.to_pure_dict(state["params"])
        batch_j = {"x": jnp.asarray(self.x), "y": jnp.asarray(self.y)}
        step = jax.jit(lambda s, b: prog.train_step(s, b), donate_argnums=0)
        t0 = time.perf_counter()
        compiled = step.lower(state, batch_j).compile()
        self.compile_s = time.perf_counter() - t0
        self.gflops = compiled.cost_analysis().get("flops", float("nan")) / 1e9
        self.first_loss = {"zoo": float(jax.jit(prog.eval_step)(state, batch_j)["loss"])}
        holder = {"state": state}

        def zoo_step() -> Any:
            holder["state"], m = compiled(holder["state"], batch_j)
            return m["loss"]

        self.steps: dict[str, Callable[[], Any]] = {"zoo": zoo_step}
        self.steps["torch"], self.first_loss["torch"] = self._torch(zoo_params, lm)
        if lm:
            self.steps["jax"] = self._plain_jax(cfg, batch_j)

    def _torch(self, zoo_params: dict, lm: bool) -> tuple[Callable[[], Any], float]:
        c = self.cfg
        if self.name == "gpt":
            model = torch_models.GPT(VOCAB, c.seq_len, c.width, c.depth, c.head_dim)
        elif self.name == "vit":
            model = torch_models.ViT(c.width, c.depth, c.patch, IMAGE[0], IMAGE[2], CLASSES, c.head_dim)
        elif self.name == "mixer":
            model = torch_models.Mixer(c.width, c.depth, c.patch, IMAGE[0], IMAGE[2], CLASSES, c.token_dim)
        else:
            model = torch_models.MLPResNet(c.width, c.depth, int(np.prod(IMAGE)), CLASSES)
        model.load_zoo(jax.tree.map(np.asarray, zoo_params))
        # zoo decays matrices and embeddings, not vectors (biases, norms) nor scalar-kind weights (Mixer tokens)
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "token_mlp" not in n]
        rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "token_mlp" not in n)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
                                lr=LR, betas=(0.9, B2), eps=1e-8)
        x, y = torch.from_numpy(self.x), torch.from_numpy(self.y).long()
        if lm:
            x = x.long()

        def loss_fn() -> torch.Tensor:
            logits = model(x)
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

        with torch.no_grad():
            first = float(loss_fn())

        def step() -> Any:
            loss = loss_fn()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.detach()

        return step, first

    def _plain_jax(self, cfg: Any, batch: dict[str, jax.Array]) -> Callable[[], Any]:
        tx = optax.adamw(LR, b2=B2, weight_decay=WD)
        heads = cfg.width // cfg.head_dim

        def step(state, xb, yb):
            params, opt_state = state
            loss, g = jax.value_and_grad(baseline_loss)(params, xb, yb, heads, jnp.float32)
            upd, opt_state = tx.update(g, opt_state, params)
            return (optax.apply_updates(params, upd), opt_state), loss

        params = baseline_params(jax.random.key(0), VOCAB, cfg.seq_len, cfg.width, cfg.depth)
        holder = {"state": (params, tx.init(params))}
        compiled = jax.jit(step, donate_argnums=0).lower(holder["state"], batch["x"], batch["y"]).compile()

        def run() -> Any:
            holder["state"], loss = compiled(holder["state"], batch["x"], batch["y"])
            return loss

        return run


def timed(step: Callable[[], Any], steps: int) -> float:
    """Seconds per step over `steps` steps (the last loss fetched, so every step has finished)."""
    t0 = time.perf_counter()
    for _ in range(steps):
        out = step()
    np.asarray(out)
    return (time.perf_counter() - t0) / steps


def measure(case: Case, pairs: int, steps: int, warmup: int) -> dict[str, list[float]]:
    for step in case.steps.values():
        for _ in range(warmup):
            np.asarray(step())
    runs: dict[str, list[float]] = {k: [] for k in case.steps}
    for _ in range(pairs):
        for name, step in case.steps.items():
            runs[name].append(timed(step, steps))
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
    p.add_argument("--quick", action="store_true", help="smoke test: tiny sizes, 1 pair of 1 step")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.pairs, args.steps, args.warmup = "tiny", 1, 1, 1
    models, sizes = args.models.split(","), args.sizes.split(",")
    bad = [m for m in models if m not in SIZES] + [s for s in sizes if s not in SIZES["gpt"]]
    if bad or min(args.pairs, args.steps) < 1:
        print(f"error: unknown model or size {', '.join(bad)} (models: {', '.join(SIZES)}; sizes: tiny, default, "
              "4x), or --pairs/--steps below 1", file=sys.stderr)
        raise SystemExit(1)
    torch.set_num_threads(cores())
    print(f"jax {jax.__version__} ({jax.devices()[0].platform}), torch {torch.__version__}, {cores()} cores; "
          f"{args.pairs} pairs of {args.steps} steps; f32, AdamW")
    print(f"{'model':10s} {'size':8s} {'shape':26s} {'GFLOP':>7s} {'compile s':>9s} {'zoo ms':>9s} {'torch ms':>9s}"
          f" {'zoo/torch':>9s} {'jax ms':>8s} {'zoo/jax':>7s}  load")
    for name in models:
        for size in sizes:
            case = Case(name, SIZES[name][size], BATCH[name])
            a, b = case.first_loss["zoo"], case.first_loss["torch"]
            if abs(a - b) > 1e-4 * abs(b):
                raise SystemExit(f"{name} {size}: zoo and torch start from different losses ({a} vs {b}): "
                                 "the models do not compute the same function")
            runs = measure(case, args.pairs, args.steps, args.warmup)
            med = {k: statistics.median(v) * 1e3 for k, v in runs.items()}
            ratio = paired_ratio(runs["zoo"], runs["torch"])
            c = case.cfg
            shape = f"w{c.width} d{c.depth} b{BATCH[name]}" + (f" T{c.seq_len}" if name == "gpt" else "")
            jax_cols = (f"{med['jax']:8.1f} {paired_ratio(runs['zoo'], runs['jax']):7.3f}" if "jax" in runs
                        else f"{'':8s} {'':7s}")
            print(f"{name:10s} {size:8s} {shape:26s} {case.gflops:7.2f} {case.compile_s:9.1f} {med['zoo']:9.1f} "
                  f"{med['torch']:9.1f} {ratio:9.3f} {jax_cols}  {load()}", flush=True)


if __name__ == "__main__":
    main()
