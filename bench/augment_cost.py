"""What an image recipe's regularisation costs: the model's train step with its recipe's augmentation (--augment),
label smoothing and drop path, against the same step without them, in one process. Rounds alternate the two
steps; each round's ratio is printed and their median is the result.

    python bench/augment_cost.py --model vit                                   # CPU, the recipe's batch
    python bench/augment_cost.py --model mixer --batch 512 --precision bf16 --rounds 5 --steps 50   # a GPU

The data are random uint8 images of CIFAR's shape (32 x 32 x 3, 10 classes) on the device, as zoo holds a small
set; the step is train.py's (jit, state donated). Also printed: each step's compile time, which a run pays once,
and the augmentation alone (its own jit), as a share of the plain step.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import zoo.models
import zoo.param
from zoo.config import resolve
from zoo.data import augment
from zoo.schema import compute_dtype
from zoo.train.step import build_program

SHAPE, CLASSES = (32, 32, 3), 10


def programs(cfg, batch: int) -> dict[str, object]:
    """The plain step (no augmentation, label smoothing or drop path) and the recipe's."""
    m = cfg.model
    default = zoo.models.config(m.name)
    sizes = {"width": m.width or default.width, "depth": m.depth or default.depth,
             "base_width": m.base_width or default.width, "base_depth": m.base_depth or default.depth,
             "in_shape": SHAPE, "num_classes": CLASSES, "dtype": compute_dtype(cfg.loop.precision)}
    plugin = zoo.param.get(cfg.param.name, **cfg.param.options)
    ops = augment.parse_ops(cfg.data.augment)
    recipe_aug = augment.Augment(ops, augment.options(ops, cfg.data.augment_options), CLASSES) if ops else None
    out = {}
    for name, options, aug, smoothing in (
            ("plain", {k: v for k, v in m.options.items() if k != "drop_path"}, None, 0.0),
            ("recipe", m.options, recipe_aug, cfg.loop.label_smoothing)):
        model_cfg = zoo.models.config(m.name, **sizes, **options)
        out[name] = build_program(lambda r, c=model_cfg: zoo.models.create(m.name, c, plugin, r), plugin, cfg.optim,
                                  jnp.dtype(compute_dtype(cfg.loop.precision)), aug, horizon=cfg.loop.steps or 1,
                                  label_smoothing=smoothing)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="vit", choices=("vit", "mixer"))
    ap.add_argument("--batch", type=int, help="default: the recipe's")
    ap.add_argument("--precision", choices=("f32", "bf16"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3, help="timed steps of each program per round")
    args = ap.parse_args()
    cfg = resolve({"model": args.model, "precision": args.precision, "batch_size": args.batch})
    batch_size = cfg.loop.batch_size
    rng = np.random.default_rng(0)
    batch = jax.device_put({"x": rng.integers(0, 256, (batch_size, *SHAPE)).astype(np.uint8),
                            "y": rng.integers(0, CLASSES, batch_size).astype(np.int32)})
    steps, states, progs = {}, {}, programs(cfg, batch_size)
    for name, prog in progs.items():
        states[name] = jax.jit(prog.init)(jax.random.key(0))
        t0 = time.perf_counter()
        steps[name] = jax.jit(prog.train_step, donate_argnums=0).lower(states[name], batch).compile()
        print(f"{name}: compile {time.perf_counter() - t0:.1f} s")
        states[name], metrics = steps[name](states[name], batch)  # warm-up
        jax.block_until_ready(metrics)
    print(f"device {jax.devices()[0].device_kind}; {args.model} recipe (augment {cfg.data.augment}, label smoothing "
          f"{cfg.loop.label_smoothing}, model options {cfg.model.options}), batch {batch_size}, {cfg.loop.precision}")
    # wall time, and this process's CPU time: on a CPU shared with other jobs the wall time also counts the waits
    # for a core, the CPU time only the work
    times: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in steps}
    for r in range(args.rounds):
        for name in steps:
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                states[name], metrics = steps[name](states[name], batch)
            jax.block_until_ready(metrics)
            times[name]["wall"].append((time.perf_counter() - t0) / args.steps)
            times[name]["cpu"].append((time.process_time() - c0) / args.steps)
        print(f"round {r}: " + ", ".join(f"{name} {t['wall'][-1] * 1e3:.2f} ms/step ({t['cpu'][-1] * 1e3:.0f} ms "
                                         "CPU)" for name, t in times.items()) +
              f"; ratio {times['recipe']['wall'][-1] / times['plain']['wall'][-1]:.3f} (CPU time "
              f"{times['recipe']['cpu'][-1] / times['plain']['cpu'][-1]:.3f})")
    ratio = {k: statistics.median(a / b for a, b in zip(times["recipe"][k], times["plain"][k], strict=True))
             for k in ("wall", "cpu")}
    plain, recipe = statistics.median(times["plain"]["wall"]), statistics.median(times["recipe"]["wall"])
    print(f"median: plain {plain * 1e3:.2f} ms/step ({batch_size / plain:,.0f} img/s), recipe {recipe * 1e3:.2f} "
          f"ms/step ({batch_size / recipe:,.0f} img/s); recipe / plain {ratio['wall']:.3f} (CPU time "
          f"{ratio['cpu']:.3f})")
    if progs["recipe"].augment is not None:  # the augmentation alone: a part of the step that load noise cannot hide
        augment_step = jax.jit(progs["recipe"].augment)
        key = jax.random.key(1)
        jax.block_until_ready(augment_step(key, batch))
        t0 = time.perf_counter()
        for i in range(args.steps * args.rounds):
            out = augment_step(jax.random.fold_in(key, i), batch)
        jax.block_until_ready(out)
        alone = (time.perf_counter() - t0) / (args.steps * args.rounds)
        print(f"augmentation alone: {alone * 1e3:.2f} ms a batch, {alone / plain:.1%} of the plain step")


if __name__ == "__main__":
    main()
