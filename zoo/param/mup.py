"""Maximal-update parametrization (TP IVb Def 2.5.1), in any of its equivalent gauges.

A gauge shift theta on one kind maps (a, b, c, d) -> (a+theta, b-theta, c-theta, d+theta) (TP IVb Prop 2.2.3):
training is identical, with Adam's epsilon moving along through d.
  ivb:        the TP IVb table (input (0,0,0,1), hidden (0,1/2,1,1), output (1,0,0,1)).
  table3:     TP-V "Table 3": theta = -1 on the output (std 1/n, Adam LR 1/n, no readout multiplier).
  mean_field: theta = +1/2 on hidden weights (NTK-style hidden layers, SGD LR proportional to n).
"""

import dataclasses

from zoo.param.base import MUP_TABLE, Parametrization

GAUGES = {"ivb": {}, "table3": {"output": -1.0}, "mean_field": {"hidden": 0.5}}


def shift(abcd, theta):
    """The gauge symmetry (a, b, c, d) -> (a+theta, b-theta, c-theta, d+theta)."""
    a, b, c, d = abcd
    return (a + theta, b - theta, c - theta, d + theta)


@dataclasses.dataclass(frozen=True)
class MuP(Parametrization):
    name = "mup"
    table = MUP_TABLE
    attn_exponent = 1.0

    gauge: str = "ivb"

    def __post_init__(self):
        if self.gauge not in GAUGES:
            raise ValueError(f"unknown gauge {self.gauge!r}; gauges are {', '.join(GAUGES)}")

    def abcd(self, tag):
        return shift(self.table[tag.kind], GAUGES[self.gauge].get(tag.kind, 0.0))
