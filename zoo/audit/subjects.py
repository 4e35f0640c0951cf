"""What the audit measures, built at any width and depth: a zoo run (model, plugin, optimizer, mesh, gradient
accumulation, precision) as train.py builds it, with the same optax chain (or another one, to show the audit catches
it); or any JAX model (Haiku, Flax Linen, Equinox, a plain pytree) under a plugin's multiplier-free form, its tags
from its shapes at two widths (zoo.param.infer_tags), as zoo.diagnostics.coord_any trains it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

import zoo.models
from zoo import optim
from zoo.diagnostics.coord_any import tags_at
from zoo.diagnostics.inputs import random_batch
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.param.gauge import multiplier_free, scale_leaves
from zoo.param.tags import Tag
from zoo.schema import compute_dtype
from zoo.train.step import Program, build_program

Chain = Callable[[OptimConfig, Parametrization, Any, int | None], optax.GradientTransformation]
Apply = Callable[..., tuple[jax.Array, Any]]


@dataclasses.dataclass
class ZooRun:
    """A zoo model under a plugin and optimizer. `chain(cfg, plugin, params, horizon)` builds the optax chain (zoo's
    own by default); `model_opt` overrides the model's config (dropout is off: the probe compares the step's update
    with the gradient)."""

    model: str
    plugin: Parametrization
    optim: OptimConfig
    model_opt: dict[str, Any] = dataclasses.field(default_factory=dict)
    mesh: str | None = None
    grad_accum: int = 1
    precision: str = "f32"
    batch_size: int = 16
    horizon: int | None = None  # the run's length, for a decaying schedule
    chain: Chain = optim.build

    def __post_init__(self):
        zoo.models.config(self.model, **self.model_opt)  # an unknown model or option: refused before anything runs
        if self.precision not in ("f32", "bf16"):
            raise ValueError(f"precision must be f32 or bf16, got {self.precision!r}")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch size {self.batch_size} is not divisible by grad_accum {self.grad_accum}")

    def default_size(self) -> tuple[int, int]:
        """The width and depth the run's model options give (else the model's defaults)."""
        cfg = zoo.models.config(self.model, **self.model_opt)
        return cfg.width, cfg.depth

    def model_config(self, width: int, depth: int, base_width: int, base_depth: int) -> Any:
        fixed = {"width": width, "depth": depth, "base_width": base_width, "base_depth": base_depth,
                 "dtype": compute_dtype(self.precision)}
        # dropout and drop path off: the numbers are the rules', not a mask's (the same under --grad-accum, whose
        # microbatches draw masks of their own)
        fixed.update(dict.fromkeys(zoo.models.config(self.model).rates, 0.0))
        return zoo.models.config(self.model, **{**self.model_opt, **fixed})

    def program(self, width: int, depth: int, base_width: int, base_depth: int) -> tuple[Program, Any]:
        """The run's program at this size (its chain from `chain`) and the model config."""
        cfg, plugin = self.model_config(width, depth, base_width, base_depth), self.plugin

        def make(r):
            return zoo.models.create(self.model, cfg, plugin, r)

        dtype = jnp.dtype(compute_dtype(self.precision))
        prog = build_program(make, plugin, self.optim, dtype, grad_accum=self.grad_accum, horizon=self.horizon)
        params = nnx.state(nnx.eval_shape(lambda: make(nnx.Rngs(0))), nnx.Param)
        return dataclasses.replace(prog, tx=self.chain(self.optim, plugin, params, self.horizon)), cfg

    def batch(self, model_cfg: Any, key: jax.Array) -> dict[str, jax.Array]:
        """Random inputs and labels of the model's input shape."""
        return random_batch(model_cfg, self.batch_size, key)

    def law_plugin(self, width: int, base_width: int) -> Parametrization:
        """The plugin whose stated rules the laws read (zoo.audit.laws)."""
        del width, base_width
        return self.plugin

    def folds(self, width: int, base_width: int, tags: dict[str, Tag]) -> dict[str, float]:
        """Path -> log of what is folded into a parameter beyond m^-a (none in a zoo model: it keeps its
        multipliers)."""
        del width, base_width, tags
        return {}

    def param_path(self, path: str) -> str:
        """A parameter's name in the audit: its path in the model's state."""
        return path

    def describe(self) -> dict[str, Any]:
        return {"model": self.model, "param": self.plugin.spec(), "optimizer": self.optim.name,
                "muon_io": self.optim.muon_io, "lr": self.optim.lr, "weight_decay": self.optim.decay,
                "decay_vectors": self.optim.decay_vectors, "eps": self.optim.eps, "mesh": self.mesh or "",
                "grad_accum": self.grad_accum,
                "precision": self.precision, "batch_size": self.batch_size, "model_opt": self.model_opt}


WRAPPED = "params"  # the attribute of Wrapped that holds the model's own pytree


class Wrapped(nnx.Module):
    """A pytree of parameters with their tags as nnx.Params, applied by `apply`: any model as zoo's Program sees one.
    Its parameters go by their paths under WRAPPED + "/" (AnyRun.param_path takes that off)."""

    def __init__(self, params: Any, tags: Any, apply: Apply, width: int, depth: int):
        self.params = nnx.data(jax.tree.map(lambda t, w: w if t is None else nnx.Param(w, tag=t), tags, params,
                                            is_leaf=lambda x: x is None))
        self.apply, self.width, self.depth = apply, width, depth

    def __call__(self, x: jax.Array, key: jax.Array | None = None, train: bool = False) -> tuple[jax.Array, Any]:
        del key, train
        params = jax.tree.map(lambda v: v[...] if isinstance(v, nnx.Variable) else v, self.params,
                              is_leaf=lambda v: isinstance(v, nnx.Variable))
        return self.apply(params, x, self.width, self.depth)


@dataclasses.dataclass
class AnyRun:
    """Any JAX model: `init(key, width, depth)` is its own SP init and `apply(params, x, width, depth)` returns
    (logits, intermediates); `rules`, `layout` and `head_dim` (a number or a function of the width) as
    zoo.param.infer_tags and multiplier_free take them; `batch` the probe's inputs and integer labels. Base width:
    the smallest audited width, as in zoo.diagnostics.coord_any."""

    init: Callable[[jax.Array, int, int], Any]
    apply: Apply
    plugin: Parametrization
    optim: OptimConfig
    batch_data: dict[str, jax.Array]
    rules: dict[str, Any] | None = None
    layout: str = "in_out"
    head_dim: int | Callable[[int], int] | None = None
    mesh: str | None = None
    grad_accum: int = 1
    precision: str = "f32"
    chain: Chain = optim.build

    def default_size(self) -> tuple[int, int]:
        raise ValueError("a model zoo does not know has no default size: give the depth it is measured at across "
                         "widths (audit(..., widths=[...], depth=L)), and the width across depths (width=n)")

    def heads(self, width: int, base_width: int) -> dict[str, int]:
        if self.head_dim is None:
            return {}
        at = self.head_dim if callable(self.head_dim) else (lambda _: self.head_dim)
        return {"head_dim": at(width), "base_head_dim": at(base_width)}

    def law_plugin(self, width: int, base_width: int) -> Parametrization:
        return multiplier_free(self.plugin, **self.heads(width, base_width))

    def param_path(self, path: str) -> str:
        """A parameter's name in the audit: its path in the model's own pytree, as its author writes it (a Flax Linen
        model's "params/Dense_0/kernel", a Haiku one's "linear/w"), not under Wrapped's attribute."""
        return path.removeprefix(WRAPPED + "/")

    def folds(self, width: int, base_width: int, tags: dict[str, Tag]) -> dict[str, float]:
        """log of the branch multiplier and attention scale folded into branch_output and query leaves (the width part
        m^-a of the fold is in the multiplier-free form's exponents)."""
        free = self.law_plugin(width, base_width)
        return {p: math.log(abs(float(free.folded(t))) / float(self.plugin.multiplier(t))) for p, t in tags.items()
                if t.role in ("branch_output", "query")}

    def program(self, width: int, depth: int, base_width: int, base_depth: int) -> tuple[Program, Any]:
        infer = {"rules": self.rules, "layout": self.layout}
        tags = tags_at(self.init, width, depth, base_width, base_depth, **infer)
        free = multiplier_free(self.plugin, tags, **self.heads(width, base_width))
        factors = jax.tree.map(free.init_factor, tags, is_leaf=lambda t: isinstance(t, Tag))

        def make(r):
            params = scale_leaves(self.init(r.params(), width, depth), factors)
            return Wrapped(params, tags, self.apply, width, depth)

        dtype = jnp.dtype(compute_dtype(self.precision))
        prog = build_program(make, free, self.optim, dtype, grad_accum=self.grad_accum)
        params = nnx.state(nnx.eval_shape(lambda: make(nnx.Rngs(0))), nnx.Param)
        return dataclasses.replace(prog, tx=self.chain(self.optim, free, params, None)), None

    def batch(self, model_cfg: Any, key: jax.Array) -> dict[str, jax.Array]:
        del model_cfg, key
        return self.batch_data

    def describe(self) -> dict[str, Any]:
        return {"model": getattr(self.init, "__module__", "any"), "param": self.plugin.spec(),
                "optimizer": self.optim.name, "muon_io": self.optim.muon_io, "lr": self.optim.lr,
                "weight_decay": self.optim.decay, "decay_vectors": self.optim.decay_vectors, "eps": self.optim.eps,
                "mesh": self.mesh or "", "grad_accum": self.grad_accum, "precision": self.precision,
                "batch_size": int(self.batch_data["x"].shape[0])}
