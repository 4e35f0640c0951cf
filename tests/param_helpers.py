"""Shared pieces of the parametrization tests: one small MLP-ResNet shape, a batch, short eager trajectories.

Every eager test uses the same shapes (unrolled stack), so the per-op kernels compile once per process and
are shared by all plugins.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import zoo.models as M
import zoo.param as P
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.train.step import Program, build_program

WIDTH, DEPTH, IN_DIM, CLASSES, BATCH = 64, 4, 8, 4, 8
# options that make a plugin's init SP's at the base shape where its default init is deliberately not SP's
SP_INIT_OPTIONS: dict[str, dict[str, Any]] = {"critical": {"sigma_w": 1.0, "sigma_b": 0.0, "mu": 1.0}}


def program(plugin: Parametrization, optim: str = "adam", lr: float = 1e-2, eps: float = 1e-8,
            **overrides: Any) -> Program:
    """The MLP-ResNet (biases and pre-LN on, so every parameter kind is present) under `plugin`."""
    cfg = M.config("mlp_resnet", **{"width": WIDTH, "depth": DEPTH, "in_shape": (IN_DIM,), "num_classes": CLASSES,
                                    "bias": True, "pre_ln": True, "scan": False, **overrides})
    return build_program(lambda r: M.create("mlp_resnet", cfg, plugin, r), plugin,
                         OptimConfig(name=optim, lr=lr, eps=eps))


def batch(size: int = BATCH, scale: float = 1.0, seed: int = 0) -> dict[str, jax.Array]:
    kx, ky = jax.random.split(jax.random.key(seed))
    return {"x": scale * jax.random.normal(kx, (size, IN_DIM)), "y": jax.random.randint(ky, (size,), 0, CLASSES)}


def trajectory(prog: Program, data: dict[str, jax.Array], steps: int = 3, seed: int = 0) -> list[dict[str, Any]]:
    """Eager init and `steps` train steps: per step (the init first) the params, logits and (after a step) loss."""
    state = prog.init(jax.random.key(seed))
    out = [{"params": state["params"], "logits": np.asarray(prog.model(state)(data["x"])[0])}]
    for _ in range(steps):
        state, metrics = prog.train_step(state, data)
        out.append({"params": state["params"], "logits": np.asarray(prog.model(state)(data["x"])[0]),
                    "loss": float(metrics["loss"])})
    return out


def leaves(params: Any) -> dict[str, Any]:
    """Path string -> nnx.Variable for every parameter."""
    flat = jax.tree_util.tree_flatten_with_path(params, is_leaf=lambda x: hasattr(x, "get_metadata"))[0]
    return {jax.tree_util.keystr(path): v for path, v in flat}


def s(*shape: int) -> jax.ShapeDtypeStruct:
    """A float32 leaf of `shape`, for infer_tags on shapes alone."""
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def kinds(tags: Any) -> dict[str, tuple]:
    """infer_tags' answer as path -> (kind, fan_in, fan_out)."""
    flat = jax.tree_util.tree_flatten_with_path(tags, is_leaf=lambda t: isinstance(t, P.Tag))[0]
    return {"/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in p): (t.kind, t.fan_in, t.fan_out)
            for p, t in flat}
