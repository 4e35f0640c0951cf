"""Every forward multiplier of a zoo model folded into the parameter it multiplies (TP IVb Prop 2.2.3 run the other
way), giving the same function as an ordinary SP network: no multipliers, attention logits q.k / sqrt(d).

Each module that applies a multiplier says where it folds, `folds() -> [(parameter path in the module, factor)]`,
and refuses (ValueError) what cannot fold; a model with a tied readout gives it untied (`untied()`):

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

import jax
import jax.numpy as jnp
from flax import nnx

from zoo.train.step import jit_run_once
from zoo.tree import key_path


def folded_params(model: nnx.Module) -> dict[str, jax.Array]:
    """Path ("stack/blocks/attn/q/kernel") -> the parameter with every multiplier the model applies to it folded
    in; a tied GPT readout comes out as an untied "head/kernel"."""
    raw = {key_path(p): v for p, v in jax.tree_util.tree_flatten_with_path(nnx.state(model, nnx.Param))[0]}
    factors: dict[str, list[jax.Array]] = {}
    for node_path, node in nnx.iter_graph(model):
        path = "/".join(map(str, node_path))
        for name, factor in getattr(node, "folds", list)():
            key = f"{path}/{name}" if path else name
            if key in raw:  # biases are optional
                factors.setdefault(key, []).append(jnp.asarray(factor))
    out = _apply({k: v[...] for k, v in raw.items()}, factors)
    return {**out, **getattr(model, "untied", dict)()}


@jit_run_once  # runs once per export: elementwise products
def _apply(params: dict[str, jax.Array], factors: dict[str, list[jax.Array]]) -> dict[str, jax.Array]:
    out = {}
    for key, w in params.items():
        for f in factors.get(key, []):
            w = w * f.reshape(f.shape + (1,) * (w.ndim - f.ndim)).astype(w.dtype)  # per-block factors: (L,)
        out[key] = w
    return out
