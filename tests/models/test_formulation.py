"""The layers' fast CPU formulations (bench/vs_torch.py) compute what the previous ones did: every model trains for 20
steps with the same losses to rtol 1e-4 as with the previous formulation patched back in.

The reference is the previous code itself, kept here (a few lines per layer: the 3-D `x @ W`, the transposed token
mixing, `jax.nn.dot_product_attention`, q, k and v as three products, optax's cross-entropy), not losses recorded
once: it runs on the same parameters, data and optimizer at whatever JAX version is installed, so the comparison
isolates the formulation (a change beyond float reassociation shows up as a drift that compounds over the steps). muP
at twice its base width makes the forward multipliers differ from 1, so the folding of m^-a into the smaller operand
is checked too.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoo.models
import zoo.param
from zoo.models import layers, transformer
from zoo.optim import OptimConfig
from zoo.train import step as train_step
from zoo.train.step import build_program, run_once_options

STEPS = 20
IMAGE = dict(in_shape=(8, 8, 3), num_classes=4)
CONFIGS = {
    # 3 chunks; the previous attention had no dropout on its probabilities (tests/models/test_gpt_nanogpt.py checks it)
    "gpt": dict(width=32, base_width=16, depth=2, head_dim=16, seq_len=160, vocab_size=11, dropout=0.1,
                attn_dropout=False),
    "vit": dict(width=32, base_width=16, depth=2, head_dim=16, patch=2, **IMAGE),
    "mixer": dict(width=32, base_width=16, depth=2, patch=2, token_dim=8, **IMAGE),
    "mlp_resnet": dict(width=32, base_width=16, depth=2, **IMAGE),
}


def previous_dense(self, x, axis=-1):
    """x W m on the same weights (stored (out, in) since 2026-11-26, (in, out) before)."""
    assert axis == -1
    y = (x @ self.kernel[...].T.astype(x.dtype)) * self.mult[...].astype(x.dtype)
    return y if self.bias is None else y + self.bias[...].astype(x.dtype)


def previous_mixer_block(self, x, key=None):
    y, _ = self.token_mlp(self.ln1(x).swapaxes(1, 2))
    x = transformer.residual(x, y.swapaxes(1, 2), self.token_skip, self.token_branch)
    y, pre = self.channel_mlp(self.ln2(x))
    x = transformer.residual(x, y, self.channel_skip, self.channel_branch)
    return x, {"pre": pre, "blocks": x}


def previous_qkv(self, x):
    """q, k and v as three products, each its own Dense (before one product of the stacked kernels)."""
    return tuple(f(x) for f in (self.q, self.k, self.v))


def previous_attention(q, k, v, scale, causal, rate=0.0, key=None):
    assert rate == 0 or key is None
    return jax.nn.dot_product_attention(q, k, v, scale=scale, is_causal=causal)


def previous_cross_entropy(logits, labels):
    """optax's on the logits cast to float32 (before zoo.train.loss)."""
    logits = logits.astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels), logits.argmax(-1) == labels


def losses(name: str) -> np.ndarray:
    cfg = zoo.models.config(name, **CONFIGS[name])
    plugin = zoo.param.get("mup")
    prog = build_program(lambda r: zoo.models.create(name, cfg, plugin, r), plugin,
                         OptimConfig(name="adamw", lr=3e-3, clip_norm=1.0))
    rng = np.random.default_rng(0)
    if name == "gpt":
        x = rng.integers(0, cfg.vocab_size, (2, cfg.seq_len + 1), dtype=np.int32)
        batch = {"x": x[:, :-1], "y": x[:, 1:]}
    else:
        batch = {"x": rng.normal(size=(8, *cfg.in_shape)).astype(np.float32),
                 "y": rng.integers(0, cfg.num_classes, 8, dtype=np.int32)}
    state = jax.jit(prog.init).lower(jax.random.PRNGKey(0)).compile(run_once_options())(jax.random.PRNGKey(0))
    step = jax.jit(prog.train_step).lower(state, batch).compile(run_once_options())  # 2x faster compile, same math
    out = []
    for _ in range(STEPS):
        state, metrics = step(state, batch)
        out.append(metrics["loss"])
    return np.asarray(out)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_same_losses_as_the_previous_formulation(name, monkeypatch):
    now = losses(name)
    monkeypatch.setattr(layers.Dense, "__call__", previous_dense)
    monkeypatch.setattr(transformer.MixerBlock, "__call__", previous_mixer_block)
    monkeypatch.setattr(transformer, "dot_product_attention", previous_attention)
    monkeypatch.setattr(transformer.Attention, "qkv", previous_qkv)
    monkeypatch.setattr(train_step, "cross_entropy", previous_cross_entropy)
    before = losses(name)
    assert np.all(np.isfinite(before)) and before[-1] < before[0]  # it trains, so the steps are not trivial
    np.testing.assert_allclose(now, before, rtol=1e-4)


def test_members_sharing_an_input_multiply_their_weights_as_stored():
    """Vmapped over members that share x (a sweep), Dense's wide input layer computes each member's x W^T without
    a transposed copy of the members' weights (XLA:CPU made one every step, f32[in, members * out]), and with the
    values of each member's own product."""
    rows, fan_in, fan_out, members = 16, 300, 24, 6
    x = np.random.default_rng(0).normal(size=(rows, fan_in)).astype(np.float32)
    w = np.random.default_rng(1).normal(size=(members, fan_out, fan_in)).astype(np.float32)

    def loss(w, x):
        return (layers.rows_times_transpose(x, w) ** 2).sum()

    grad = jax.jit(jax.vmap(jax.value_and_grad(loss), in_axes=(0, None)))
    hlo = grad.lower(w, x).compile().as_text()
    transposed = re.findall(rf"f32\[[0-9,]*\b{fan_in},[0-9,]*\b(?:{fan_out}|{members * fan_out})\]", hlo)
    assert not transposed, transposed
    value, g = grad(w, x)
    for k in range(members):
        np.testing.assert_allclose(value[k], ((x @ w[k].T) ** 2).sum(), rtol=1e-5)
        np.testing.assert_allclose(g[k], 2 * (x @ w[k].T).T @ x, rtol=1e-4, atol=1e-3)
