"""Coordinate checks on the MLP-ResNet (seed_tp4b_adam.md section 6): log-log slope against width of the RMS
change of every activation (embed, each block's pre-activation and output) and of the logits after t = 1..3
steps, geometric mean over 3 seeds, between widths 256 and 2048 (a factor 8; from 128 on, the finite-width
transient still tilts the slopes by -0.05 to -0.1). Depth 2, relu, mean subtraction, batch 8 of inputs of RMS 0.1
(so the logits start small and CE's dL/df is nearly width-independent at t = 0, as with the note's MSE). Plugins
of one optimizer share a compiled program per width."""

from __future__ import annotations

import numpy as np
import pytest
from param_helpers import batch

import zoo.param as P
from zoo.diagnostics.coord import coord_data, slopes
from zoo.optim import OptimConfig

WIDTHS = [256, 2048]
MODEL = {"depth": 2, "base_width": 256, "in_shape": (8,), "num_classes": 4}


def measure(plugin, optim: str, lr: float) -> tuple[np.ndarray, np.ndarray]:
    """Slopes [hidden layer, step] and [step] of the output."""
    data = coord_data("mlp_resnet", plugin, WIDTHS, 3, 3, OptimConfig(name=optim, lr=lr), batch(scale=0.1), **MODEL)
    s = slopes(WIDTHS, data)
    assert {"embed", "pre/0", "pre/1", "blocks/0", "blocks/1", "output"} <= set(s)
    return np.stack([v for k, v in s.items() if k != "output"]), s["output"]


@pytest.mark.slow
@pytest.mark.parametrize("name,opts,optim,lr,hidden,tol", [
    ("mup", {}, "adam", 1e-3, 0.0, 0.1),
    ("ntk", {}, "adam", 1e-3, -0.5, 0.1),
    ("ntk_mup", {"s": 0.5}, "adam", 1e-3, -0.25, 0.1),
    ("mup", {}, "sgd", 1.0, 0.0, 0.15),
    ("ntk", {}, "sgd", 1.0, -0.5, 0.15),
])
def test_activation_change_slopes(name, opts, optim, lr, hidden, tol):
    """TP IVb Thm 2.8.19 and section 3's sizes: hidden activations move by n^-r and the output by n^0, with r = 0
    for muP (feature learning), 1/2 for NTK (operator regime) and u = (1 - s)/2 for ntk_mup (UP_u), for Adam and
    SGD alike; tolerance 0.1 (Adam) and 0.15 (SGD) as the note recommends."""
    got_hidden, got_output = measure(P.get(name, **opts), optim, lr)
    np.testing.assert_allclose(got_hidden, hidden, atol=tol)
    np.testing.assert_allclose(got_output, 0.0, atol=tol)


@pytest.mark.slow
def test_sp_with_constant_lr_blows_up():
    """seed_tp4b_adam.md 6 (SP, Adam, constant LR): hidden weights move by Theta(lr) per entry, so W x changes by
    Theta(n); some hidden activation's slope is >= 0.7 at every step, and the output's too."""
    got_hidden, got_output = measure(P.get("sp"), "adam", 1e-3)
    assert np.all(got_hidden.max(0) >= 0.7), got_hidden
    assert np.all(got_output >= 0.7), got_output
