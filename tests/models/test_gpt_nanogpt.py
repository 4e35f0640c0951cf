"""zoo's GPT is nanoGPT's model: its weights map onto nanoGPT's state_dict and back (bench/nanogpt_weights.py), and
with them its loss and gradients equal GPT-2's written in torch's own functional ops (LayerNorm eps 1e-5, causal
scaled-dot-product attention, the exact GELU, the readout tied to the token embedding, with and without biases).

nanoGPT's model.py itself is not in the repository, so CI compares against this definition; the comparison with
nanoGPT's own code, over 100 AdamW steps, is `python bench/nanogpt_parity.py --nanogpt DIR` (docs/gpt_parity.md).
Also here: dropout on the attention probabilities."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import zoo.models
import zoo.param
from zoo.export.fold import folded_params
from zoo.models.transformer import dot_product_attention
from zoo.train.step import loss_and_metrics, run_once_options

WIDTH, DEPTH, HEADS, T, VOCAB = 32, 2, 2, 16, 11


@pytest.fixture
def weights(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "bench"))
    import nanogpt_weights

    return nanogpt_weights


def gpt(**over):
    cfg = zoo.models.config("gpt", width=WIDTH, depth=DEPTH, head_dim=WIDTH // HEADS, seq_len=T, vocab_size=VOCAB,
                            **{"dropout": 0.0, **over})
    return zoo.models.create("gpt", cfg, zoo.param.get("sp"), nnx.Rngs(0))



def gpt2_loss(sd, x, y):
    """GPT-2 as nanoGPT's model.py defines it, in torch's functional ops, from a state_dict (biases optional)."""
    import torch.nn.functional as F

    def ln(z, name):
        return F.layer_norm(z, z.shape[-1:], sd[f"{name}.weight"], sd.get(f"{name}.bias"), 1e-5)

    def linear(z, name):
        return F.linear(z, sd[f"{name}.weight"], sd.get(f"{name}.bias"))

    h = sd["transformer.wte.weight"][x] + sd["transformer.wpe.weight"][:x.shape[1]]
    for i in range(DEPTH):
        p = f"transformer.h.{i}."
        qkv = linear(ln(h, p + "ln_1"), p + "attn.c_attn").chunk(3, -1)
        q, k, v = (a.unflatten(-1, (HEADS, -1)).transpose(1, 2) for a in qkv)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(2)
        h = h + linear(a, p + "attn.c_proj")
        h = h + linear(F.gelu(linear(ln(h, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    logits = ln(h, "transformer.ln_f") @ sd["lm_head.weight"].T
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


@pytest.fixture(scope="module")
def models():
    """The GPT at its defaults (no biases) and with biases, made once."""
    return {bias: gpt(bias=bias) for bias in (False, True)}


def test_init_is_gpt2s(models):
    """Every weight at std 0.02, the two matrices that end each block's branches at 0.02 / sqrt(2 L), the LayerNorm
    gains 1 (nanoGPT's init, through the plugin: zoo.param.sp_init)."""
    blocks = models[False].stack.blocks
    for w, std in ((blocks.attn.q.kernel, 0.02), (blocks.mlp.fc1.kernel, 0.02), (models[False].wte.table, 0.02),
                   (blocks.attn.o.kernel, 0.02 / math.sqrt(2 * DEPTH)), (blocks.mlp.fc2.kernel, 0.01)):
        assert float(np.std(w[...])) == pytest.approx(std, rel=0.08)
    assert blocks.ln1.bias is None and float(np.min(blocks.ln1.gain[...])) == 1.0


def test_weights_map_onto_nanogpts_state_dict_and_back(weights, models):
    model = models[True]
    sd = weights.to_nanogpt(model)
    parts = ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj")
    names = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias",
             "lm_head.weight"} | {f"transformer.h.{i}.{p}.{kind}" for i in range(DEPTH) for kind in ("weight", "bias")
                                  for p in parts}
    assert set(sd) == names
    n = WIDTH
    assert sd["transformer.h.1.attn.c_attn.weight"].shape == (3 * n, n) and sd["transformer.h.1.mlp.c_proj.weight"]. \
        shape == (n, 4 * n) and sd["lm_head.weight"] is sd["transformer.wte.weight"]
    assert np.array_equal(sd["transformer.h.1.attn.c_attn.weight"][n:2 * n], model.stack.blocks.attn.k.kernel[...][1])
    back = weights.from_nanogpt(sd, DEPTH)
    folded = {k: np.asarray(v) for k, v in folded_params(model).items() if k != "head/kernel"}
    assert set(back) == set(folded) and all(np.array_equal(back[k], folded[k]) for k in folded)


@pytest.mark.parametrize("bias", [False, True])
def test_loss_and_gradients_are_gpt2s_in_torch(weights, models, bias):
    torch = pytest.importorskip("torch", reason="the bench extra: pip install -e '.[bench]'")
    model = models[bias]
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, (4, T + 1)).astype(np.int32)
    batch = {"x": jnp.asarray(tokens[:, :-1]), "y": jnp.asarray(tokens[:, 1:])}
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    loss, grads = jax.jit(jax.value_and_grad(  # runs once: compiled without XLA's backend optimisation (~2x faster)
        lambda p: loss_and_metrics(nnx.merge(graphdef, p, rest), batch, None, False)[0])).lower(params).compile(
        compiler_options=run_once_options())(params)
    ours = weights.to_nanogpt(nnx.merge(graphdef, grads, rest))
    sd = {k: torch.tensor(np.array(v), requires_grad=True) for k, v in weights.to_nanogpt(model).items()
          if k != "lm_head.weight"}
    sd["lm_head.weight"] = sd["transformer.wte.weight"]  # tied: one tensor
    theirs = gpt2_loss(sd, *(torch.from_numpy(tokens[:, s]).long() for s in (slice(None, -1), slice(1, None))))
    theirs.backward()
    assert float(loss) == pytest.approx(theirs.item(), rel=1e-5)
    for name, p in sd.items():
        assert np.linalg.norm(ours[name] - p.grad.numpy()) <= 1e-4 * np.linalg.norm(p.grad.numpy()), name


def test_dropout_reaches_the_attention_probabilities(models):
    """At rate r each probability is kept with probability 1 - r and scaled by 1 / (1 - r): the output changes with
    the key, and its mean over keys is the output without dropout; without a key, or at rate 0, nothing drops. The
    GPT drops them at its dropout rate unless attn_dropout is false."""
    q, k, v = jax.random.normal(jax.random.key(0), (3, 2, 8, 2, 4))
    attend = jax.jit(lambda rate, key: dot_product_attention(q, k, v, 0.5, True, rate, key), static_argnums=0)
    plain = attend(0.0, None)
    assert np.array_equal(attend(0.5, None), plain) and np.array_equal(attend(0.0, jax.random.key(1)), plain)
    keys = jax.random.split(jax.random.key(1), 1000)  # one program, run once: XLA's backend optimisation off
    dropped = jax.jit(jax.vmap(lambda key: attend(0.5, key))).lower(keys).compile(run_once_options())(keys)
    assert not np.allclose(dropped[0], plain, atol=1e-3) and not np.allclose(dropped[0], dropped[1], atol=1e-3)
    spread = np.asarray(dropped.std(0)) / np.sqrt(1000)
    assert np.all(np.abs(np.asarray(dropped.mean(0)) - np.asarray(plain)) <= 5 * spread + 1e-6)
    rates = {on: nnx.eval_shape(lambda on=on: gpt(dropout=0.3, attn_dropout=on)).stack.blocks.attn.rate
             for on in (True, False)}
    assert rates == {True: 0.3, False: 0.0} and models[False].stack.blocks.attn.rate == 0.0
