"""muP in the mean-field gauge: hidden (1/2, 0, 1/2, 3/2), readout multiplier 1/n (seed_tp4b_adam.md 2)."""

import dataclasses

from zoo.param.mup import MuP


@dataclasses.dataclass(frozen=True)
class MeanField(MuP):
    name = "mean_field"
    gauge: str = "mean_field"
