"""CompleteP (Dey et al. 2025): muP in width with alpha = 1, gamma = 0.

Branch multiplier a * (L0/L)^alpha; branch parameters' Adam LR * (L/L0)^(alpha - 1), i.e. gamma = 1 - alpha (the
paper's family, alpha in [1/2, 1]: alpha = 1 keeps the LR, alpha = 1/2 is Depth-muP's (L0/L)^(1/2)), while Adam's
epsilon shrinks like (L0/L)^alpha with the branch gradients. A gamma given explicitly is kept.
"""

import dataclasses
from typing import Any

from zoo.param.mup import MuP


@dataclasses.dataclass(frozen=True)
class CompleteP(MuP):
    name = "completep"
    alpha: Any = 1.0
    gamma: Any = None  # None: 1 - alpha

    def __post_init__(self):
        super().__post_init__()
        self.read_numbers("gamma")
        if self.gamma is None:
            object.__setattr__(self, "gamma", 1.0 - self.alpha)
