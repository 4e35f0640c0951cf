"""What the audit measures: a zoo run (model, plugin, optimizer, mesh, gradient accumulation, precision), built at
any width and depth as train.py builds it, with the same optax chain (or another one, to show the audit catches it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

import zoo.models
from zoo import optim
from zoo.diagnostics.inputs import random_batch
from zoo.optim import OptimConfig
from zoo.param.base import Parametrization
from zoo.train.step import Program, build_program

Chain = Callable[[OptimConfig, Parametrization, Any], optax.GradientTransformation]


@dataclasses.dataclass
class ZooRun:
    """A zoo model under a plugin and optimizer. `chain(cfg, plugin, params)` builds the optax chain (zoo's own by
    default); `model_opt` overrides the model's config (dropout is off: the probe compares the step's update with
    the gradient)."""

    model: str
    plugin: Parametrization
    optim: OptimConfig
    model_opt: dict[str, Any] = dataclasses.field(default_factory=dict)
    mesh: str | None = None
    grad_accum: int = 1
    precision: str = "f32"
    batch_size: int = 16
    chain: Chain = optim.build

    def __post_init__(self):
        zoo.models.config(self.model, **self.model_opt)  # an unknown model or option: refused before anything runs
        if self.precision not in ("f32", "bf16"):
            raise ValueError(f"precision must be f32 or bf16, got {self.precision!r}")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch size {self.batch_size} is not divisible by grad_accum {self.grad_accum}")

    def default_size(self) -> tuple[int, int]:
        cfg = zoo.models.config(self.model)
        return cfg.width, cfg.depth

    def model_config(self, width: int, depth: int, base_width: int, base_depth: int) -> Any:
        fields = {f.name for f in dataclasses.fields(zoo.models.config(self.model))}
        fixed = {"width": width, "depth": depth, "base_width": base_width, "base_depth": base_depth,
                 "dtype": "bfloat16" if self.precision == "bf16" else "float32"}
        if "dropout" in fields:
            fixed["dropout"] = 0.0  # the probe's gradient is the step's: no dropout mask between them
        return zoo.models.config(self.model, **{**self.model_opt, **fixed})

    def program(self, width: int, depth: int, base_width: int, base_depth: int) -> tuple[Program, Any]:
        """The run's program at this size (its chain from `chain`) and the model config."""
        cfg, plugin = self.model_config(width, depth, base_width, base_depth), self.plugin

        def make(r):
            return zoo.models.create(self.model, cfg, plugin, r)

        dtype = jnp.bfloat16 if self.precision == "bf16" else jnp.float32
        prog = build_program(make, plugin, self.optim, dtype, grad_accum=self.grad_accum)
        params = nnx.state(nnx.eval_shape(lambda: make(nnx.Rngs(0))), nnx.Param)
        return dataclasses.replace(prog, tx=self.chain(self.optim, plugin, params)), cfg

    def batch(self, model_cfg: Any, key: jax.Array) -> dict[str, jax.Array]:
        """Random inputs and labels of the model's input shape."""
        return random_batch(model_cfg, self.batch_size, key)

    def describe(self) -> dict[str, Any]:
        return {"model": self.model, "param": self.plugin.spec(), "optimizer": self.optim.name,
                "muon_io": self.optim.muon_io, "lr": self.optim.lr, "weight_decay": self.optim.decay,
                "eps": self.optim.eps, "mesh": self.mesh or "", "grad_accum": self.grad_accum,
                "precision": self.precision, "batch_size": self.batch_size, "model_opt": self.model_opt}
