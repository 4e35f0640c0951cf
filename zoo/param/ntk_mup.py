"""Yaida's one-parameter family between NTK (s = 0) and muP (s = 1) (seed_yaida_and_lecture.md 1.2).

TP IVb calls it UP_u with u = (1 - s)/2 (Rem 2.8.25); in the gauge of its table:
  input, vector (0, 0, u, 1-u);  hidden (0, 1/2, 1+u, 1-u);  output (1-u, 0, u, 1-u).
u = 0 is the muP table exactly; u = 1/2 is NTK up to a gauge shift of 1/2 on hidden weights. Hidden features
move by m^(-u) per step. Yaida grows depth with width as L proportional to n^(1-s) (`yaida_depth`).
Attention logits are q.k / d_head^(1-u): muP's 1/d at s = 1, NTK's 1/sqrt(d) at s = 0 (the family is stated for
MLPs; between its ends the exponent interpolates, which keeps the logits' change Theta(1) in width, as at both ends).
"""

import dataclasses
from typing import Any

from zoo.param.base import Parametrization


@dataclasses.dataclass(frozen=True)
class NTKMuP(Parametrization):
    name = "ntk_mup"
    s: Any = 1.0

    def __post_init__(self):
        if isinstance(self.s, (int, float)) and not 0.0 <= self.s <= 1.0:
            raise ValueError(f"ntk_mup needs s in [0, 1], got {self.s}")

    def abcd(self, tag):
        u = (1.0 - self.s) / 2.0
        return {
            "input": (0, 0, u, 1 - u),
            "vector": (0, 0, u, 1 - u),
            "hidden": (0, 0.5, 1 + u, 1 - u),
            "output": (1 - u, 0, u, 1 - u),
            "scalar": (0, 0, 0, 0),
        }[tag.kind]

    @property
    def attn_exponent(self) -> Any:
        """e of the logits q.k / d_head^e: 1 - u = (1 + s) / 2."""
        return (1.0 + self.s) / 2.0

    def yaida_depth(self, width: int, base_width: int, base_depth: int) -> int:
        """The depth that keeps gamma = L / n^(1-s) fixed: L0 * (n / n0)^(1 - s)."""
        return max(1, round(base_depth * (width / base_width) ** (1.0 - float(self.s))))
