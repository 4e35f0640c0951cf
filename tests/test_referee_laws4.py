"""Referee pass 4 over the laws, the optimizers and the audit, at settings the other tests do not use: each test fails
without the fix it names."""

from __future__ import annotations

import dataclasses

import pytest

import zoo.param as P
from zoo import optim
from zoo.audit import ZooRun, audit
from zoo.optim import OptimConfig

MLP = {"in_shape": (8,), "num_classes": 4}


def _unfreezes_input(cfg, plugin, params, horizon):
    """zoo's chain built as if the plugin froze the output layer only: LR and decay on the input layer."""
    return optim.build(cfg, dataclasses.replace(plugin, freeze="output"), params, horizon)


def test_the_audit_fails_a_frozen_kind_that_moves():
    """depth_mup with freeze=input,output (TP VI's experiments train only the blocks) under AdamW with decay, MLP-ResNet
    at widths 24 and 48, under a chain that ignores the input's freeze: it moves the input layer by lr (update RMS
    0.01) and decays it, and the audit passed it (its laws were the unfrozen ones: update m^0, shrink m^0, both met).
    Now a frozen kind's law is that it does not move: the input layer fails alone, the still readout passes."""
    plugin = P.get("depth_mup", freeze="input,output")
    run = ZooRun("mlp_resnet", plugin, OptimConfig("adamw", lr=1e-2, weight_decay=0.1), MLP, batch_size=8,
                 chain=_unfreezes_input)
    result = audit(run, (24, 48), depth=3)
    assert result.failures() == ["width embed/kernel: frozen: the plugin freezes it, yet it moves (update RMS or decay "
                                 "shrink up to 0.01)"]
    params = result.axes[0].params
    assert [c.passed for c in params["head/kernel"].checks if c.quantity == "frozen"] == [True]
    assert params["stack/blocks/w1/kernel"].passed  # trained: its own laws, no frozen check
    assert all(c.quantity != "frozen" for c in params["stack/blocks/w1/kernel"].checks)


def test_the_audit_measures_the_multipliers_of_a_zero_init_run():
    """muP allows a zero readout (zero_init, TP-V). The audit reads each multiplier's power from Euler's relation at
    the init, 0/0 at a zero readout, and a zero readout zeroes every other parameter's derivative too: mean_field with
    zero_init at widths 24 and 48 read its readout's m^-1 and its hidden matrices' m^-1/2 as m^0 and failed both
    (readout: multiplier and update +0.00 against -1; hidden: multiplier +0.00 against -0.50, effective init -0.03
    against -0.50). The powers are now read where zero weight matrices are drawn at their SP scale; the biases beside
    them keep their zeros (drawn too, the readout's bias read the kernel's multiplier, slope -0.92 against 0)."""
    run = ZooRun("mlp_resnet", P.get("mean_field", zero_init=True), OptimConfig("adam", lr=1e-2),
                 {**MLP, "bias": True}, batch_size=8)
    result = audit(run, (24, 48), depth=2)
    assert result.passed, result.failures()
    params = result.axes[0].params
    paths = ("head/kernel", "stack/blocks/w1/kernel", "head/bias", "stack/blocks/w1/bias")
    assert all(params[p].checks[0].quantity == "multiplier" for p in paths)
    assert [params[p].checks[0].measured for p in paths] == pytest.approx([-1.0, -0.5, 0.0, 0.0], abs=1e-4)
