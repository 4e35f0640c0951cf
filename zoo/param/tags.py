"""What a parametrization needs to know about one parameter (design.md section 3)."""

from __future__ import annotations

import dataclasses
from typing import Literal

Kind = Literal["input", "hidden", "output", "vector", "scalar"]
KINDS: tuple[str, ...] = ("input", "hidden", "output", "vector", "scalar")


@dataclasses.dataclass(frozen=True)
class Tag:
    """A parameter's role, by how many of its dimensions grow with width (TP IVb, Defs 2.9.11/2.9.12).

    kind: input (fixed -> width), hidden (width -> width), output (width -> fixed),
      vector (one width dim: biases, norm gains), scalar (no width dim).
    width_mult: m = n / n0 against the base width n0.
    branch: the parameter sits inside a residual branch of a stack of `depth` blocks (base `base_depth`).
    role: a finer name some plugins act on ("query", "readout", ...).
    """

    kind: Kind
    fan_in: int
    fan_out: int
    width_mult: float = 1.0
    branch: bool = False
    depth: int = 1
    base_depth: int = 1
    role: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown parameter kind {self.kind!r}; kinds are {', '.join(KINDS)}")

    @property
    def base_fan_in(self) -> float:
        """The fan-in at the base width (hidden and output layers read a width-sized input)."""
        return self.fan_in / self.width_mult if self.kind in ("hidden", "output") else self.fan_in

    @property
    def depth_ratio(self) -> float:
        """L / L0 for parameters inside residual branches, 1 elsewhere."""
        return self.depth / self.base_depth if self.branch else 1.0
