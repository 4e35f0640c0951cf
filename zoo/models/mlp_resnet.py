"""MLP-ResNet of Depth-muP (TP VI eq. (1), block depth 1):

    x^0 = U xi,   x^l = mu x^{l-1} + a L^-alpha MS(phi(W^l x^{l-1})),   f = V^T x^L

MS subtracts the mean over width. Options: pre-LN on the block input, block depth 2
(W2 phi(W1 x)), biases, and pre_nonlin: the branch W^l phi(x^{l-1}) (+ b) of the partial-Jacobian paper's
eq. (1) (Doshi et al.) instead of phi(W^l x^{l-1}). The branch multiplier, the skip multiplier mu (1 except in
the `critical` plugin) and every init/LR rule come from the plugin.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import numpy as np
from flax import nnx

from zoo.activations import HOMOGENEOUS, activation
from zoo.models.layers import Dense, LayerNorm, ModelConfig, Scale, Stack, branch_folds, residual, scales
from zoo.param.base import Parametrization


@dataclasses.dataclass
class MLPResNetConfig(ModelConfig):
    sizes = (*ModelConfig.sizes, "in_shape", "num_classes", "block_depth")
    width: int = 256
    depth: int = 8
    in_shape: tuple[int, ...] = (32, 32, 3)
    num_classes: int = 10
    activation: str = "relu"
    mean_subtract: bool = True
    pre_ln: bool = False
    block_depth: int = 1
    bias: bool = False
    pre_nonlin: bool = False  # branch W phi(x) + b instead of phi(W x + b)
    # its blocks are the residual MLP zoo.param.mean_field_theory follows (closed-form critical points)
    mean_field_block: ClassVar[bool] = True


class Block(nnx.Module):
    def __init__(self, cfg: MLPResNetConfig, scale: Scale, rngs: nnx.Rngs):
        n = cfg.width
        self.phi_name, self.ms, self.pre_nonlin = cfg.activation, cfg.mean_subtract, cfg.pre_nonlin
        self.norm = LayerNorm(n, scale=scale, rngs=rngs, branch=True) if cfg.pre_ln else None
        self.w1 = Dense(n, n, kind="hidden", scale=scale, rngs=rngs, bias=cfg.bias, branch=True)
        self.w2 = (Dense(n, n, kind="hidden", scale=scale, rngs=rngs, bias=cfg.bias, branch=True)
                   if cfg.block_depth == 2 else None)  # one assignment: nnx fixes data vs static at the first
        self.branch = scale.branch_multiplier()
        self.skip = scale.skip_multiplier()

    def folds(self) -> list[tuple[str, jax.Array]]:
        """x <- x + beta MS(phi(W x + b)): beta folds into W and b when phi is positively homogeneous (relu, abs) or
        linear, or when the branch ends in the matrix (pre_nonlin), with beta > 0 where phi needs it (zoo.export)."""
        beta = np.asarray(self.branch[...])
        kind = HOMOGENEOUS.get(self.phi_name)
        if not self.pre_nonlin and np.any(beta != 1.0) and (kind is None or (kind == "positive" and np.any(beta <= 0))):
            why = ("which is not homogeneous: it cannot move into W (relu, abs and identity can, as can pre_nonlin "
                   "blocks)") if kind is None else ("which is homogeneous for positive factors only: a multiplier "
                                                    "<= 0 cannot move into W (identity and pre_nonlin blocks take any)")
            raise ValueError(f"the MLP-ResNet branch multiplier ({float(beta.ravel()[0]):.4g}) acts after "
                             f"{self.phi_name}(W x + b), {why}")
        return branch_folds(self.skip, self.branch, "w1" if self.w2 is None else "w2")

    def __call__(self, x, key=None):
        phi = activation(self.phi_name)
        z = self.norm(x) if self.norm is not None else x
        if self.pre_nonlin:
            h = self.w1(phi(z))
            y = h if self.w2 is None else self.w2(phi(h))
        else:
            h = self.w1(z)
            y = phi(h) if self.w2 is None else phi(self.w2(phi(h)))
        if self.ms:
            y = y - y.mean(-1, keepdims=True)
        x = residual(x, y, self.skip, self.branch)
        return x, {"pre": h, "blocks": x}


class MLPResNet(nnx.Module):
    task = "classify"
    config_class = MLPResNetConfig
    # the run's defaults (flags override them): the recipe `python train.py --model mlp_resnet` trains. Reaches,
    # under --param depth_mup on the 2-core CPU of the dev machine, 50.1% test accuracy after 2000 steps (62 s warm).
    recipe = dict(data="cifar10", optimizer="adam", lr=1e-3, batch_size=128, steps=2000, eval_every=500)

    def __init__(self, cfg: MLPResNetConfig, plugin: Parametrization, rngs: nnx.Rngs):
        if cfg.block_depth not in (1, 2):
            raise ValueError(f"block_depth must be 1 or 2, got {cfg.block_depth}")
        self.cfg = cfg
        top, body, _ = scales(cfg, plugin)
        d_in = math.prod(cfg.in_shape)
        self.embed = Dense(d_in, cfg.width, kind="input", scale=top, rngs=rngs, bias=cfg.bias)
        self.stack = Stack(lambda r: Block(cfg, body, r), cfg.depth, rngs, scan=cfg.scan, remat=cfg.remat)
        self.head = Dense(cfg.width, cfg.num_classes, kind="output", scale=top, rngs=rngs, bias=cfg.bias,
                          role="readout")

    def __call__(self, x: jax.Array, key: jax.Array | None = None, train: bool = False):
        """Logits and intermediates: embed (B, n), pre and blocks (L, B, n)."""
        x = x.reshape(x.shape[0], -1).astype(self.cfg.dtype)
        x0 = self.embed(x)
        xl, inter = self.stack(x0, key)
        return self.head(xl), {"embed": x0, **inter}
