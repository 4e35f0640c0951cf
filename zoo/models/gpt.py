"""GPT: a decoder-only pre-LN transformer (Radford et al. 2019; nanoGPT):

    x^0 = E[tokens] + E_pos,   x <- x + b Attn_causal(LN(x)),   x <- x + b MLP(LN(x)),   f = m_out V^T LN(x^L)

Token and position embeddings are input kind; with tie_embeddings the readout is V = E^T, which keeps its
input-kind tag (so its LR and epsilon rules), and only the readout applies the output-kind forward multiplier
m_out, gauge-shifted onto E's init (plugin.tied_multiplier; microsoft/mup MuSharedReadout). Dropout on the
embedding and on each branch output when the model is called with a key and train=True (nanoGPT's
attention-probability dropout is left out).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from zoo.models.layers import Dense, LayerNorm, ModelConfig, Multiplier, Stack, scales
from zoo.models.transformer import Block, Embed, attention_heads, dropout, fold
from zoo.param.base import Parametrization


@dataclasses.dataclass
class GPTConfig(ModelConfig):
    sizes = (*ModelConfig.sizes, "vocab_size", "vocab_multiple", "seq_len", "head_dim", "num_heads", "mlp_ratio")
    rates, scales = ("dropout",), ("embed_std",)
    width: int = 384
    depth: int = 6
    vocab_size: int = 65
    vocab_multiple: int = 1  # the embedding and readout rows padded to a multiple (GPT-2: 50257 -> 50304 with 64)
    seq_len: int = 256  # max context
    head_dim: int = 64
    scale_heads: bool = True  # False: a fixed head count (num_heads, or base_width // head_dim)
    num_heads: int | None = None
    mlp_ratio: int = 4
    bias: bool = True
    tie_embeddings: bool = False
    embed_std: float = 0.02  # init std of the token and position embeddings (input kind)
    dropout: float = 0.2
    scan: bool = False  # unrolled steps are faster at these depths; scan=True keeps compile time flat in depth


class GPT(nnx.Module):
    task = "lm"
    config_class = GPTConfig
    # the run's defaults (flags override them): nanoGPT's "baby" char-level Shakespeare config, what `python
    # train.py --model gpt` trains. nanoGPT reaches a best val loss of 1.4718 (12.6 ms/step on an H100); zoo under sp
    # on an H200: 1.515 at step 1500, 6.8 ms/step (docs/results/training.md).
    recipe = dict(data="shakespeare", optimizer="adamw", lr=1e-3, schedule="cosine", warmup=100,
                  min_lr_ratio=0.1, b2=0.99, batch_size=64, steps=5000, eval_every=250, seq_len=256,
                  weight_decay=0.1, clip_norm=1.0)

    def __init__(self, cfg: GPTConfig, plugin: Parametrization, rngs: nnx.Rngs):
        self.cfg = cfg
        top, body, base_width = scales(cfg, plugin)
        heads = attention_heads(cfg.width, base_width, cfg.head_dim, cfg.scale_heads, cfg.num_heads)
        rows = -(-cfg.vocab_size // cfg.vocab_multiple) * cfg.vocab_multiple
        self.wte = Embed(rows, cfg.width, scale=top, rngs=rngs, std0=cfg.embed_std, role="token_embed",
                         axes=("vocab", "embed"))
        self.wpe = Embed(cfg.seq_len, cfg.width, scale=top, rngs=rngs, std0=cfg.embed_std, role="pos_embed")
        self.stack = Stack(lambda r: Block(cfg.width, heads, cfg.mlp_ratio * cfg.width, causal=True,
                                           dropout=cfg.dropout, scale=body, rngs=r, bias=cfg.bias),
                           cfg.depth, rngs, scan=cfg.scan, remat=cfg.remat)
        self.norm = LayerNorm(cfg.width, scale=top, rngs=rngs)
        readout = top.tag("output", cfg.width, rows, role="readout")
        if cfg.tie_embeddings:
            self.head = None
            mult = plugin.tied_multiplier(readout, self.wte.table.tag)
            self.readout_mult = Multiplier(jnp.asarray(mult, jnp.float32), rule="tied", tag=readout,
                                           ties=self.wte.table.tag)  # its rule, for zoo.audit
        else:
            self.head = Dense(cfg.width, rows, kind="output", scale=top, rngs=rngs, role="readout",
                              axes=("embed", "vocab"))

    def untied(self) -> dict[str, jax.Array]:
        """The readout as its own matrix where it is tied (f = m_out h E^T: head = m_out E^T, E keeping the input's
        multiplier), for an export in SP form; nothing when the model has a head."""
        return {} if self.head is not None else {"head/kernel": self.wte.table[...] * self.readout_mult[...]}

    def __call__(self, x: jax.Array, key: jax.Array | None = None, train: bool = False):
        """Next-token logits (B, T, vocab) (padding rows dropped) and intermediates: embed (B, T, n); pre (L, B, T, 4n),
        attn_logits (L, B, heads, T, T) and blocks (L, B, T, n)."""
        t = x.shape[1]
        if t > self.cfg.seq_len:
            raise ValueError(f"sequence length {t} exceeds the context {self.cfg.seq_len}")
        dtype = jnp.dtype(self.cfg.dtype)
        key = key if train and self.cfg.dropout > 0 else None
        x0 = (self.wte(x) + self.wpe.first(t)).astype(dtype)
        xl, inter = self.stack(dropout(x0, self.cfg.dropout, fold(key, 0)), fold(key, 1))
        h = self.norm(xl)
        if self.head is not None:
            logits = self.head(h)
        else:
            logits = (h @ self.wte.table[...].T.astype(dtype)) * self.readout_mult[...].astype(dtype)
        return logits[..., :self.cfg.vocab_size], {"embed": x0, **inter}
