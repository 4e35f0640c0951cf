"""MLP-Mixer (Tolstikhin et al. 2021), pre-LN:

    x^0 = P patches,   x <- x + b (W_2 gelu(W_1 LN(x)^T))^T  (token mixing),   x <- x + b MLP(LN(x))  (channels),
    f = V^T mean_tokens LN(x^L)

Only the channel dim C (and the channel MLP, 4C) scales with width. The token-mixing MLP (S tokens -> D_S -> S,
both fixed) has no width dimension: scalar kind (seed_tp4b_adam.md section 5).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from zoo.models.layers import Dense, LayerNorm, ModelConfig, Stack, scales
from zoo.models.transformer import MixerBlock, image_patches, patchify
from zoo.param.base import Parametrization


@dataclasses.dataclass
class MixerConfig(ModelConfig):
    sizes = (*ModelConfig.sizes, "in_shape", "num_classes", "patch", "token_dim", "mlp_ratio")
    rates = ("drop_path",)
    width: int = 256
    depth: int = 8
    in_shape: tuple[int, ...] = (32, 32, 3)
    num_classes: int = 10
    patch: int = 4
    token_dim: int = 64  # D_S, fixed
    mlp_ratio: int = 4
    bias: bool = True
    drop_path: float = 0.0  # stochastic depth of the last block, rising linearly from 0 at the first (timm)
    scan: bool = False  # unrolled steps are faster at these depths; scan=True keeps compile time flat in depth


class Mixer(nnx.Module):
    task = "classify"
    config_class = MixerConfig
    # the run's defaults (flags override them): the recipe `python train.py --model mixer` trains (pre-LN, patch 4:
    # 64 tokens, token-mixing dim 64, CIFAR-10 with pad-crop-flip). On an H200 under sp, bf16: 77.1% test accuracy
    # (docs/results.md).
    recipe = dict(data="cifar10", optimizer="adamw", lr=1e-3, schedule="cosine", warmup=500, batch_size=128,
                  steps=20000, eval_every=1000, augment=True, weight_decay=0.05)
    input_rank = 3  # (H, W, C) images, cut into patches

    def __init__(self, cfg: MixerConfig, plugin: Parametrization, rngs: nnx.Rngs):
        self.cfg = cfg
        top, body, _ = scales(cfg, plugin)
        tokens, patch_dim = image_patches(cfg.in_shape, cfg.patch)
        self.embed = Dense(patch_dim, cfg.width, kind="input", scale=top, rngs=rngs, bias=cfg.bias,
                           role="patch_embed")
        self.stack = Stack(lambda r: MixerBlock(cfg.width, tokens, cfg.token_dim, cfg.mlp_ratio * cfg.width,
                                                scale=body, rngs=r, bias=cfg.bias),
                           cfg.depth, rngs, scan=cfg.scan, remat=cfg.remat, drop_path=cfg.drop_path)
        self.norm = LayerNorm(cfg.width, scale=top, rngs=rngs)
        self.head = Dense(cfg.width, cfg.num_classes, kind="output", scale=top, rngs=rngs, bias=cfg.bias,
                          role="readout")

    def __call__(self, x: jax.Array, key: jax.Array | None = None, train: bool = False):
        """Logits and intermediates: embed (B, S, n); pre (L, B, S, 4n) and blocks (L, B, S, n)."""
        x0 = self.embed(patchify(x.astype(jnp.dtype(self.cfg.dtype)), self.cfg.patch))
        xl, inter = self.stack(x0, key if train else None)
        return self.head(self.norm(xl).mean(1)), {"embed": x0, **inter}
