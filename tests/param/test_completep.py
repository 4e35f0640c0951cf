"""CompleteP (Dey et al. 2025): branch multiplier L^-alpha with branch LR L^(alpha - 1), so gamma = 1 - alpha unless
a gamma is given."""

from __future__ import annotations

import pytest

import zoo.param as P
from zoo.param.tags import Tag


@pytest.mark.parametrize("alpha", [0.5, 0.75])
def test_completep_takes_gamma_1_minus_alpha(alpha):
    """CompleteP's family (Dey et al. 2025): branch multiplier L^-alpha, branch LR L^(alpha - 1). completep with
    alpha=0.5 kept gamma = 0 (alpha + gamma = 0.5: updates growing like L^0.5, unstable by TP VI) where the paper's
    rule, and depth_mup, give gamma = 1/2."""
    plugin = P.get("completep", alpha=str(alpha))
    tag = Tag("hidden", 96, 96, width_mult=1.5, branch=True, depth=7, base_depth=3)
    assert plugin.gamma == pytest.approx(1 - alpha)
    assert plugin.lr_mult(tag) == pytest.approx(1.5**-1 * (7 / 3) ** (alpha - 1))
    assert plugin.grad_scale(tag) == pytest.approx(1.5 * (7 / 3) ** alpha)  # eps * m^-1 (L/L0)^-alpha
    assert plugin.instabilities("depth") == []
    assert P.get("completep", alpha=0.5).lr_mult(tag, "spectral") == P.get("depth_mup").lr_mult(tag, "spectral")


def test_completep_keeps_a_gamma_given():
    """An explicit gamma is the user's: completep alpha=1 gamma=0.25 (a TP VI family point) keeps it."""
    assert P.get("completep", gamma="0.25").gamma == 0.25
    assert P.get("completep").gamma == 0.0
