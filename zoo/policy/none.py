"""Today's transfer: every global setting of the proxy kept at the target, whatever its batch and horizon (the
plugin alone scales, in width and depth)."""

import dataclasses

from zoo.policy.base import ScalingPolicy


@dataclasses.dataclass(frozen=True)
class NoPolicy(ScalingPolicy):
    name = "none"
