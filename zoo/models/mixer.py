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
    rates, scales = ("drop_path",), ("norm_eps",)
    pre_ln = True  # its residual blocks are pre-LayerNorm (critical init: every point with mu = 1 is critical)
    width: int = 256
    depth: int = 8
    in_shape: tuple[int, ...] = (32, 32, 3)
    num_classes: int = 10
    patch: int = 4
    token_dim: int = 64  # D_S, fixed
    mlp_ratio: int = 4
    bias: bool = True
    norm_eps: float = 1e-6
    activation: str = "gelu"  # both MLPs' (zoo.activations; "gelu": the tanh approximation, "gelu_exact": erf's)
    drop_path: float = 0.0  # stochastic depth of the last block, rising linearly from 0 at the first (timm)
    scan: bool = False  # unrolled steps are faster at these depths; scan=True keeps compile time flat in depth


class Mixer(nnx.Module):
    task = "classify"
    config_class = MixerConfig
    # The run's defaults (flags override them), the recipe `python train.py --model mixer` trains: Mixer-nano
    # (omihub777/MLP-Mixer-CIFAR: 90.83% on CIFAR-10) as its main.py, train.py and dataloader.py set it (its README says
    # 0.67M parameters; its main.py's defaults, which its README's command runs, give 1,132,170, as here). 8 blocks of
    # width 128, token-mixing dim 64, channel MLP 512, both with the exact GELU, LayerNorm eps 1e-5, patch 4; Adam (0.9,
    # 0.99), lr 1e-3, weight decay 5e-5 on every parameter, batch 128, 300 epochs, 5 of them warmup, then cosine to
    # 1e-6; random crop (pad 4 with zeros) twice, no flip (its dataloader's), AutoAugment's CIFAR-10 policy, CutMix
    # (alpha 1, p 0.5, per batch), label smoothing 0.1. Where zoo differs (docs/augment.md): weight decay decoupled (lr
    # * 5e-5 a step) where torch's Adam adds 5e-5 w to the gradient; init by the plugin (SP) where torch's defaults; the
    # cosine stepped every step where every epoch (a warmup staircase from LR 0 at epoch 0, then a cosine 300 epochs
    # long from the warmup's end, so it stops at 2.3e-6: zoo's LR, averaged over each epoch, is within 4% of its from
    # epoch 5 to 150, 18% below at 250 and 0.4 of it in the last 10 epochs); images in [-1, 1] where it normalises by
    # CIFAR's means and deviations; the bundled CIFAR-10 is JPEG (quality 75). zoo: unmeasured (bench/gpu_acceptance.sh
    # mixer on an H200, bf16).
    recipe = dict(data="cifar10", width=128, base_width=128, depth=8, base_depth=8,
                  model_opt={"token_dim": 64, "mlp_ratio": 4, "norm_eps": 1e-5, "activation": "gelu_exact"},
                  optimizer="adam", lr=1e-3, b1=0.9, b2=0.99,
                  weight_decay=5e-5, decay_vectors=True, schedule="cosine", min_lr_ratio=1e-3, batch_size=128,
                  steps=117000, warmup=1950, eval_every=3900, augment="crop,crop,autoaugment,cutmix",
                  label_smoothing=0.1,
                  augment_opt={"pad_mode": "constant", "mix_prob": 0.5})
    input_rank = 3  # (H, W, C) images, cut into patches

    def __init__(self, cfg: MixerConfig, plugin: Parametrization, rngs: nnx.Rngs):
        self.cfg = cfg
        top, body, _ = scales(cfg, plugin)
        tokens, patch_dim = image_patches(cfg.in_shape, cfg.patch)
        self.embed = Dense(patch_dim, cfg.width, kind="input", scale=top, rngs=rngs, bias=cfg.bias,
                           role="patch_embed")
        self.stack = Stack(lambda r: MixerBlock(cfg.width, tokens, cfg.token_dim, cfg.mlp_ratio * cfg.width,
                                                scale=body, rngs=r, bias=cfg.bias, norm_eps=cfg.norm_eps,
                                                activation=cfg.activation),
                           cfg.depth, rngs, scan=cfg.scan, remat=cfg.remat, drop_path=cfg.drop_path)
        self.norm = LayerNorm(cfg.width, scale=top, rngs=rngs, eps=cfg.norm_eps)
        self.head = Dense(cfg.width, cfg.num_classes, kind="output", scale=top, rngs=rngs, bias=cfg.bias,
                          role="readout")

    def __call__(self, x: jax.Array, key: jax.Array | None = None, train: bool = False):
        """Logits and intermediates: embed (B, S, n); pre (L, B, S, 4n) and blocks (L, B, S, n)."""
        x0 = self.embed(patchify(x.astype(jnp.dtype(self.cfg.dtype)), self.cfg.patch))
        xl, inter = self.stack(x0, key if train else None)
        return self.head(self.norm(xl).mean(1)), {"embed": x0, **inter}
