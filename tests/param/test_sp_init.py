"""The SP init std at the base shape (zoo.param.sp_init), from which every plugin scales: LeCun's by default, a
model's own (GPT-2's 0.02), and GPT-2's 1/sqrt(N) on the matrices that end the N residual branches, N counted at the
base depth so that a depth plugin's branch multiplier is the only depth scaling."""

import math

import pytest

import zoo.param
from zoo.param.sp_init import sp_std
from zoo.param.tags import Tag


def test_lecun_by_default_and_a_models_std_where_given():
    hidden = Tag("hidden", 256, 256, width_mult=2.0, branch=True, depth=8, base_depth=4, role="query")
    assert sp_std(hidden) == pytest.approx(128 ** -0.5)  # 1/sqrt(fan_in) at the base width
    assert sp_std(Tag("input", 65, 256, width_mult=2.0)) == pytest.approx(65 ** -0.5)  # input fan-in does not grow
    assert sp_std(hidden, 0.02) == sp_std(hidden, 0.02, branches=2) == 0.02  # not a branch's last matrix


@pytest.mark.parametrize("role", ["attn_out", "mlp_out"])
def test_a_branchs_last_matrix_at_one_over_sqrt_of_the_base_branches(role):
    """nanoGPT: 0.02 / sqrt(2 L) on every c_proj; at depth 8 from base depth 4 it stays at the base's 2 * 4."""
    end = Tag("hidden", 1024, 256, width_mult=2.0, branch=True, depth=8, base_depth=4, role=role)
    assert sp_std(end, 0.02, branches=2) == pytest.approx(0.02 / math.sqrt(8))
    assert sp_std(end, 0.02) == 0.02  # no branches counted: no scaling
    outside = Tag("hidden", 1024, 256, width_mult=2.0, role=role)  # not inside a residual branch
    assert sp_std(outside, 0.02, branches=2) == 0.02
    # the plugins scale from it: SP's std m^-1/2 at twice the base width, depth_mup's the same (its depth law is the
    # branch multiplier), and at the base shape every plugin equals SP
    base = Tag("hidden", 512, 128, branch=True, depth=4, base_depth=4, role=role)
    std0 = sp_std(end, 0.02, branches=2)
    for name in ("sp", "depth_mup"):
        assert zoo.param.get(name).init_std(end, std0) == pytest.approx(std0 / math.sqrt(2))
    assert {zoo.param.get(n).init_std(base, std0) for n in ("sp", "mup", "ntk", "depth_mup", "completep")} == {std0}
