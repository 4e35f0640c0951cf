"""The activations a run is checked against before it compiles (zoo.train.memory.activation_bytes): on a GPU in half
precision, the attention logits are left out only where every attention layer trains with cuDNN's fused kernel; XLA's
attention (dropout on the probabilities, an odd sequence length such as the ViT's patches and class token, a head
dim cuDNN does not take) materialises them, and they count. The GPU is emulated: no product runs, the forward pass
is traced abstractly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo.models
import zoo.param
from zoo.optim import OptimConfig
from zoo.train import memory
from zoo.train.step import build_program

B = 2


def estimate(name: str, **options) -> tuple[int, int, int]:
    """(bytes with flash attention asked for, without, the attention logits' bytes)."""
    cfg = zoo.models.config(name, width=32, depth=2, dtype="bfloat16", **options)
    plugin = zoo.param.get("sp")
    prog = build_program(lambda r: zoo.models.create(name, cfg, plugin, r), plugin, OptimConfig("adam"),
                         jnp.bfloat16)
    state = jax.eval_shape(prog.init, jax.random.key(0))
    x = (jax.ShapeDtypeStruct((B, cfg.seq_len), jnp.int32) if name == "gpt"
         else jax.ShapeDtypeStruct((B, *cfg.in_shape), jnp.uint8))
    _, inter = jax.eval_shape(lambda s, x: prog.model(s)(x), state, x)
    logits = sum(int(np.prod(v.shape)) * v.dtype.itemsize for p, v in jax.tree_util.tree_flatten_with_path(inter)[0]
                 if "attn_logits" in jax.tree_util.keystr(p))
    return (memory.activation_bytes(prog, state, {"x": x}, True),
            memory.activation_bytes(prog, state, {"x": x}, False), logits)


@pytest.mark.parametrize("name, options, fused", [
    ("gpt", {"seq_len": 16, "head_dim": 16, "dropout": 0.0}, True),
    ("gpt", {"seq_len": 16, "head_dim": 16, "dropout": 0.1}, False),  # dropout on the probabilities: XLA's
    ("gpt", {"seq_len": 16, "head_dim": 16, "dropout": 0.1, "attn_dropout": False}, True),
    ("gpt", {"seq_len": 15, "head_dim": 16, "dropout": 0.0}, False),  # an odd sequence length
    ("gpt", {"seq_len": 16, "head_dim": 4, "dropout": 0.0}, False),  # a head dim cuDNN does not take
    ("vit", {"head_dim": 16, "drop_path": 0.0}, False),  # 64 patches and a class token: T = 65
])
def test_attention_logits_count_where_xla_attention_trains(monkeypatch, name, options, fused):
    xla = jax.nn.dot_product_attention
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(jax.nn, "dot_product_attention", lambda *a, implementation, **k: xla(*a, **k))  # traced only
    flash, plain, logits = estimate(name, **options)
    assert logits > 0
    assert plain - flash == (logits if fused else 0)
