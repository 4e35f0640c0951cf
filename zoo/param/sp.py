"""Standard parametrization: fan-in init, one global learning rate, no multipliers (TP IVb Ex. 2.2.2)."""

import dataclasses

from zoo.param.base import SP_TABLE, Parametrization


@dataclasses.dataclass(frozen=True)
class SP(Parametrization):
    name = "sp"
    table = SP_TABLE
