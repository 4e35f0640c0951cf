"""zoo.audit of a scaling policy composed with muP: at a new width and batch size each factor is applied once (the
plugin's across width at the target's batch, the policy's across batch at the new width), and a chain that does not
realise a setting the policy maps is caught."""

from __future__ import annotations

import dataclasses

import pytest

import zoo.param
import zoo.policy
from zoo import optim
from zoo.audit import ZooRun, audit
from zoo.audit.policy import audit_policy, policy_axis
from zoo.optim import OptimConfig

RUN = ZooRun("mlp_resnet", zoo.param.get("mup"), OptimConfig("adamw", lr=1e-2, weight_decay=0.1, warmup=4),
             model_opt={"in_shape": (8,)}, batch_size=4, horizon=8)


def slopes(axis, quantity):
    return {path: next(c for c in p.checks if c.quantity == quantity).measured for path, p in axis.params.items()
            if any(c.quantity == quantity for c in p.checks)}


@pytest.mark.long
def test_timescale_composed_with_mup_applies_each_factor_once():
    """muP at widths 8 -> 16 under timescale at batch 4 -> 16 and horizon 8: the width table (at batch 16 under the
    mapped settings) has the plugin's slopes (hidden LR m^-1, decay shrink m^0); the batch table (at width 16) the
    policy's: the first step's LR lr' s(0) has slope +1/2 (the sqrt rule) + 1 (the warmup's examples kept: 4 steps
    -> 1, its first factor 1/4 -> 1), eps -1/2, b2's half-life in examples 0, the EMA timescale over the budget 0;
    every check passes."""
    policy = zoo.policy.get("timescale")
    change = zoo.policy.Change(4, 16, 8, 8)
    target = dataclasses.replace(RUN, optim=policy.apply(RUN.optim, change)[0], batch_size=16)
    result = audit(target, widths=[8, 16], depth=1)
    (axis,) = audit_policy(RUN, policy, [4, 16], [], (None, None), 16, 1, 8)
    result.axes.append(axis)
    assert result.passed, result.failures()
    width = result.axes[0]
    assert slopes(width, "update_rms")["stack/blocks/w1/kernel"] == pytest.approx(-1.0, abs=0.02)
    assert slopes(width, "wd_shrink")["stack/blocks/w1/kernel"] == pytest.approx(0.0, abs=0.02)
    for quantity, want in (("lr", 1.5), ("eps_scale", -0.5), ("b2_half_life", 0.0), ("timescale", 0.0)):
        for path, s in slopes(axis, quantity).items():
            assert s == pytest.approx(want, abs=0.05), (quantity, path, s)


def test_a_chain_that_does_not_realise_b2_fails():
    """A chain that builds Adam with b2 0.999 whatever the config says (a policy's b2 lost on the way) keeps b2's
    half-life in steps, not in examples: the audit's b2 half-life slope is +1, not the policy's 0."""
    def stale_b2(cfg, plugin, params, horizon):
        return optim.build(dataclasses.replace(cfg, b2=0.999), plugin, params, horizon)

    run = dataclasses.replace(RUN, chain=stale_b2)
    axis = policy_axis(run, zoo.policy.get("sde"), "batch_size", [4, 16], (4, 8), 8, 1, 8, 1, 0.1, 0)
    assert not axis.passed
    assert all(s == pytest.approx(1.0, abs=0.02) for s in slopes(axis, "b2_half_life").values())


@pytest.mark.parametrize("argv, message", [
    (["--batch-sizes", "16,256"], "--batch-sizes and --horizons audit a scaling policy: give --policy"),
    (["--policy", "sde"], "--policy sde is audited at two or more --batch-sizes or --horizons: give them"),
    (["--policy", "sde", "--horizons", "100"], "an audit needs at least two different positive --horizons"),
])
def test_policy_flags_that_do_not_go_together(argv, message, tmp_path, capsys):
    from zoo.cli.audit import main

    with pytest.raises(SystemExit) as e:
        main([*argv, "--json", str(tmp_path / "a.json")])
    assert e.value.code == 2 and message in capsys.readouterr().err and not (tmp_path / "a.json").exists()
