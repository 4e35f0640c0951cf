"""Standard parametrization: fan-in init, one global learning rate under every optimizer (Muon included: what users
call "SP with Muon", not the Adam-matched spectral map), no multipliers (TP IVb Ex. 2.2.2)."""

import dataclasses

from zoo.param.base import SP_TABLE, Parametrization


@dataclasses.dataclass(frozen=True)
class SP(Parametrization):
    name = "sp"
    table = SP_TABLE
    global_lr = True
