"""GPT train-step time: zoo's GPT (plugin multipliers, NNX merge, tagged optimizer chain) against a minimal
pure-JAX GPT of the same shapes, math and formulation (2-D dense products, zoo's attention function; optax.adamw),
both jitted with donation, in one process: the ratio is zoo's own overhead.

    python bench/gpt_step.py                 # nanoGPT's char config: 6 layers, width 384, T 256, batch 64, bf16
    python bench/gpt_step.py --small         # a CPU-sized run

Prints ms/step and tokens/s of each and the ratio zoo / baseline (1.0 = no overhead).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import optax

import zoo.models
import zoo.param
from zoo.models.transformer import attention_implementation, dot_product_attention
from zoo.optim import OptimConfig
from zoo.train.step import build_program, on_leaves


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
    h = (p["wte"][x] + p["wpe"][:t]).astype(dtype)
    for blk in p["blocks"]:
        z = ln(h, blk["ln1"])
        q, k, v = (dense(z, blk[n]).reshape(b, t, heads, -1) for n in ("q", "k", "v"))
        impl = attention_implementation(dtype, q.shape[-1], q.shape[1])
        if impl == "cudnn":
            a = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=impl)
        else:
            a = dot_product_attention(q, k, v, q.shape[-1] ** -0.5, causal=True)
        h = h + dense(a.reshape(b, t, -1), blk["o"])
        h = h + dense(jax.nn.gelu(dense(ln(h, blk["ln2"]), blk["fc1"])), blk["fc2"])
    logits = dense(ln(h, p["ln"]), p["head"]).astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def timed(step, state, batch, iters):
    state, m = step(state, *batch)
    jax.block_until_ready(m)  # compile + first step
    t0 = time.perf_counter()
    for _ in range(iters):
        state, m = step(state, *batch)
    jax.block_until_ready(m)
    return (time.perf_counter() - t0) / iters


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="width 128, 2 layers, T 64, batch 8, f32 (CPU)")
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    n, layers, t, bsz, dtype = (128, 2, 64, 8, jnp.float32) if args.small else (384, 6, 256, 64, jnp.bfloat16)
    v, heads = 65, n // 64
    x = jax.random.randint(jax.random.key(1), (bsz, t), 0, v)
    y = jnp.roll(x, -1, axis=1)
    opt = OptimConfig(name="adamw", lr=1e-3, b2=0.99, weight_decay=0.1)

    plug = zoo.param.get("sp")
    cfg = zoo.models.config("gpt", width=n, depth=layers, seq_len=t, dropout=0.0, dtype=jnp.dtype(dtype).name)
    prog = build_program(lambda r: zoo.models.create("gpt", cfg, plug, r), plug, opt, dtype)
    leaves, treedef = jax.tree.flatten(jax.jit(prog.init)(jax.random.PRNGKey(0)))  # as zoo.train.compiled calls it
    zoo_step = jax.jit(on_leaves(lambda s, xb, yb: prog.train_step(s, {"x": xb, "y": yb}), treedef),
                       donate_argnums=0)
    zoo_time = timed(zoo_step, leaves, (x, y), args.iters)

    tx = optax.adamw(1e-3, b2=0.99, weight_decay=0.1)

    def base_step(state, xb, yb):
        params, opt_state = state
        loss, g = jax.value_and_grad(baseline_loss)(params, xb, yb, heads, dtype)
        upd, opt_state = tx.update(g, opt_state, params)
        return (optax.apply_updates(params, upd), opt_state), loss

    params = baseline_params(jax.random.key(0), v, t, n, layers)
    base_time = timed(jax.jit(base_step, donate_argnums=0), (params, tx.init(params)), (x, y), args.iters)

    tok = bsz * t
    dev = jax.devices()[0].device_kind
    print(f"device {dev}; width {n}, {layers} layers, T {t}, batch {bsz}, {jnp.dtype(dtype).name}")
    print(f"zoo gpt      {zoo_time * 1e3:8.2f} ms/step  {tok / zoo_time:12,.0f} tok/s")
    print(f"plain jax    {base_time * 1e3:8.2f} ms/step  {tok / base_time:12,.0f} tok/s")
    print(f"ratio zoo/plain step time: {zoo_time / base_time:.3f}")


if __name__ == "__main__":
    main()
