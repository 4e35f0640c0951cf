"""The SP init std at the base width and depth, std0, from which every plugin scales: Parametrization.init_std gives
init_mult * std0 * m^-b, so at the base shape every plugin starts where SP does.

    std0 = s                  s given (GPT-2's and nanoGPT's 0.02), else LeCun's 1/sqrt(fan_in0)
    std0 = s / sqrt(k L0)     on the matrix that ends a residual branch (attention's output projection, the MLP's
                              second layer) of a model with k branches per block: GPT-2's scaling "by 1/sqrt(N) where
                              N is the number of residual layers" (Radford et al. 2019, section 2.3; nanoGPT's
                              0.02 / sqrt(2 L) on every c_proj)

L0 is the base depth, not the depth: the depth plugins scale the branches from there (depth_mup's branch multiplier
(L / L0)^-1/2), so the init does not scale with depth a second time, and at L = L0 it is GPT-2's.
"""

from __future__ import annotations

import math

from zoo.param.tags import Tag

BRANCH_OUTPUTS = ("attn_out", "mlp_out")  # the roles of the matrices that end a residual branch


def sp_std(tag: Tag, std: float | None = None, branches: int = 0) -> float:
    """std0 of a weight: `std` (None: 1/sqrt(fan_in at the base width)), divided by sqrt(branches * L0) where the
    weight ends a residual branch and `branches` (per block) is given."""
    base = tag.base_fan_in ** -0.5 if std is None else std
    if branches and tag.branch and tag.role in BRANCH_OUTPUTS:
        return base / math.sqrt(branches * tag.base_depth)
    return base
