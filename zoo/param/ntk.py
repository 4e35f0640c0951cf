"""Neural tangent parametrization (TP IVb Def 2.4.1): multipliers 1/sqrt(fan_in), unit init."""

import dataclasses

from zoo.param.base import Parametrization

NTK_TABLE = {
    "input": (0, 0, 0.5, 0.5),
    "vector": (0, 0, 0.5, 0.5),
    "hidden": (0.5, 0, 1, 1),
    "output": (0.5, 0, 0.5, 0.5),
    "scalar": (0, 0, 0, 0),
}


@dataclasses.dataclass(frozen=True)
class NTK(Parametrization):
    name = "ntk"
    table = NTK_TABLE
