"""CompleteP (Dey et al. 2025): muP in width with alpha = 1, gamma = 0.

Branch multiplier a * L0/L; branch parameters keep their Adam LR (gamma = 1 - alpha = 0) while Adam's
epsilon shrinks like (L0/L)^alpha with the branch gradients.
"""

import dataclasses
from typing import Any

from zoo.param.mup import MuP


@dataclasses.dataclass(frozen=True)
class CompleteP(MuP):
    name = "completep"
    alpha: Any = 1.0
    gamma: Any = 0.0
