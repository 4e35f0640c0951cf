"""Every forward multiplier of a zoo model folded into the parameter it multiplies (TP IVb Prop 2.2.3 run the other
way), giving the same function as an ordinary SP network: no multipliers, attention logits q.k / sqrt(d).

    Dense          y = m (x W) + b                 W <- m W
    Embed          x = m E[ids]                    E <- m E
    Attention      logits s q.k, q = x W_q + b_q   (W_q, b_q) <- s sqrt(d) (W_q, b_q)
    residual       x <- x + beta branch(x)         the matrix and bias ending the branch <- beta (W, b)
                   (MLP-ResNet blocks phi(W x + b): exact when phi(beta u) = beta phi(u): relu or abs with beta > 0,
                   identity; pre_nonlin blocks end in a matrix and need nothing of phi)
    tied readout   f = m_out h E^T                 an untied head V = m_out E^T (E itself keeps the input's m)

A skip multiplier mu != 1 (the `critical` plugin) scales the residual stream itself: no parameter can absorb it.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from zoo.models import mlp_resnet, transformer
from zoo.models.gpt import GPT
from zoo.models.layers import Dense
from zoo.tree import key_path

HOMOGENEOUS = {"relu": "positive", "abs": "positive", "identity": "any"}  # phi(c u) = c phi(u) for these c


def folded_params(model: nnx.Module) -> dict[str, jax.Array]:
    """Path ("stack/blocks/attn/q/kernel") -> the parameter with every multiplier the model applies to it folded
    in; a tied GPT readout comes out as an untied "head/kernel"."""
    raw = {key_path(p): v for p, v in jax.tree_util.tree_flatten_with_path(nnx.state(model, nnx.Param))[0]}
    factors: dict[str, list[jax.Array]] = {}

    def scale(path: str, factor: Any, *names: str) -> None:
        for name in names:
            key = f"{path}/{name}" if path else name
            if key in raw:  # biases are optional
                factors.setdefault(key, []).append(jnp.asarray(factor))

    for node_path, node in nnx.iter_graph(model):
        path = "/".join(map(str, node_path))
        if isinstance(node, Dense):
            scale(path, node.mult[...], "kernel")
        elif isinstance(node, transformer.Embed):
            scale(path, node.mult[...], "table")
        elif isinstance(node, transformer.Attention):
            scale(f"{path}/q", node.logit_scale[...] * math.sqrt(node.heads.dim), "kernel", "bias")
        elif isinstance(node, transformer.Block):
            _no_skip(path, node.attn_skip, node.mlp_skip)
            scale(f"{path}/attn/o", node.attn_branch[...], "kernel", "bias")
            scale(f"{path}/mlp/fc2", node.mlp_branch[...], "kernel", "bias")
        elif isinstance(node, transformer.MixerBlock):
            _no_skip(path, node.token_skip, node.channel_skip)
            scale(f"{path}/token_mlp/fc2", node.token_branch[...], "kernel", "bias")
            scale(f"{path}/channel_mlp/fc2", node.channel_branch[...], "kernel", "bias")
        elif isinstance(node, mlp_resnet.Block):
            _no_skip(path, node.skip)
            _check_homogeneous(node, node.branch[...])
            scale(f"{path}/{'w1' if node.w2 is None else 'w2'}", node.branch[...], "kernel", "bias")
    out = _apply({k: v[...] for k, v in raw.items()}, factors)
    if isinstance(model, GPT) and model.head is None:
        out["head/kernel"] = model.wte.table[...].T * model.readout_mult[...]
    return out


@jax.jit
def _apply(params: dict[str, jax.Array], factors: dict[str, list[jax.Array]]) -> dict[str, jax.Array]:
    out = {}
    for key, w in params.items():
        for f in factors.get(key, []):
            w = w * f.reshape(f.shape + (1,) * (w.ndim - f.ndim)).astype(w.dtype)  # per-block factors: (L,)
        out[key] = w
    return out


def _no_skip(path: str, *skips: nnx.Variable) -> None:
    for skip in skips:
        mu = np.asarray(skip[...])
        if np.any(mu != 1.0):
            raise ValueError(f"{path}: the skip multiplier mu = {float(mu.ravel()[0]):g} scales the residual stream, "
                             "which no parameter can absorb: this run has no SP form")


def _check_homogeneous(block: mlp_resnet.Block, branch: jax.Array) -> None:
    """The MLP-ResNet branch MS(phi(W x + b)) takes beta into W and b only when phi is positively homogeneous."""
    beta = np.asarray(branch)
    if block.pre_nonlin or np.all(beta == 1.0):
        return
    kind = HOMOGENEOUS.get(block.phi_name)
    if kind is None or (kind == "positive" and np.any(beta <= 0)):
        raise ValueError(f"the MLP-ResNet branch multiplier ({float(beta.ravel()[0]):.4g}) acts after "
                         f"{block.phi_name}(W x + b), which is not {'positively ' if kind else ''}homogeneous: it "
                         "cannot move into W (relu, abs and identity can, as can pre_nonlin blocks)")
