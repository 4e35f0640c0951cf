"""The audit under zero_init: the zero readout stops every other parameter's first gradient, so their update rules
(Adam's LR, SGD's step, epsilon) were 'null direction', reported and never judged, and a plugin that applied the
hidden LR wrong passed. Their step is now measured again with the zero matrices drawn (zoo.audit.probe.REDRAWN)."""

from __future__ import annotations

import dataclasses

import pytest

import zoo.param as P
from zoo.audit import ZooRun, audit
from zoo.optim import OptimConfig
from zoo.param.mup import MuP

MODEL = {"in_shape": (8,), "num_classes": 4, "pre_ln": True, "bias": True}


@dataclasses.dataclass(frozen=True)
class SlowHidden(MuP):
    """States muP's table; applies an extra 1/m to the hidden matrices' LR."""

    name = "slow_hidden_zero_init_test"

    def lr_mult(self, tag, family="adam"):
        return super().lr_mult(tag, family) / (tag.width_mult if tag.kind == "hidden" else 1.0)


def run(plugin, optimizer: str) -> ZooRun:
    return ZooRun("mlp_resnet", plugin, OptimConfig(optimizer, lr=1e-2, weight_decay=0.1), MODEL, batch_size=8)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_a_zero_init_run_has_its_update_rules_judged(optimizer):
    right = audit(run(P.get("mup", zero_init=True), optimizer), (32, 64))
    assert right.passed, right.failures()
    hidden = right.axes[0].params["stack/blocks/w1/kernel"]
    rule = "update_rms" if optimizer == "adam" else "step_size"
    assert [c.passed for c in hidden.checks if c.quantity == rule] == [True]
    wrong = audit(run(SlowHidden(zero_init=True), optimizer), (32, 64))
    failed = {path: {c.quantity for c in p.checks if c.passed is False}
              for a in wrong.axes for path, p in a.params.items() if not p.passed}
    assert failed.get("stack/blocks/w1/kernel", set()) >= {rule}, failed
