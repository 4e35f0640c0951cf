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
    rates, scales = ("dropout", "drop_path"), ("embed_std", "norm_eps")
    pre_ln = True  # its residual blocks are pre-LayerNorm (critical init: every point with mu = 1 is critical)
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
    qkv_bias: bool | None = None  # biases on q, k, v (None: as `bias`)
    norm_eps: float = 1e-6
    activation: str = "gelu"  # the MLP's (zoo.activations; "gelu": the tanh approximation, "gelu_exact": erf's)
    embed_std: float = 0.02  # init std of the cls token and position embedding (input kind)
    dropout: float = 0.0
    drop_path: float = 0.0  # stochastic depth of the last block, rising linearly from 0 at the first (timm)
    scan: bool = False  # unrolled steps are faster at these depths; scan=True keeps compile time flat in depth


class ViT(nnx.Module):
    task = "classify"
    config_class = ViTConfig
    # The run's defaults (flags override them), the recipe `python train.py --model vit` trains: the ViT of Lee et al.
    # 2021 (aanna0701/SPT_LSA_ViT's "ViT": 93.58% on CIFAR-10) as its main.py and create_model.py set it. 9 blocks of
    # width 192, 12 heads of 16 with no biases on q, k, v, MLP ratio 2 with the exact GELU, LayerNorm eps 1e-5, patch 4,
    # cls token; AdamW (0.9, 0.999), weight decay 0.05 on every parameter (biases and norm gains too), 300 epochs (its
    # 100 epochs of a sampler three times the set long), 30 of them warmup, then cosine to 1e-3 of the peak (its
    # utils/scheduler.py: CosineAnnealingWarmupRestarts, one cycle, min_lr 1e-6 at lr 1e-3, the cosine over the steps
    # after the warmup); random crop
    # (pad 4 with zeros) and flip, AutoAugment's CIFAR-10 policy, random erasing (p 0.25, area 0.02-0.4, aspect
    # 0.3-3.3), MixUp and CutMix (alpha 1, p 0.5, either half the time, per batch), label smoothing 0.1, stochastic
    # depth 0.1. Where zoo differs (docs/augment.md): batch 512 at lr 2e-3 where it takes 128 at 1e-3 (the square-root
    # rule for Adam, Malladi et al. 2022), so that the run fits 10 minutes of an H200; init by the plugin (SP:
    # 1/sqrt(fan-in), position and cls 0.02) where it draws Xavier and N(0, 1); stochastic depth rising linearly to 0.1
    # (timm) where it is 0.1 at every block; AutoAugment's rotations both ways (DeepVoltaire's code since 2021) where
    # its copy turns one way; erasing as timm's (log-uniform aspect, 10 tries, fill 0 = mid grey) where it draws the
    # aspect uniformly and fills the normalised means; images in [-1, 1] where it normalises by CIFAR's means and
    # deviations; the bundled CIFAR-10 is JPEG (quality 75). zoo: unmeasured (bench/gpu_acceptance.sh vit on an H200,
    # bf16).
    recipe = dict(data="cifar10", depth=9, base_depth=9,
                  model_opt={"head_dim": 16, "mlp_ratio": 2, "drop_path": 0.1, "qkv_bias": False, "norm_eps": 1e-5,
                             "activation": "gelu_exact"},
                  optimizer="adamw", lr=2e-3, b1=0.9, b2=0.999, weight_decay=0.05, decay_vectors=True,
                  schedule="cosine", min_lr_ratio=1e-3, batch_size=512, steps=29100, warmup=2910, eval_every=970,
                  augment="crop,flip,autoaugment,erasing,mixup,cutmix", label_smoothing=0.1,
                  augment_opt={"pad_mode": "constant", "erasing_prob": 0.25, "erasing_max_area": 0.4,
                               "mix_prob": 0.5})
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
                                           dropout=cfg.dropout, scale=body, rngs=r, bias=cfg.bias,
                                           qkv_bias=cfg.qkv_bias, norm_eps=cfg.norm_eps, activation=cfg.activation),
                           cfg.depth, rngs, scan=cfg.scan, remat=cfg.remat, drop_path=cfg.drop_path)
        self.norm = LayerNorm(cfg.width, scale=top, rngs=rngs, eps=cfg.norm_eps)
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
