"""Depth-muP (TP VI): muP in width, branch multiplier a/sqrt(L/L0), Adam LR of branch params * sqrt(L0/L).

alpha = gamma = 1/2 is the unique stable, faithful, feature-learning point with maximal feature diversity
(TP VI Claim 7.5). The options alpha and gamma give the whole (alpha, gamma) family of TP VI section 7.
"""

import dataclasses
from typing import Any

from zoo.param.mup import MuP


@dataclasses.dataclass(frozen=True)
class DepthMuP(MuP):
    name = "depth_mup"
    alpha: Any = 0.5
    gamma: Any = 0.5
