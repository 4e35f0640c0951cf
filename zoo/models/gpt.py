"""GPT: a decoder-only pre-LN transformer (Radford et al. 2019; nanoGPT):

    x^0 = E[tokens] + E_pos,   x <- x + b Attn_causal(LN(x)),   x <- x + b MLP(LN(x)),   f = m_out V^T LN(x^L)

Token and position embeddings are input kind; with tie_embeddings the readout is V = E^T, which keeps its
input-kind tag (so its LR and epsilon rules), and only the readout applies the output-kind forward multiplier
m_out, gauge-shifted onto E's init (plugin.tied_multiplier; microsoft/mup MuSharedReadout).

The defaults are nanoGPT's model (github.com/karpathy/nanoGPT, model.py, with train.py's bias=False): the readout
tied to the token embedding, no biases (in the dense layers and the LayerNorms), LayerNorm eps 1e-5, the exact (erf)
GELU, every weight at std 0.02 and the two matrices that end each block's branches at 0.02 / sqrt(2 L) (the base
stds every plugin scales from: zoo.param.sp_init), dropout on the embedding, on the attention probabilities and on
each branch's output when called with a key and train=True. bench/nanogpt_parity.py checks it against nanoGPT's
model step by step (docs/gpt_parity.md). The residual stream stays f32 under a bf16 dtype, the branches computing
in bf16 from their LayerNorm on, as PyTorch's autocast runs nanoGPT.
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
    rates, scales = ("dropout",), ("embed_std", "init_std", "norm_eps")
    pre_ln = True  # its residual blocks are pre-LayerNorm (critical init: every point with mu = 1 is critical)
    width: int = 384
    depth: int = 6
    vocab_size: int = 65
    vocab_multiple: int = 1  # the embedding and readout rows padded to a multiple (GPT-2: 50257 -> 50304 with 64)
    seq_len: int = 256  # max context
    head_dim: int = 64
    scale_heads: bool = True  # False: a fixed head count (num_heads, or base_width // head_dim)
    num_heads: int | None = None
    mlp_ratio: int = 4
    bias: bool = False  # biases in the dense layers and the LayerNorms
    tie_embeddings: bool = True
    embed_std: float = 0.02  # init std of the token and position embeddings (input kind)
    init_std: float | None = 0.02  # SP init std of the weight matrices at the base shape (None: 1/sqrt(fan_in))
    scaled_residual_init: bool = True  # the branches' last matrices at init_std / sqrt(2 L0) (GPT-2)
    norm_eps: float = 1e-5
    activation: str = "gelu_exact"  # the MLP's (zoo.activations; "gelu": the tanh approximation)
    dropout: float = 0.2  # on the embedding and on each branch's output
    attn_dropout: bool = True  # also on the attention probabilities, at the same rate
    scan: bool = False  # unrolled steps are faster at these depths; scan=True keeps compile time flat in depth


class GPT(nnx.Module):
    task = "lm"
    config_class = GPTConfig
    # the run's defaults (flags override them): nanoGPT's whole "baby" char-level Shakespeare recipe
    # (config/train_shakespeare_char.py on its train.py), what `python train.py --model gpt` trains; nanoGPT also
    # estimates its losses on 200 random batches per split at each eval, which `--eval-iters 200` adds here (off by
    # default: 400 forward passes per eval on a CPU). nanoGPT's own run on an H200: best val loss 1.4655 at step 1750,
    # 151 s; zoo's, and the commands that run both: docs/gpt_parity.md.
    # Its LR at every step is get_lr's: a warmup that peaks on step 100 (--warmup-peak after), and a cosine that ends
    # on step 5000, as nanoGPT's loop trains iterations 0 through max_iters = 5000 (5001 steps; its evals, at
    # multiples of 250, come before their step's update, zoo's after it: both read the model after 250 k updates).
    recipe = dict(data="shakespeare", optimizer="adamw", lr=1e-3, schedule="cosine", warmup=100,
                  warmup_peak="after", min_lr_ratio=0.1, b2=0.99, batch_size=64, steps=5001, eval_every=250,
                  seq_len=256, weight_decay=0.1, clip_norm=1.0)
    multiplier_acts_on = {"readout_mult": "wte/"}  # the tied readout's multiplier, on the token table

    def __init__(self, cfg: GPTConfig, plugin: Parametrization, rngs: nnx.Rngs):
        self.cfg = cfg
        top, body, base_width = scales(cfg, plugin, cfg.init_std, 2 if cfg.scaled_residual_init else 0)
        heads = attention_heads(cfg.width, base_width, cfg.head_dim, cfg.scale_heads, cfg.num_heads)
        rows = -(-cfg.vocab_size // cfg.vocab_multiple) * cfg.vocab_multiple
        self.wte = Embed(rows, cfg.width, scale=top, rngs=rngs, std0=cfg.embed_std, role="token_embed",
                         axes=("vocab", "embed"))
        self.wpe = Embed(cfg.seq_len, cfg.width, scale=top, rngs=rngs, std0=cfg.embed_std, role="pos_embed")
        self.stack = Stack(lambda r: Block(cfg.width, heads, cfg.mlp_ratio * cfg.width, causal=True,
                                           dropout=cfg.dropout, scale=body, rngs=r, bias=cfg.bias,
                                           attn_dropout=cfg.dropout if cfg.attn_dropout else 0.0,
                                           norm_eps=cfg.norm_eps, norm_bias=cfg.bias, activation=cfg.activation,
                                           dtype=cfg.dtype),
                           cfg.depth, rngs, scan=cfg.scan, remat=cfg.remat)
        self.norm = LayerNorm(cfg.width, scale=top, rngs=rngs, eps=cfg.norm_eps, bias=cfg.bias, dtype=cfg.dtype)
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
        x0 = self.wte(x) + self.wpe.first(t)  # the residual stream, f32 (the branches compute in dtype)
        xl, inter = self.stack(dropout(x0, self.cfg.dropout, fold(key, 0)), fold(key, 1))
        h = self.norm(xl)
        if self.head is not None:
            logits = self.head(h)
        else:
            logits = (h @ self.wte.table[...].T.astype(dtype)) * self.readout_mult[...].astype(dtype)
        return logits[..., :self.cfg.vocab_size], {"embed": x0, **inter}
