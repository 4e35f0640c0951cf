"""Blocks shared by ViT, GPT and MLP-Mixer: embeddings, multi-head attention, MLPs and pre-LN residual blocks.

A pre-LN block with branch multiplier b = a (L/L0)^-alpha and skip multiplier mu (1 except in the `critical`
plugin) from the plugin, one of each per branch:

    x <- mu x + b * Attn(LN(x)),    Attn: softmax(s q.k^T) v W_o,  s = plugin.attn_scale(d_head, base d_head)
    x <- mu x + b * MLP(LN(x)),     MLP: W_2 phi(W_1 x), phi a GELU

Every matrix here is hidden-kind (or scalar-kind for Mixer token mixing); nothing knows a scaling rule.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from zoo.activations import activation
from zoo.models.layers import Dense, LayerNorm, Multiplier, Scale, branch_folds, drop_path, residual, tagged_param
from zoo.param.tags import Kind


@dataclasses.dataclass(frozen=True)
class Heads:
    """num heads, head dim d and its base-width value d0 (the attention-logit scale depends on d / d0)."""

    num: int
    dim: int
    base_dim: int


def attention_heads(width: int, base_width: int, head_dim: int, scale_heads: bool = True,
                    num_heads: int | None = None) -> Heads:
    """Heads at a fixed head dim (scale_heads: heads = width / head_dim), or a fixed head count
    (num_heads, default base_width / head_dim) with head dim width / heads and base head dim base_width / heads."""
    if scale_heads and num_heads is not None:
        grown = f"width / head_dim = {width // head_dim} heads" if width % head_dim == 0 else \
            f"width {width} / head_dim {head_dim}, no whole number"
        raise ValueError(f"num_heads={num_heads} fixes the head count, but scale_heads=true grows it ({grown}): add "
                         "--model-opt scale_heads=false, or drop num_heads")
    if scale_heads:
        if width % head_dim:
            raise ValueError(f"width {width} is not a multiple of head_dim {head_dim} (width grows by heads of "
                             f"{head_dim}): pick a multiple, --model-opt head_dim=D with D dividing {width}, or "
                             "--model-opt scale_heads=false to grow the head dim instead")
        return Heads(width // head_dim, head_dim, head_dim)
    num = num_heads or base_width // head_dim
    if num < 1:
        raise ValueError(f"a fixed head count is base width / head_dim by default, and base width {base_width} has no "
                         f"head of {head_dim}: give --model-opt num_heads=H or a head_dim of at most {base_width}")
    if width % num or base_width % num:
        raise ValueError(f"width {width} and base width {base_width} must be multiples of the head count {num}")
    return Heads(num, width // num, base_width // num)


def patch_count(height: int, width: int, patch: int) -> int:
    """The number of p x p patches an H x W image is cut into, (H/p)(W/p); a ValueError unless p divides both (an
    image smaller than a patch has none: the Mixer's token-mixing layers would have fan-in 0)."""
    if height % patch or width % patch:
        raise ValueError(f"image size {height}x{width} is not a multiple of the patch size {patch} (--model-opt "
                         "patch=P with P dividing both sides)")
    return (height // patch) * (width // patch)


def image_patches(in_shape: tuple[int, ...], patch: int) -> tuple[int, int]:
    """(tokens, patch dim p*p*C) of (H, W, C) images cut into p x p patches; a ValueError for another input rank."""
    if len(in_shape) != 3:
        raise ValueError(f"in_shape must be an image's (height, width, channels), got {in_shape}")
    h, w, c = in_shape
    return patch_count(h, w, patch), patch * patch * c


def patchify(x: jax.Array, patch: int) -> jax.Array:
    """(B, H, W, C) images -> (B, H/p * W/p, p*p*C) patches in raster order."""
    b, h, w, c = x.shape
    patch_count(h, w, patch)
    x = x.reshape(b, h // patch, patch, w // patch, patch, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (h // patch) * (w // patch), patch * patch * c)


def dropout(x: jax.Array, rate: float, key: jax.Array | None) -> jax.Array:
    """Inverted dropout; the identity without a key (evaluation) or at rate 0."""
    if key is None or rate == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0).astype(x.dtype)


def fold(key: jax.Array | None, i: int) -> jax.Array | None:
    return None if key is None else jax.random.fold_in(key, i)


_FORWARD_MODE = contextvars.ContextVar("zoo_forward_mode", default=False)


def attention_implementation(dtype: jnp.dtype, head_dim: int, seq_len: int) -> str | None:
    """cuDNN flash attention on GPU for half precision where it trains (head dims a multiple of 8 up to 128, an even
    sequence length: jax 0.11 refuses to differentiate T = 65, a ViT's 64 patches and class token), else XLA; XLA's
    inside `jvp` too (cuDNN's has a reverse-mode rule only)."""
    half = jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
    supported = head_dim % 8 == 0 and head_dim <= 128 and seq_len % 2 == 0
    gpu = not _FORWARD_MODE.get() and jax.default_backend() == "gpu"
    return "cudnn" if half and supported and gpu else None


def jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """jax.jvp(f, primals, tangents), the attention traced inside it XLA's: cuDNN's fused attention is a custom_vjp,
    and forward mode through it raises ("can't apply forward-mode autodiff (jvp) to a custom_vjp function"), which
    the audit, the partial Jacobians and the coordinate check's parts would meet in a half-precision GPT on a GPU."""
    token = _FORWARD_MODE.set(True)
    try:
        return jax.jvp(f, primals, tangents)
    finally:
        _FORWARD_MODE.reset(token)


def causal_chunk(seq_len: int) -> int:
    """Query rows per chunk of causal attention: 64 up to T = 1024, T / 16 beyond (measured on XLA:CPU: 64 and 128
    beat 32 and 256 at T = 256 and 1024)."""
    return max(64, -(-seq_len // 16))


def dot_product_attention(q: jax.Array, k: jax.Array, v: jax.Array, scale: jax.Array, causal: bool,
                          rate: float = 0.0, key: jax.Array | None = None) -> jax.Array:
    """D(softmax(s q k^T + M)) v per head, q, k, v and the result (B, T, heads, d); M = -inf above the diagonal when
    causal, D dropout on the probabilities at `rate` with `key` (none without a key). Computed in the (B, heads, T,
    d) layout, and when causal one chunk of query rows at a time against only the keys those rows see: the blocks
    above the diagonal are never computed (about half the work of the full T x T logits at T >= 256, and each
    chunk's logits stay in cache). The logits and softmax are f32 whatever the inputs' dtype, as in flash
    attention; the probabilities meet v in its dtype."""
    t = q.shape[1]
    q, k, v = (a.transpose(0, 2, 1, 3) for a in (q * scale, k, v))
    chunk = causal_chunk(t) if causal else t
    outs = []
    for start in range(0, t, chunk):
        stop = min(start + chunk, t)
        keys = stop if causal else t
        logits = jnp.einsum("bnth,bnsh->bnts", q[:, :, start:stop], k[:, :, :keys], preferred_element_type=jnp.float32)
        if causal:
            seen = jnp.arange(keys)[None, :] <= jnp.arange(start, stop)[:, None]
            logits = jnp.where(seen, logits, jnp.finfo(logits.dtype).min)
        probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
        probs = dropout(probs, rate, fold(key, start))
        outs.append(jnp.einsum("bnts,bnsh->bnth", probs, v[:, :, :keys]))
    return jnp.concatenate(outs, axis=2).transpose(0, 2, 1, 3)


class Embed(nnx.Module):
    """A table E (num, n) of input kind (token / position embeddings, cls token): x = m^-a E[ids]."""

    def __init__(self, num: int, width: int, *, scale: Scale, rngs: nnx.Rngs, std0: float, role: str,
                 axes: tuple[str | None, str] = (None, "embed")):
        tag = scale.tag("input", num, width, role=role)
        self.table = tagged_param(rngs.params(), scale.plugin, tag, (num, width), std0, axes=axes)
        self.mult = Multiplier(jnp.asarray(scale.plugin.multiplier(tag), jnp.float32))

    def folds(self) -> list[tuple[str, jax.Array]]:
        """x = m E[ids]: m folds into E (zoo.export)."""
        return [("table", self.mult[...])]

    def __call__(self, ids: jax.Array) -> jax.Array:
        return jnp.take(self.table[...], ids, axis=0) * self.mult[...]

    def first(self, count: int) -> jax.Array:
        """m^-a E[:count], the rows of ids 0..count-1 (positions) as a slice: its gradient is a pad, not a scatter."""
        return self.table[:count] * self.mult[...]


class MLP(nnx.Module):
    """W_2 phi(W_1 x), phi a zoo.activations name (gelu: the tanh approximation); returns the output and the hidden
    pre-activation W_1 x. `axes` names (x's dim, the hidden dim): W_1 is split by columns and W_2 by rows under
    tensor parallelism."""

    def __init__(self, dim: int, hidden: int, *, kind: Kind, scale: Scale, rngs: nnx.Rngs, bias: bool,
                 axes: tuple[str | None, str | None] = ("embed", "mlp"), activation: str = "gelu"):
        self.phi = activation
        self.fc1 = Dense(dim, hidden, kind=kind, scale=scale, rngs=rngs, bias=bias, branch=True, role="mlp_in",
                         axes=axes)
        self.fc2 = Dense(hidden, dim, kind=kind, scale=scale, rngs=rngs, bias=bias, branch=True, role="mlp_out",
                         axes=axes[::-1])

    def __call__(self, x: jax.Array, axis: int = -1) -> tuple[jax.Array, jax.Array]:
        """Over x's last axis, or over axis 1 of a (B, S, C) input (Dense's `axis`)."""
        h = self.fc1(x, axis)
        return self.fc2(activation(self.phi)(h), axis), h


class Attention(nnx.Module):
    """Multi-head self-attention with logits s q.k (s from the plugin), dropout at `dropout` on its probabilities;
    the query has role "query". `qkv_bias`: biases on q, k, v (None: as on the output, `bias`)."""

    def __init__(self, width: int, heads: Heads, *, causal: bool, scale: Scale, rngs: nnx.Rngs, bias: bool,
                 dropout: float = 0.0, qkv_bias: bool | None = None):
        self.heads, self.causal, self.rate = heads, causal, dropout
        inner = heads.num * heads.dim

        def dense(fan_in, fan_out, role, axes):
            has_bias = bias if role == "attn_out" or qkv_bias is None else qkv_bias
            return Dense(fan_in, fan_out, kind="hidden", scale=scale, rngs=rngs, bias=has_bias, branch=True,
                         role=role, axes=axes)

        col, row = ("embed", "heads"), ("heads", "embed")  # Megatron: q, k, v split by columns, o by rows
        self.q, self.k, self.v = (dense(width, inner, role, col) for role in ("query", "key", "value"))
        self.o = dense(inner, width, "attn_out", row)
        self.logit_scale = Multiplier(jnp.asarray(scale.plugin.attn_scale(heads.dim, heads.base_dim), jnp.float32),
                                      rule="attention", head_dim=heads.dim, base_head_dim=heads.base_dim)

    def folds(self) -> list[tuple[str, jax.Array]]:
        """logits s q.k with q = x W_q + b_q: SP's 1/sqrt(d) times s sqrt(d), the rest folds into W_q and b_q
        (zoo.export)."""
        factor = self.logit_scale[...] * math.sqrt(self.heads.dim)
        return [("q/kernel", factor), ("q/bias", factor)]

    def qkv(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """q, k, v = m (x W^T) + b of each Dense, as one product of x's rows with the three kernels (each times its
        multiplier) stacked (3, inner, n), as PyTorch's fused c_attn: one matrix product forward and two backward
        where there were three and six. The kernels stay three parameters (tags, Muon, sharding see them apart)."""
        denses = (self.q, self.k, self.v)
        w = jnp.stack([d.kernel[...].astype(x.dtype) * d.mult[...].astype(x.dtype) for d in denses])
        rows = x.reshape(-1, x.shape[-1])
        y = jax.lax.dot_general(rows, w, (((1,), (2,)), ((), ())))  # (rows, 3, inner)
        if self.q.bias is not None:
            y = y + jnp.stack([d.bias[...].astype(x.dtype) for d in denses])
        return tuple(y[:, i].reshape(*x.shape[:-1], -1) for i in range(3))

    def trains_flash(self, dtype: jnp.dtype, seq_len: int) -> bool:
        """Whether its training step runs cuDNN's fused attention, which never materialises the logits (XLA's runs
        where the probabilities have dropout, or the shapes or the backend take no cuDNN)."""
        return self.rate == 0 and attention_implementation(dtype, self.heads.dim, seq_len) == "cudnn"

    def __call__(self, x: jax.Array, key: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """The attention output (B, T, n) and the logits s q.k (B, heads, T, T), before the causal mask; with `key`,
        dropout on the probabilities (cuDNN's fused attention has none: XLA's then)."""
        b, t, _ = x.shape
        q, k, v = (a.reshape(b, t, self.heads.num, self.heads.dim) for a in self.qkv(x))
        s = self.logit_scale[...].astype(x.dtype)
        key = key if self.rate > 0 else None
        impl = attention_implementation(x.dtype, self.heads.dim, t) if key is None else None
        if impl == "cudnn":  # cuDNN takes a static scale; fold the (possibly traced) one into q
            y = jax.nn.dot_product_attention(q * s, k, v, scale=1.0, is_causal=self.causal, implementation=impl)
        else:
            y = dot_product_attention(q, k, v, s, self.causal, self.rate, key)
        logits = jnp.einsum("btnh,bsnh->bnts", q, k) * s  # for diagnostics only; pruned under jit when unused
        return self.o(y.reshape(b, t, -1)), logits


class Block(nnx.Module):
    """Pre-LN transformer block: attention and MLP branches, each with its own branch multiplier; dropout at
    `dropout` on each branch's output and at `attn_dropout` on the attention probabilities (nanoGPT's places).

    `norm_eps`, `norm_bias` (the LayerNorms' bias) and `activation` (the MLP's) say which LayerNorm and GELU,
    `qkv_bias` whether q, k, v have biases (None: as the other dense layers);
    `dtype` is the branches' compute dtype where the residual stream is kept in another (None: the stream's)."""

    def __init__(self, width: int, heads: Heads, mlp_dim: int, *, causal: bool, dropout: float, scale: Scale,
                 rngs: nnx.Rngs, bias: bool, attn_dropout: float = 0.0, norm_eps: float = 1e-6,
                 norm_bias: bool = True, activation: str = "gelu", dtype: str | None = None,
                 qkv_bias: bool | None = None):
        self.rate = dropout

        def norm():
            return LayerNorm(width, scale=scale, rngs=rngs, branch=True, eps=norm_eps, bias=norm_bias, dtype=dtype)

        self.ln1 = norm()
        self.attn = Attention(width, heads, causal=causal, scale=scale, rngs=rngs, bias=bias, dropout=attn_dropout,
                              qkv_bias=qkv_bias)
        self.ln2 = norm()
        self.mlp = MLP(width, mlp_dim, kind="hidden", scale=scale, rngs=rngs, bias=bias, activation=activation)
        self.attn_branch, self.attn_skip = scale.branch_multiplier(), scale.skip_multiplier()
        self.mlp_branch, self.mlp_skip = scale.branch_multiplier(), scale.skip_multiplier()

    def folds(self) -> list[tuple[str, jax.Array]]:
        """Each branch's multiplier folds into the matrix ending it (zoo.export); a skip multiplier cannot."""
        return (branch_folds(self.attn_skip, self.attn_branch, "attn/o") +
                branch_folds(self.mlp_skip, self.mlp_branch, "mlp/fc2"))

    def __call__(self, x: jax.Array, key: jax.Array | None = None,
                 drop_rate: jax.Array | None = None) -> tuple[jax.Array, dict]:
        """`drop_rate`: this block's stochastic depth (Stack), on each branch. Keys folded from `key`: 0 and 1 the
        branches' dropout, 2 and 3 their drop path, 4 the attention probabilities' dropout."""
        y, logits = self.attn(self.ln1(x), fold(key, 4))
        y = drop_path(dropout(y, self.rate, fold(key, 0)), drop_rate, fold(key, 2))
        x = residual(x, y, self.attn_skip, self.attn_branch)
        y, pre = self.mlp(self.ln2(x))
        y = drop_path(dropout(y, self.rate, fold(key, 1)), drop_rate, fold(key, 3))
        x = residual(x, y, self.mlp_skip, self.mlp_branch)
        return x, {"pre": pre, "attn_logits": logits, "blocks": x}


class MixerBlock(nnx.Module):
    """Pre-LN Mixer block: token mixing over the (fixed) S tokens, scalar kind; channel mixing, hidden kind; both MLPs
    with `activation`, both LayerNorms with `norm_eps`."""

    def __init__(self, width: int, tokens: int, token_dim: int, mlp_dim: int, *, scale: Scale, rngs: nnx.Rngs,
                 bias: bool, norm_eps: float = 1e-6, activation: str = "gelu"):
        self.ln1 = LayerNorm(width, scale=scale, rngs=rngs, branch=True, eps=norm_eps)
        self.token_mlp = MLP(tokens, token_dim, kind="scalar", scale=scale, rngs=rngs, bias=bias, axes=(None, None),
                             activation=activation)
        self.ln2 = LayerNorm(width, scale=scale, rngs=rngs, branch=True, eps=norm_eps)
        self.channel_mlp = MLP(width, mlp_dim, kind="hidden", scale=scale, rngs=rngs, bias=bias,
                               activation=activation)
        self.token_branch, self.token_skip = scale.branch_multiplier(), scale.skip_multiplier()
        self.channel_branch, self.channel_skip = scale.branch_multiplier(), scale.skip_multiplier()

    def folds(self) -> list[tuple[str, jax.Array]]:
        """Each branch's multiplier folds into the matrix ending it (zoo.export); a skip multiplier cannot."""
        return (branch_folds(self.token_skip, self.token_branch, "token_mlp/fc2") +
                branch_folds(self.channel_skip, self.channel_branch, "channel_mlp/fc2"))

    def __call__(self, x: jax.Array, key: jax.Array | None = None,
                 drop_rate: jax.Array | None = None) -> tuple[jax.Array, dict]:
        """`drop_rate`: this block's stochastic depth (Stack), on each branch."""
        y, _ = self.token_mlp(self.ln1(x), axis=1)
        x = residual(x, drop_path(y, drop_rate, fold(key, 0)), self.token_skip, self.token_branch)
        y, pre = self.channel_mlp(self.ln2(x))
        x = residual(x, drop_path(y, drop_rate, fold(key, 1)), self.channel_skip, self.channel_branch)
        return x, {"pre": pre, "blocks": x}
