"""What a parametrization needs to know about one parameter (design.md section 3)."""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

Kind = Literal["input", "hidden", "output", "vector", "scalar"]
KINDS: tuple[str, ...] = ("input", "hidden", "output", "vector", "scalar")
LAYOUTS: tuple[str, ...] = ("in_out", "out_in", "spatial_out_in")


@dataclasses.dataclass(frozen=True)
class Tag:
    """A parameter's role, by how many of its dimensions grow with width (TP IVb, Defs 2.9.11/2.9.12).

    kind: input (fixed -> width), hidden (width -> width), output (width -> fixed),
      vector (one width dim: biases, norm gains), scalar (no width dim).
    width_mult: m = n / n0 against the base width n0.
    branch: the parameter sits inside a residual branch of a stack of `depth` blocks (base `base_depth`).
    role: a finer name some plugins act on ("query", "readout", ...).
    layout: where the fans sit in the array, after any leading stacked-layer axes: "in_out" (the fan-out is the last
      axis and the fan-in the product of the others: Flax, Haiku, zoo's embedding tables), "out_in" (the first is
      the fan-out: zoo's Dense kernels, Equinox, PyTorch) or "spatial_out_in" (the next to last is the fan-out, the
      last and the leading ones the fan-in: Haiku's ConvTranspose w [kh, kw, out, in]); Muon orthogonalises over
      these axes, one matrix per stacked layer.
    out_axes: how many axes the fan-out spans, k: the last k under in_out, the first k under out_in, the k before
      the last under spatial_out_in (zoo.param.fans.fan_out_axes). 1 but for
      kernels with several output axes, which shapes cannot tell from a fan-in over several axes: a Flax DenseGeneral
      or attention query/key/value kernel [n, heads, head_dim] has fan_in n and fan_out heads * head_dim (k = 2),
      its output kernel [heads, head_dim, n] fan_in heads * head_dim and fan_out n (k = 1).
    """

    kind: Kind
    fan_in: int
    fan_out: int
    width_mult: float = 1.0
    branch: bool = False
    depth: int = 1
    base_depth: int = 1
    role: str = ""
    layout: str = "in_out"
    out_axes: int = 1

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown parameter kind {self.kind!r}; kinds are {', '.join(KINDS)}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if self.out_axes < 1:
            raise ValueError(f"out_axes must be at least 1, got {self.out_axes}")

    def misfit(self, shape: tuple[int, ...]) -> str | None:
        """Why an array of `shape` cannot carry this tag, or None. One layer (the trailing axes, after any stacked
        layers' leading ones) holds fan_in * fan_out entries; a hidden or output layer's fan-in is the width, so a
        fan-in of 1 needs an axis of its own (a gain [n] tagged hidden, fan-in 1, took muP's hidden LR n^-1)."""
        size = self.fan_in * self.fan_out
        layer = next((shape[i:] for i in range(len(shape) + 1) if math.prod(shape[i:]) == size), None)
        if layer is None:
            return f"its fans ({self.fan_in} x {self.fan_out}) do not multiply to its layer's entries"
        if self.kind in ("hidden", "output") and self.fan_in == 1 and len(layer) <= self.out_axes:
            return f"{self.kind} parameters read the width, but its fan-in is 1 (a bias or gain [n] is a vector)"
        return None

    @property
    def base_fan_in(self) -> float:
        """The fan-in at the base width (hidden and output layers read a width-sized input)."""
        return self.fan_in / self.width_mult if self.kind in ("hidden", "output") else self.fan_in

    @property
    def base_fan_out(self) -> float:
        """The fan-out at the base width (input and hidden layers write a width-sized output)."""
        return self.fan_out / self.width_mult if self.kind in ("input", "hidden") else self.fan_out

    @property
    def depth_ratio(self) -> float:
        """L / L0 for parameters inside residual branches, 1 elsewhere."""
        return self.depth / self.base_depth if self.branch else 1.0
