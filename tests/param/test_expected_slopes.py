"""The slopes each plugin predicts for the coordinate check (Parametrization.expected_slopes, zoo.param.predict),
against the rows of seed_tp4b_adam.md section 6 in width and TP VI section 7 in depth."""

from __future__ import annotations

import pytest

import zoo.param as P


@pytest.mark.parametrize("name, opts, optimizer, expected", [
    ("mup", {}, "adam", {"input": 0, "hidden": 0, "stream": 0, "output": 0, "attention": 0}),
    ("mup", {}, "sgd", {"input": 0, "hidden": 0, "output": 0}),
    ("mean_field", {}, "sgd", {"input": 0, "hidden": 0, "output": 0}),
    ("ntk", {}, "adam", {"input": -0.5, "hidden": -0.5, "stream": -0.5, "output": 0}),
    ("ntk", {}, "sgd", {"input": -0.5, "hidden": -0.5, "output": 0}),
    ("ntk_mup", {"s": 0.5}, "adam", {"input": -0.25, "hidden": -0.25, "output": 0}),
    ("sp", {}, "adam", {"input": 0, "hidden": 1, "attention": 1.5}),
    ("sp", {}, "sgd", {"input": -0.5, "hidden": 0.5, "output": 1}),
    ("abcd", {k: "0,0,1,0" for k in ("input", "vector")} | {"hidden": "0,0.5,1,0", "output": "0,0.5,1,0"}, "adam",
     {"input": -1, "hidden": 0, "output": 0.5}),
    ("abcd", {k: "0,0,1.5,0" for k in ("input", "vector")} | {"hidden": "0,0.5,1.5,0", "output": "0,0.5,1.5,0"},
     "adam", {"input": -1.5, "hidden": -0.5, "output": 0}),
    ("abcd", {"attn_exp": 0.5, "input": "0,0,0,1", "vector": "0,0,0,1", "hidden": "0,0.5,1,1", "output": "1,0,0,1"},
     "adam", {"hidden": 0, "output": 0, "attention": 0.5}),
    # a zero readout (V0 = 0): Delta f = Delta V h alone, n^-r_out with r_out = 1/2 here (a random V0 adds n^0)
    ("abcd", {"input": "0,0,0,1", "vector": "0,0,0,1", "hidden": "0,0.5,1,1", "output": "1,0,0.5,1",
              "zero_init": "true"}, "adam", {"hidden": 0, "output": -0.5}),
    ("abcd", {"input": "0,0,0,1", "vector": "0,0,0,1", "hidden": "0,0.5,1,1", "output": "1,0,0.5,1"}, "adam",
     {"hidden": 0, "output": 0}),
    # ntk_mup's logits q.k / d^((1+s)/2): NTK's at s = 0, muP's at s = 1, Theta(1) changes between
    ("ntk_mup", {"s": 0.0}, "adam", {"hidden": -0.5, "attention": 0}),
    ("ntk_mup", {"s": 0.5}, "adam", {"hidden": -0.25, "attention": 0}),
])
def test_expected_slopes_match_tp4b(name, opts, optimizer, expected):
    """Predicted width slopes, Delta h ~ n^-min r and Delta f ~ n^max(-r_out, 1 - a_out - b_out - r), against the
    rows of seed_tp4b_adam.md section 6 (head dim ~ n): muP 0 (attention logits 0 with 1/d, +1/2 with 1/sqrt(d));
    NTK -1/2 and 0; UP_1/4 -1/4; SP + Adam hidden +1, logits +3/2; SP + SGD (-1/2, +1/2, +1); SP with Adam LR 1/n
    everywhere (-1, 0, +1/2: unstable, TP IVb Remark 2.2.7); SP with LR n^-3/2 (-3/2, -1/2, 0). The residual
    stream moves like the hidden pre-activations."""
    slopes = P.get(name, **opts).expected_slopes(optimizer, head_dim_slope=1.0)
    for group, value in expected.items():
        assert slopes[group] == pytest.approx(value), (group, slopes)


MIXER_KINDS = ("input", "vector", "hidden", "scalar")  # the Mixer's token-mixing weights are scalar kind


@pytest.mark.parametrize("name, optimizer, expected", [
    ("ntk", "adam", {"hidden": 0, "output": 0}),
    ("ntk", "sgd", {"hidden": 0, "output": 0}),
    ("mup", "adam", {"hidden": 0, "output": 0}),
    ("mup", "sgd", {"hidden": 0, "output": 0}),
    ("sp", "adam", {"hidden": 1, "output": 1.5}),
])
def test_expected_slopes_with_scalar_parameters(name, optimizer, expected):
    """A scalar-kind weight (no width dim, e.g. Mixer token mixing) changes every coordinate of h by the same map,
    so its Delta h is not aligned with the readout V0: V0 . Delta h is a CLT sum, n^(1/2 - a_out - b_out - r_scalar),
    not n^(1 - a_out - b_out - r); and under SGD its gradient sums coherently only over the readout-aligned part of the
    features (d* = a + a_out + b_out - max(1/2, 1 - r)). NTK's scalar (0, 0, 0, 0) then moves h by Theta(1) with a
    Theta(1) output change, stable: output slope 0 (it used to be +1/2, and SGD's hidden +1/2, so that NTK on the
    Mixer was 'unstable by theory' while its measured output change is flat: -0.04 +- 0.09 under Adam, -0.03 under
    SGD at widths 64..256); muP and SP are unchanged."""
    slopes = P.get(name).expected_slopes(optimizer, kinds=MIXER_KINDS)
    for group, value in expected.items():
        assert slopes[group] == pytest.approx(value), (group, slopes)


@pytest.mark.parametrize("alpha, gamma, total, branch", [
    (0.5, 0.5, 0.0, 0.0),    # Depth-muP: flat
    (1.0, 0.0, 0.0, 0.0),    # the ODE scaling (CompleteP): flat
    (0.5, 0.0, 0.5, 0.5),    # branch multiplier only: sqrt(L), unstable
    (0.5, 1.0, 0.0, -0.5),   # alpha + gamma > 1: the branch part vanishes like L^-1/2, the total is the input's
    (0.0, 0.0, 1.0, 1.0),    # muP alone: L
])
def test_expected_depth_slopes(alpha, gamma, total, branch):
    """TP VI section 7: the branch parameters' change moves the residual stream and the output like
    L^(1 - alpha - gamma); the input and readout layers add Theta(1), so the totals are L^max(0, 1 - alpha - gamma).
    Unstable: alpha < 1/2 (at init) or alpha + gamma < 1 (in training), Claims 7.1-7.2."""
    plugin = P.get("depth_mup", alpha=alpha, gamma=gamma)
    got, got_branch = plugin.expected_slopes(axis="depth"), plugin.expected_slopes(axis="depth", branch_only=True)
    assert got["input"] == 0 and got["stream"] == got["output"] == total
    assert got_branch["stream"] == got_branch["output"] == branch and "input" not in got_branch
    assert got_branch["hidden"] == max(branch, -gamma)
    assert bool(plugin.instabilities("depth")) is (alpha < 0.5 or alpha + gamma < 1)
