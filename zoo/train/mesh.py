"""The device mesh `data x fsdp x tensor` (`--mesh data=D,fsdp=F,tensor=T`) and the shardings of a run's state
and batch over it.

Each parameter's logical axes are metadata set by the layer that creates it (`axes`, next to its tag, e.g.
("embed", "heads") for a query kernel); RULES below is the one place that maps them to mesh axes:

- tensor (Megatron): the first dim named "heads" or "mlp": q/k/v and the first MLP matrix split by columns,
  the attention output and the second MLP matrix by rows;
- fsdp (ZeRO-3): one more dim that divides by the fsdp size, preferring the dims named for it ("embed",
  "vocab"), then the largest; parameters and optimizer state alike (the moments carry their parameter's axes);
- data: nothing (replicated); the batch is split over data x fsdp.

A checkpoint saved under one mesh restores under any other (orbax reshards to the shardings asked for).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from zoo.schema import to_int

AXES = ("data", "fsdp", "tensor")
RULES = {"heads": "tensor", "mlp": "tensor", "embed": "fsdp", "vocab": "fsdp"}
BATCH = ("data", "fsdp")


def given_axes(spec: str | None) -> dict[str, int]:
    """'tensor=2,data=4' -> {tensor: 2, data: 4}: the axes a --mesh names, each once, with positive integer sizes
    (what is checked before any device is known: the resolved config, --print-config)."""
    sizes: dict[str, int] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in AXES:
            raise ValueError(f"--mesh: unknown axis {name!r}; axes are {', '.join(AXES)} (e.g. data=4,tensor=2)")
        if name in sizes:
            raise ValueError(f"--mesh {spec}: axis {name} is given twice; give each axis once")
        try:
            sizes[name] = to_int(value.strip())
        except ValueError:
            raise ValueError(f"--mesh: {part!r} needs an integer size (e.g. fsdp=8)") from None
        if sizes[name] < 1:
            raise ValueError(f"--mesh: axis {name} must have a positive size, got {sizes[name]}")
    return sizes


def parse(spec: str | None, n_devices: int) -> dict[str, int]:
    """'data=4,tensor=2' -> {data: 4, fsdp: 1, tensor: 2}; axes left out are 1, and data takes what is left."""
    sizes = given_axes(spec)
    given = math.prod(sizes.values())
    if "data" not in sizes:
        if n_devices % given:
            raise ValueError(f"--mesh {spec}: fsdp x tensor = {given} does not divide the {n_devices} devices "
                             "present, so the data axis cannot take the rest")
        sizes["data"] = n_devices // given
    sizes = {a: sizes.get(a, 1) for a in AXES}
    if math.prod(sizes.values()) != n_devices:
        raise ValueError(f"--mesh {spec}: data x fsdp x tensor = {math.prod(sizes.values())} must equal the "
                         f"{n_devices} devices present")
    return sizes


def axes_of(variable: nnx.Variable, ndim: int) -> tuple[str | None, ...]:
    """A parameter's logical axes, with None for a leading stacked-blocks axis (nnx.vmap adds one)."""
    axes = tuple(variable.get_metadata().get("axes") or ())
    if len(axes) == ndim - 1:
        axes = (None, *axes)
    return axes if len(axes) == ndim else (None,) * ndim


@dataclasses.dataclass(frozen=True)
class MeshPlan:
    mesh: jax.sharding.Mesh

    @classmethod
    def from_spec(cls, spec: str | None, devices: list | None = None) -> MeshPlan:
        devices = devices if devices is not None else jax.devices()
        sizes = parse(spec, len(devices))
        mesh = jax.make_mesh(tuple(sizes.values()), AXES, devices=devices,
                             axis_types=(jax.sharding.AxisType.Auto,) * len(AXES))
        return cls(mesh)

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.mesh.shape)

    @property
    def replicated(self) -> NamedSharding:
        return NamedSharding(self.mesh, P())

    @property
    def batch(self) -> NamedSharding:
        """The leading (example) axis split over data x fsdp."""
        return NamedSharding(self.mesh, P(BATCH))

    @property
    def batch_ways(self) -> int:
        return self.sizes["data"] * self.sizes["fsdp"]

    def check_batch(self, batch_size: int, what: str = "--batch-size") -> None:
        if batch_size % self.batch_ways:
            raise ValueError(f"{what} {batch_size} is not divisible by the {self.batch_ways} ways the batch is "
                             f"split (mesh data x fsdp = {self.sizes['data']} x {self.sizes['fsdp']})")

    def spec(self, shape: tuple[int, ...], axes: tuple[str | None, ...]) -> P:
        """The PartitionSpec of an array with these logical axes (module docstring)."""
        out: list[str | None] = [None] * len(shape)
        tensor, fsdp = self.sizes["tensor"], self.sizes["fsdp"]
        if tensor > 1:
            for i, name in enumerate(axes):
                if RULES.get(name) == "tensor" and shape[i] % tensor == 0:
                    out[i] = "tensor"
                    break
        if fsdp > 1:
            free = [i for i in range(len(shape)) if out[i] is None and shape[i] % fsdp == 0 and shape[i] > 1]
            if free:
                best = max(free, key=lambda i: (RULES.get(axes[i]) == "fsdp", shape[i], -i))
                out[best] = "fsdp"
        return P(*out)

    def state_shardings(self, abstract_state: Any) -> Any:
        """Shardings for a train state: every nnx Variable (parameters and the moments that mirror them) by its
        logical axes; every other leaf (step, RNG key, LR, counts) replicated."""

        def one(x):
            if isinstance(x, nnx.Variable):
                value = x.get_value()
                if not hasattr(value, "shape"):  # a masked optimizer state (optax.MaskedNode): no array to place
                    return x
                return x.replace(NamedSharding(self.mesh, self.spec(value.shape, axes_of(x, len(value.shape)))))
            return self.replicated

        return jax.tree.map(one, abstract_state, is_leaf=lambda x: isinstance(x, nnx.Variable))

    def check_run(self, abstract_state: Any, batch_size: int, grad_accum: int = 1) -> None:
        """The batch and each of its `grad_accum` microbatches split over data x fsdp, and the tensor and fsdp axes
        each divide some dimension of the model (`check_model`): what train.py and the audit check before anything
        compiles."""
        self.check_batch(batch_size)
        if grad_accum > 1:
            self.check_batch(batch_size // grad_accum, f"the microbatch (--batch-size / --grad-accum {grad_accum})")
        self.check_model(abstract_state)

    def check_model(self, abstract_state: Any) -> None:
        """A tensor or fsdp axis that divides no dimension it could split is one clear error, not a silent copy of
        every parameter on every device."""
        tensor, fsdp = self.sizes["tensor"], self.sizes["fsdp"]
        variables = _variables(abstract_state["params"])
        shapes = [(v.get_value().shape, axes_of(v, len(v.get_value().shape))) for v in variables]
        if fsdp > 1 and not any("fsdp" in self.spec(shape, axes) for shape, axes in shapes):
            raise ValueError(f"--mesh fsdp={fsdp} divides none of the model's parameter dimensions, so every "
                             "parameter would be whole on every device: use an fsdp size that divides the width")
        if tensor == 1:
            return
        if not any(RULES.get(name) == "tensor" for _, axes in shapes for name in axes):
            raise ValueError(f"--mesh tensor={tensor}: the model has no head or MLP dimension for the tensor axis to "
                             "split (the transformers' and the Mixer's have); use data and fsdp")
        if not any("tensor" in self.spec(shape, axes) for shape, axes in shapes):
            raise ValueError(f"--mesh tensor={tensor} divides none of the model's head or MLP dimensions; "
                             "use a tensor size that divides the heads' width (heads x head_dim) or the MLP width")


def _variables(tree: Any) -> list[nnx.Variable]:
    return [x for x in jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, nnx.Variable))
            if isinstance(x, nnx.Variable)]


def per_device_bytes(tree: Any) -> int:
    """Bytes one device holds of a tree of (abstract or concrete) sharded arrays: the sum of shard sizes."""
    total = 0
    for x in jax.tree.leaves(tree):
        sharding = getattr(x, "sharding", None)
        shape = sharding.shard_shape(x.shape) if sharding is not None else x.shape
        total += int(np.prod(shape)) * np.dtype(x.dtype).itemsize
    return total


def process_rows(sharding: NamedSharding, batch_size: int) -> slice:
    """The contiguous rows of a global batch that this process's devices hold (multi-host: each process reads
    only its part)."""
    starts = sorted({(s[0].start or 0, s[0].stop if s[0].stop is not None else batch_size)
                     for s in sharding.addressable_devices_indices_map((batch_size,)).values()})
    lo, hi = starts[0][0], starts[-1][1]
    if hi - lo != sum(b - a for a, b in starts):
        raise ValueError("this process's devices do not hold one contiguous block of the batch; order the mesh's "
                         "devices by process")
    return slice(lo, hi)
