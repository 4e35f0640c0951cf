"""Shared pieces of the parametrization tests: one small MLP-ResNet shape, a batch, short eager trajectories; the
examples/ models (bring your own model) and readers of infer_tags' answers.

Every eager test uses the same shapes (unrolled stack), so the per-op kernels compile once per process and
are shared by all plugins.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from cli_utils import ROOT

import zoo.models as M
import zoo.param as P
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.train.step import Program, build_program, run_once_options
from zoo.tree import key_path

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


def trajectory(prog: Program, data: dict[str, jax.Array], steps: int = 3, seed: int = 0,
               jit: bool = False) -> list[dict[str, Any]]:
    """Init and `steps` train steps: per step (the init first) the params, logits and (after a step) loss. Op by op
    (each eager op compiled on its own, once per shape: the MLP-ResNet's are shared by every plugin, LR and test of a
    session, where a program per plugin compiles anew: the gauge tests took 3 -> 30 CPU-s each jitted), or with `jit`
    as programs compiled to run a few times (run_once_options(): the tied GPT compiled 385 eager ops, now 3
    programs)."""
    def logits(st, x):
        return prog.model(st)(x)[0]

    def compiled(fn, *args):
        return jax.jit(fn).lower(*args).compile(compiler_options=run_once_options()) if jit else fn

    key = jax.random.key(seed)
    state = compiled(prog.init, key)(key)
    step, logits = compiled(prog.train_step, state, data), compiled(logits, state, data["x"])
    out = [{"params": state["params"], "logits": np.asarray(logits(state, data["x"]))}]
    for _ in range(steps):
        state, metrics = step(state, data)
        out.append({"params": state["params"], "logits": np.asarray(logits(state, data["x"])),
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


def tagged(model, base: int = 40, width: int = 72, **kwargs) -> dict[str, tuple]:
    """kinds() of infer_tags on model(base) and model(width), a function of the width giving a tree of shapes."""
    return kinds(P.infer_tags(model(base), model(width), base_width=base, width=width, **kwargs))


def flat_tags(tags: Any) -> dict[str, tuple]:
    """infer_tags' answer as path -> (kind, fan_in, fan_out, layout, out_axes)."""
    return {key_path(p): (t.kind, t.fan_in, t.fan_out, t.layout, t.out_axes)
            for p, t in jax.tree_util.tree_flatten_with_path(tags)[0]}


def haiku_shapes(fn, width: int, x_shape: tuple) -> dict:
    """The parameter shapes of the Haiku function fn(x, width) on an input of x_shape."""
    import haiku as hk

    return jax.eval_shape(lambda: hk.transform(lambda x: fn(x, width)).init(jax.random.key(0), jnp.zeros(x_shape)))


def haiku_deconvs(x: jax.Array, width: int) -> jax.Array:
    """Bias-free transposed convs 2x2, stride 2: 3 channels to n, n to n, n to 5 (Haiku stores w [2, 2, out, in])."""
    import haiku as hk

    h = jax.nn.relu(hk.Conv2DTranspose(width, 2, stride=2, with_bias=False)(x))
    h = jax.nn.relu(hk.Conv2DTranspose(width, 2, stride=2, with_bias=False)(h))
    return hk.Conv2DTranspose(5, 2, stride=2, with_bias=False)(h)


@functools.cache
def example(name: str):
    """The examples/ script `name` as a module (its init, apply and main)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclass modules (Linen, Equinox) look themselves up there
    spec.loader.exec_module(module)
    return module


def images(size: int = 16) -> dict[str, jax.Array]:
    """A batch of CIFAR-shaped random images and labels, the examples' inputs."""
    kx, ky = jax.random.split(jax.random.key(0))
    return {"x": jax.random.normal(kx, (size, 32, 32, 3)), "y": jax.random.randint(ky, (size,), 0, 10)}
