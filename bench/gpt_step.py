"""GPT train-step time: zoo's GPT (plugin multipliers, NNX merge, tagged optimizer chain) against a minimal pure-JAX GPT
of the same shapes, math and formulation (2-D dense products, q, k and v as one, zoo's attention function;
optax.adamw), both jitted with donation, in one process: the ratio is zoo's own overhead. With --torch also PyTorch's
nanoGPT block (bench/torch_models.GPT holding zoo's init) trained as nanoGPT trains it on a GPU: bf16 autocast, TF32,
fused AdamW, eager and `torch.compile`d, the best PyTorch baseline on the same machine.

    python bench/gpt_step.py                       # nanoGPT's char config: 6 layers, width 384, T 256, batch 64, bf16
    python bench/gpt_step.py --size gpt2 --torch   # GPT-2 124M: 12 layers, width 768, T 1024, batch 12, vocab 50257
    python bench/gpt_step.py --size small          # a CPU-sized run (f32)
    python bench/gpt_step.py --size sweep          # issue 44's sweep shape: 2 layers, width 128, T 128, batch 32, f32

Each side's first call is its compile (and one step): the line "compile and first step s" sets zoo's compile against
a plain-JAX program of the same math on the same backend.

The sides run in turn, --rounds times (machine load falls on all alike); prints each side's median ms/step and tokens/s
and the ratios of zoo's step time to the others' (1.0 = as fast).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.45")  # leave torch (--torch) half of a GPU's memory

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import zoo.models  # noqa: E402
import zoo.param  # noqa: E402
from zoo.models.transformer import attention_implementation, dot_product_attention  # noqa: E402
from zoo.optim import OptimConfig  # noqa: E402
from zoo.train.step import build_program, on_leaves  # noqa: E402

# width, layers, context, batch, dtype, vocabulary
SIZES = {"small": (128, 2, 64, 8, "float32", 65), "sweep": (128, 2, 128, 32, "float32", 65),
         "char": (384, 6, 256, 64, "bfloat16", 65),
         "gpt2": (768, 12, 1024, 12, "bfloat16", 50257)}
LR, B2, WD = 1e-3, 0.99, 0.1
# zoo's GPT options that give it this file's math and bench/torch_models.GPT's (biases, an untied readout, LayerNorm
# eps 1e-6, the tanh GELU); zoo's defaults are nanoGPT's model, checked against it in bench/nanogpt_parity.py
SAME_MATH = dict(bias=True, tie_embeddings=False, norm_eps=1e-6, activation="gelu")


def baseline_params(key, v, t, n, layers):
    ks = iter(jax.random.split(key, 8 * layers + 4))

    def dense(i, o):
        return {"w": jax.random.normal(next(ks), (i, o)) / i**0.5, "b": jnp.zeros(o)}

    def ln():
        return {"g": jnp.ones(n), "b": jnp.zeros(n)}

    blocks = [{"ln1": ln(), "q": dense(n, n), "k": dense(n, n), "v": dense(n, n), "o": dense(n, n), "ln2": ln(),
               "fc1": dense(n, 4 * n), "fc2": dense(4 * n, n)} for _ in range(layers)]
    return {"wte": 0.02 * jax.random.normal(next(ks), (v, n)), "wpe": 0.02 * jax.random.normal(next(ks), (t, n)),
            "blocks": blocks, "ln": ln(), "head": dense(n, v)}


def baseline_loss(p, x, y, heads, dtype):
    def ln(h, q):
        h32 = h.astype(jnp.float32)
        m, s = h32.mean(-1, keepdims=True), h32.var(-1, keepdims=True)
        return ((h32 - m) * jax.lax.rsqrt(s + 1e-6) * q["g"] + q["b"]).astype(dtype)

    def dense(h, q):  # one 2-D product over the flattened rows, as zoo's Dense
        return (h.reshape(-1, h.shape[-1]) @ q["w"].astype(dtype) + q["b"].astype(dtype)).reshape(*h.shape[:-1], -1)

    b, t = x.shape
    h = p["wte"][x] + p["wpe"][:t]  # the residual stream in f32, the branches in dtype (as zoo's GPT, and autocast)
    for blk in p["blocks"]:
        z = ln(h, blk["ln1"])
        qkv = {k: jnp.concatenate([blk[n][k] for n in ("q", "k", "v")], axis=-1) for k in ("w", "b")}
        q, k, v = (a.reshape(b, t, heads, -1) for a in jnp.split(dense(z, qkv), 3, axis=-1))  # one product, as zoo
        impl = attention_implementation(dtype, q.shape[-1], q.shape[1])
        if impl == "cudnn":
            a = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=impl)
        else:
            a = dot_product_attention(q, k, v, q.shape[-1] ** -0.5, causal=True)
        h = h + dense(a.reshape(b, t, -1), blk["o"])
        h = h + dense(jax.nn.gelu(dense(ln(h, blk["ln2"]), blk["fc1"])), blk["fc2"])
    logits = dense(ln(h, p["ln"]), p["head"]).astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def zoo_side(n: int, layers: int, t: int, v: int, dtype: Any, x: jax.Array, y: jax.Array
             ) -> tuple[Callable[[], Any], Any]:
    """zoo's step under `sp`, called as zoo.train.compiled calls it (on the state's flat leaves); and its params."""
    plug = zoo.param.get("sp")
    cfg = zoo.models.config("gpt", width=n, depth=layers, seq_len=t, vocab_size=v, dropout=0.0,
                            dtype=jnp.dtype(dtype).name, **SAME_MATH)
    prog = build_program(lambda r: zoo.models.create("gpt", cfg, plug, r), plug,
                         OptimConfig(name="adamw", lr=LR, b2=B2, weight_decay=WD), dtype)
    state = jax.jit(prog.init)(jax.random.PRNGKey(0))
    leaves, treedef = jax.tree.flatten(state)
    step = jax.jit(on_leaves(lambda s, xb, yb: prog.train_step(s, {"x": xb, "y": yb}), treedef), donate_argnums=0)
    holder = {"leaves": leaves}

    def run() -> Any:
        holder["leaves"], m = step(holder["leaves"], x, y)
        return m["loss"]

    return run, state


def plain_side(n: int, layers: int, t: int, v: int, dtype: Any, x: jax.Array, y: jax.Array) -> Callable[[], Any]:
    """The plain-JAX GPT's step (optax.adamw), jitted with donation."""
    tx = optax.adamw(LR, b2=B2, weight_decay=WD)

    def step(state, xb, yb):
        params, opt_state = state
        loss, g = jax.value_and_grad(baseline_loss)(params, xb, yb, n // 64, dtype)
        upd, opt_state = tx.update(g, opt_state, params)
        return (optax.apply_updates(params, upd), opt_state), loss

    params = baseline_params(jax.random.key(0), v, t, n, layers)
    jitted, holder = jax.jit(step, donate_argnums=0), {"state": (params, tx.init(params))}

    def run() -> Any:
        holder["state"], loss = jitted(holder["state"], x, y)
        return loss

    return run


def torch_sides(n: int, layers: int, t: int, v: int, zoo_state: Any, x: np.ndarray, y: np.ndarray
                ) -> dict[str, Callable[[], Any]]:
    """nanoGPT's way of training its model on a GPU (bf16 autocast, TF32 products, fused AdamW; decay on matrices
    and embeddings as zoo's), eager and torch.compile'd, each from zoo's init."""
    import torch
    import torch_models
    from flax import nnx

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    xt, yt = (torch.from_numpy(np.array(a)).long().to(dev) for a in (x, y))
    zoo_params = jax.tree.map(np.asarray, nnx.to_pure_dict(zoo_state["params"]))
    sides = {}
    for name in ("torch", "torch.compile"):
        model = torch_models.GPT(zoo_params["wte"]["table"].shape[0], t, n, layers)
        model.load_zoo(zoo_params)
        model.to(dev)
        groups = [{"params": [p for p in model.parameters() if (p.ndim >= 2) == want],
                   "weight_decay": WD if want else 0.0} for want in (True, False)]
        opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, B2), eps=1e-8, fused=dev == "cuda")
        forward = torch.compile(model) if name == "torch.compile" else model

        def run(forward=forward, opt=opt) -> Any:
            with torch.autocast(dev, torch.bfloat16, enabled=dev == "cuda"):
                logits = forward(xt)[..., :v]
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, v), yt.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        sides[name] = run
    return sides


def timed(run: Callable[[], Any], iters: int) -> float:
    """Seconds per step over `iters` steps (the last loss fetched: every step has finished)."""
    t0 = time.perf_counter()
    for _ in range(iters):
        out = run()
    float(out)
    return (time.perf_counter() - t0) / iters


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=SIZES, default="char")
    ap.add_argument("--torch", action="store_true", help="also time PyTorch's nanoGPT model, eager and compiled")
    ap.add_argument("--iters", type=int, default=50, help="steps per timed run")
    ap.add_argument("--rounds", type=int, default=3, help="timed runs of each side, in turn")
    args = ap.parse_args()
    n, layers, t, bsz, dtype, v = SIZES[args.size]
    x = jax.random.randint(jax.random.key(1), (bsz, t), 0, v)
    y = jnp.roll(x, -1, axis=1)
    zoo_run, zoo_state = zoo_side(n, layers, t, v, dtype, x, y)
    sides = {"zoo gpt": zoo_run, "plain jax": plain_side(n, layers, t, v, dtype, x, y)}
    if args.torch:
        sides |= torch_sides(n, layers, t, v, zoo_state, x, y)
    first, compile_s = {}, {}
    for name, run in sides.items():  # compiles; zoo's and torch's from the same init
        t0 = time.perf_counter()
        first[name] = float(run())
        compile_s[name] = time.perf_counter() - t0
    print("first losses: " + ", ".join(f"{k} {v:.4f}" for k, v in first.items()))
    print("compile and first step s: " + ", ".join(f"{k} {v:.2f}" for k, v in compile_s.items()))
    for run in sides.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, run in sides.items():
            times[name].append(timed(run, args.iters))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"device {jax.devices()[0].device_kind}; width {n}, {layers} layers, T {t}, batch {bsz}, vocab {v}, "
          f"{jnp.dtype(dtype).name}; {args.rounds} rounds of {args.iters} steps")
    for name, s in med.items():
        print(f"{name:14s} {s * 1e3:8.2f} ms/step  {bsz * t / s:12,.0f} tok/s")
    for name, s in med.items():
        if name != "zoo gpt":
            print(f"ratio zoo/{name} step time: {med['zoo gpt'] / s:.3f}")


if __name__ == "__main__":
    main()
