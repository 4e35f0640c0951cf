"""Referee checks of the four models under the parametrization plugins: rules at settings the other tests do not use."""

from __future__ import annotations

import pytest

import zoo.param as P
from zoo.optim import OptimConfig


@pytest.mark.long
def test_audit_sgd_step_size_is_exact_under_weight_decay():
    """SGD's step per unit of gradient is lr m^(d-c) exactly: the probe read it as (chain(TINY g) - decay) / TINY,
    where the decay lr wd w dwarfs the tiny step and float32 kept mostly rounding. A GPT under muP with SGD and the
    recipe's wd 0.1 measured step-size slopes +0.23..+0.31 for q, k and fc1 at widths 64..256 (theory 0); here, wd 10
    at widths 16 and 64, q's step read 0.0125 and 0.0215 (slope +0.39, theory 0). The tiny step is now taken at w = 0,
    where the chain adds no decay."""
    from zoo.audit import ZooRun, audit

    model = dict(depth=1, head_dim=16, seq_len=8, vocab_size=32, dropout=0.0)
    run = ZooRun("gpt", P.get("mup"), OptimConfig("sgd", lr=1e-3, weight_decay=10.0), model, batch_size=2)
    params = audit(run, (16, 64)).axes[0].params
    for name in ("stack/blocks/attn/q/kernel", "stack/blocks/attn/k/kernel", "stack/blocks/mlp/fc1/kernel"):
        check = next(c for c in params[name].checks if c.quantity == "step_size")
        assert check.passed and abs(check.measured) < 0.02, (name, check)
