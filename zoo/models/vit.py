"""Vision Transformer (Dosovitskiy et al. 2021), pre-LN:

    x^0 = [c; P patches] + E_pos,   x^l = x^{l-1} + b Attn(LN(x)) -> + b MLP(LN(x)),   f = V^T LN(x^L)_cls

Patch embedding P, cls token c and position embedding E_pos are input kind; q/k/v/o and the MLP hidden; the head
V output. Width grows by adding heads at a fixed head dim (or, with scale_heads=False, by growing the head dim).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from zoo.models.layers import Dense, LayerNorm, ModelConfig, Stack, scales
from zoo.models.transformer import Block, Embed, attention_heads, image_patches, patchify
from zoo.param.base import Parametrization


@dataclasses.dataclass
class ViTConfig(ModelConfig):
    sizes = (*ModelConfig.sizes, "in_shape", "num_classes", "patch", "head_dim", "num_heads", "mlp_ratio")
    rates, scales = ("dropout", "drop_path"), ("embed_std",)
    width: int = 192
    depth: int = 6
    in_shape: tuple[int, ...] = (32, 32, 3)
    num_classes: int = 10
    patch: int = 4
    head_dim: int = 64
    scale_heads: bool = True  # False: a fixed head count (num_heads, or base_width // head_dim)
    num_heads: int | None = None
    mlp_ratio: int = 4
    bias: bool = True
    embed_std: float = 0.02  # init std of the cls token and position embedding (input kind)
    dropout: float = 0.0
    drop_path: float = 0.0  # stochastic depth of the last block, rising linearly from 0 at the first (timm)
    scan: bool = False  # unrolled steps are faster at these depths; scan=True keeps compile time flat in depth


class ViT(nnx.Module):
    task = "classify"
    config_class = ViTConfig
    # the run's defaults (flags override them): the recipe `python train.py --model vit` trains (pre-LN, patch 4, 3
    # heads of 64, cls token, CIFAR-10 with pad-crop-flip). On an H200 under sp, bf16: 71.4% test accuracy
    # (docs/results.md).
    recipe = dict(data="cifar10", optimizer="adamw", lr=1e-3, schedule="cosine", warmup=500, batch_size=128,
                  steps=20000, eval_every=1000, augment=True, weight_decay=0.05)
    input_rank = 3  # (H, W, C) images, cut into patches

    def __init__(self, cfg: ViTConfig, plugin: Parametrization, rngs: nnx.Rngs):
        self.cfg = cfg
        top, body, base_width = scales(cfg, plugin)
        heads = attention_heads(cfg.width, base_width, cfg.head_dim, cfg.scale_heads, cfg.num_heads)
        tokens, patch_dim = image_patches(cfg.in_shape, cfg.patch)
        self.embed = Dense(patch_dim, cfg.width, kind="input", scale=top, rngs=rngs, bias=cfg.bias,
                           role="patch_embed")
        self.cls = Embed(1, cfg.width, scale=top, rngs=rngs, std0=cfg.embed_std, role="cls_token")
        self.pos = Embed(tokens + 1, cfg.width, scale=top, rngs=rngs, std0=cfg.embed_std, role="pos_embed")
        self.stack = Stack(lambda r: Block(cfg.width, heads, cfg.mlp_ratio * cfg.width, causal=False,
                                           dropout=cfg.dropout, scale=body, rngs=r, bias=cfg.bias),
                           cfg.depth, rngs, scan=cfg.scan, remat=cfg.remat, drop_path=cfg.drop_path)
        self.norm = LayerNorm(cfg.width, scale=top, rngs=rngs)
        self.head = Dense(cfg.width, cfg.num_classes, kind="output", scale=top, rngs=rngs, bias=cfg.bias,
                          role="readout")

    def __call__(self, x: jax.Array, key: jax.Array | None = None, train: bool = False):
        """Logits and intermediates: embed (B, T, n); pre (L, B, T, 4n), attn_logits (L, B, heads, T, T), blocks."""
        dtype = jnp.dtype(self.cfg.dtype)
        x = self.embed(patchify(x.astype(dtype), self.cfg.patch))
        cls = jnp.broadcast_to(self.cls(jnp.zeros([1], jnp.int32)).astype(dtype), (x.shape[0], 1, x.shape[-1]))
        x0 = jnp.concatenate([cls, x], axis=1) + self.pos(jnp.arange(x.shape[1] + 1)).astype(dtype)
        xl, inter = self.stack(x0, key if train else None)
        return self.head(self.norm(xl)[:, 0]), {"embed": x0, **inter}
