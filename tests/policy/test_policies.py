"""Each scaling policy's rules against their formulas, for every optimizer family (entrywise, SGD-like, Muon), and
the contract with the plugin: a policy moves global settings only, every per-parameter rule stays the plugin's."""

from __future__ import annotations

import dataclasses
import json
import math
import sys

import jax
import pytest

import zoo.param
import zoo.policy
from zoo.optim import OptimConfig, rules
from zoo.param.tags import Tag
from zoo.policy import Change, ScalingPolicy

K, RHO = 16, 4  # batch 16 -> 256, steps 100 -> 400
CHANGE = Change(proxy_batch=16, batch=16 * K, proxy_steps=100, steps=100 * RHO)


def proxy(name: str) -> OptimConfig:
    return OptimConfig(name, lr=1e-3, warmup=32, weight_decay=0.1, b1=0.9, b2=0.999)


def mapped(policy: str, name: str, change: Change = CHANGE, **opts) -> tuple[OptimConfig, OptimConfig]:
    cfg = proxy(name)
    return cfg, zoo.policy.get(policy, **opts).apply(cfg, change)[0]


@pytest.mark.parametrize("name", ["adam", "sgd", "muon"])
def test_none_keeps_every_setting(name):
    """`none` is today's transfer: the target's optimizer settings are the proxy's."""
    cfg, out = mapped("none", name)
    assert out == cfg


@pytest.mark.parametrize("name,lr_exp", [("adam", 0.5), ("adamw", 0.5), ("lion", 0.5), ("adafactor", 0.5),
                                         ("sgd", 1.0), ("momentum", 1.0), ("muon", 0.5)])
def test_sde_rules(name, lr_exp):
    """sde (Malladi et al. 2022; the linear rule for SGD): lr kappa^(1/2) (SGD kappa), b2^kappa, eps kappa^(-1/2)
    (Adafactor's eps1 beside g^2: kappa^-1), the decay per example kept (lr' wd' = kappa lr wd), the warmup's
    examples kept (W / kappa); b1, SGD's momentum and Muon's momentum kept by default."""
    cfg, out = mapped("sde", name)
    assert out.lr == pytest.approx(cfg.lr * K**lr_exp, rel=1e-12)
    assert out.lr * out.weight_decay == pytest.approx(K * cfg.lr * cfg.decay, rel=1e-12)
    assert out.warmup == cfg.warmup // K
    assert (out.b1, out.momentum, out.muon_beta) == (cfg.b1, cfg.momentum, cfg.muon_beta)
    if name in ("adam", "adamw", "lion", "muon"):
        assert out.b2 == pytest.approx(cfg.b2**K, rel=1e-12)
        half_life = lambda b, beta: b * math.log(0.5) / math.log(beta)  # noqa: E731 (examples)
        assert half_life(CHANGE.batch, out.b2) == pytest.approx(half_life(CHANGE.proxy_batch, cfg.b2), rel=1e-9)
    eps_exp = {"adafactor": -1.0, "adam": -0.5, "adamw": -0.5, "muon": -0.5}.get(name)
    assert out.eps == (cfg.eps if eps_exp is None else pytest.approx(cfg.eps * K**eps_exp, rel=1e-12))


@pytest.mark.parametrize("peak, steps, want", [("last", 4, 4), ("after", 4, 3), ("after", 40, 6), ("after", 1, 0)])
def test_sde_warmup_peaks_within_the_target_run(peak, steps, want):
    """The warmup W / kappa (3 / 0.5 = 6 here) is cut so that its peak falls within the target's run: on its last
    step under --warmup-peak last (W' <= T), a step after the warmup under after (W' + 1 <= T); the target trained
    W' = T under after, its peak past the run (the LR topped at T / (T + 1)), a config train.py refuses."""
    cfg = dataclasses.replace(proxy("adam"), warmup=3, warmup_peak=peak)
    change = Change(proxy_batch=16, batch=8, proxy_steps=100, steps=steps)
    assert zoo.policy.get("sde").apply(cfg, change)[0].warmup == want


def test_sde_betas_all_maps_every_momentum():
    """betas=all is the rule as Malladi et al. state it: every EMA, b1 and Muon's momentum too, at a fixed
    half-life in examples; betas=none keeps them all."""
    cfg, out = mapped("sde", "muon", betas="all")
    assert (out.b1, out.b2, out.muon_beta) == pytest.approx((cfg.b1**K, cfg.b2**K, cfg.muon_beta**K), rel=1e-12)
    _, kept = mapped("sde", "adam", betas="none")
    assert (kept.b1, kept.b2) == (cfg.b1, cfg.b2)


@pytest.mark.parametrize("name", ["adamw", "sgd", "muon"])
@pytest.mark.parametrize("change", [CHANGE, Change(16, 16, 100, 800), Change(256, 16, 400, 100)])
def test_timescale_keeps_tau(name, change):
    """timescale (Wang & Aitchison 2025): tau = B / (lr wd D) with D the budget B T is the proxy's at the target,
    whatever the family's LR rule; at a fixed batch wd falls as 1/T."""
    cfg, out = mapped("timescale", name, change)
    tau = change.proxy_batch / (cfg.lr * cfg.decay * change.proxy_batch * change.proxy_steps)
    assert change.batch / (out.lr * out.weight_decay * change.batch * change.steps) == pytest.approx(tau, rel=1e-12)
    if change.kappa == 1:
        assert out.weight_decay == pytest.approx(cfg.decay / change.rho, rel=1e-12)


def test_timescale_over_a_fixed_set_is_sde():
    """With D the training set (one set, proxy and target), the timescale in epochs is the one in examples: sde's.
    A change without the sets' sizes (zoo.sweep's, zoo.fit's, zoo.audit's: one --data) is one set: it was refused,
    so data=dataset failed from every command line but zoo.transfer's."""
    change = dataclasses.replace(CHANGE, proxy_data=50_000, data=50_000)
    for name in ("adamw", "sgd", "muon"):
        assert mapped("timescale", name, change, data="dataset")[1] == mapped("sde", name, change)[1]
        assert mapped("timescale", name, data="dataset")[1] == mapped("sde", name)[1]
    half = dataclasses.replace(CHANGE, proxy_data=50_000, data=25_000)
    assert mapped("timescale", "adamw", half, data="dataset")[1].weight_decay == \
        pytest.approx(2 * mapped("sde", "adamw", half)[1].weight_decay, rel=1e-12)


def test_rules_name_each_setting_read():
    """Every setting the optimizer reads gets a rule naming its policy; those it does not read get none."""
    found = {r.setting: r for r in zoo.policy.get("sde").rules(proxy("sgd"), CHANGE)}
    assert set(found) == {"lr", "weight_decay", "warmup"}
    assert all(r.policy == "sde" for r in found.values()) and "(B/B0)^1" in found["lr"].law


@pytest.mark.parametrize("policy,option,optimizer", [("sde", "betas", "sgd"), ("sde", "eps", "lion"),
                                                     ("timescale", "betas", "momentum"), ("sde", "eps", "sgd")])
def test_an_option_the_optimizer_does_not_read_is_refused(policy, option, optimizer):
    with pytest.raises(ValueError, match=f"option {option} is read only by --optimizer .*{optimizer} does not"):
        zoo.policy.get(policy).check(optimizer, {option})


def test_a_mapped_value_float32_cannot_hold_names_the_policy():
    """sde from batch 1e7 to 1: b2^(B/B0) rounds to 1.0 in float32; the error blamed --b2, which was never given."""
    with pytest.raises(ValueError, match=r"policy sde maps b2 0.999 -> 0.99999999\d+ \(b2\^\(B/B0\).* from batch "
                                         r"10000000, 10 steps to batch 1, 10 steps, and the result is refused"):
        zoo.policy.get("sde").apply(proxy("adam"), zoo.policy.Change(10**7, 1, 10, 10))


def test_unknown_policies_and_options():
    with pytest.raises(ValueError, match="unknown scaling policy 'nope'"):
        zoo.policy.get("nope")
    with pytest.raises(ValueError, match="has no option 'bogus'"):
        zoo.policy.get("sde", bogus=1)
    with pytest.raises(ValueError, match="betas must be one of"):
        zoo.policy.get("sde", betas="some")
    with pytest.raises(ValueError, match="needs law=PATH"):
        zoo.policy.get("fitted")


@dataclasses.dataclass(frozen=True)
class Doubling(ScalingPolicy):
    """An outside policy: the LR doubles per doubling of the batch."""

    name = "doubling"

    def rule(self, setting, cfg, change, mapped):
        return (cfg.lr * change.kappa, "lr B/B0") if setting == "lr" else (None, "kept")


def test_an_outside_policy_loads_by_path_and_registers():
    """As plugins do: module:Object from a user's file, or register()."""
    policy = zoo.policy.get(f"{__name__}:Doubling")
    assert policy.apply(proxy("adam"), CHANGE)[0].lr == pytest.approx(1e-3 * K)
    zoo.policy.register(Doubling)
    assert "doubling" in zoo.policy.names() and isinstance(zoo.policy.get("doubling"), Doubling)


def write_law(path, exponents, policy=None, optimizer="adam", hyper="lr"):
    law = {"kind": "zoo.fit law", "model": "mlp_resnet", "param": "mup", "optimizer": optimizer, "data": "synthetic",
           "metric": "train_loss", "policy": policy or {"name": "none", "options": {}},
           "laws": {hyper: {"intercept_log2": -8.0, "reference": {a: 1.0 for a in exponents}, "exponents": exponents,
                            "intervals": {a: [e - 0.1, e + 0.1] for a, e in exponents.items()}}}}
    path.write_text(json.dumps(law))
    return str(path)


def test_fitted_maps_by_the_law_ratio(tmp_path):
    """fitted: lr' = base(lr) prod (s'/s)^e over the law's axes (the ratio, anchored at the proxy's tuned LR), every
    other setting as the base policy the sweeps were read under maps it."""
    law = write_law(tmp_path / "law.json", {"batch_size": 0.3, "steps": -0.25})
    cfg, out = mapped("fitted", "adam", law=law)
    assert out.lr == pytest.approx(cfg.lr * K**0.3 * RHO**-0.25, rel=1e-12)
    assert dataclasses.replace(out, lr=cfg.lr) == cfg
    on_sde = write_law(tmp_path / "sde.json", {"steps": -0.5}, {"name": "sde", "options": {}})
    cfg, out = mapped("fitted", "adam", law=on_sde)
    assert out.lr == pytest.approx(cfg.lr * K**0.5 * RHO**-0.5, rel=1e-12)
    assert out.b2 == pytest.approx(cfg.b2**K, rel=1e-12)
    wd_law = write_law(tmp_path / "wd.json", {"steps": -1.0}, optimizer="adamw", hyper="weight_decay")
    cfg, out = mapped("fitted", "adamw", law=wd_law)
    assert (out.lr, out.weight_decay) == (cfg.lr, pytest.approx(cfg.decay / RHO, rel=1e-12))
    with pytest.raises(ValueError, match="the fitted law is of optimizer adamw, this run's is adam"):
        mapped("fitted", "adam", law=wd_law)
    bad_base = write_law(tmp_path / "bad.json", {"steps": -0.5}, {"name": "none", "options": {"foo": 1}})
    with pytest.raises(ValueError, match=f"^{bad_base}: the policy its sweeps were read under: policy 'none' has no "
                       "option 'foo'"):  # it named no file, as if --policy-opt had been given
        mapped("fitted", "adam", law=bad_base)


@pytest.mark.parametrize("base", ["sde", "timescale"])
def test_fitted_decays_as_its_base_whatever_its_lr_law(tmp_path, base):
    """A law of the LR alone over a base whose decay rule reads the LR (wd' = wd (B/B0) lr / lr' under sde): the
    sweeps ran at the base's (lr, wd) map, so the target's wd is the base's, not divided again by the law's LR factor
    (0.3 x 9^-0.3 where sde gives 0.3); a wd law multiplies that."""
    on_base = write_law(tmp_path / "lr.json", {"batch_size": 0.3}, {"name": base, "options": {}}, optimizer="adamw")
    alone = zoo.policy.get(base).apply(proxy("adamw"), CHANGE)[0]
    cfg, out = mapped("fitted", "adamw", law=on_base)
    assert out.weight_decay == pytest.approx(alone.weight_decay, rel=1e-12)
    assert out.lr == pytest.approx(alone.lr * K**0.3, rel=1e-12)
    both = write_law(tmp_path / "both.json", {"batch_size": -0.5}, {"name": base, "options": {}}, optimizer="adamw",
                     hyper="weight_decay")
    assert mapped("fitted", "adamw", law=both)[1].weight_decay == pytest.approx(alone.weight_decay * K**-0.5,
                                                                               rel=1e-12)


def test_a_policy_moves_no_per_parameter_rule():
    """The contract (zoo/policy/base.py): the chain's per-parameter trees (gradient pre-scale, LR multiplier, decay
    multiplier) under muP at width 4x the base are the same for the proxy's settings and the policy's, so each
    width factor is applied once, by the plugin, and the batch factor once, by the policy on the global LR."""
    tags = {"w": Tag(kind="hidden", fan_in=256, fan_out=256, width_mult=4.0),
            "e": Tag(kind="input", fan_in=16, fan_out=256, width_mult=4.0),
            "o": Tag(kind="output", fan_in=256, fan_out=10, width_mult=4.0)}
    mup = zoo.param.get("mup")
    for name in ("adamw", "sgd", "muon"):
        cfg, out = mapped("timescale", name)
        before, after = rules(mup, tags, cfg), rules(mup, tags, out)
        assert jax.tree.leaves(before) == jax.tree.leaves(after)
        assert before.wd_mult["w"] == 1.0  # the decay is lr wd per step, not times the LR multiplier m^-1


@pytest.mark.parametrize("edit", [
    {"policy": {"name": 5, "options": {}}}, {"policy": {"name": "sde", "options": [1]}}, {"policy": "sde"},
    {"laws": {}}, {"laws": {"lr": {"intercept_log2": float("inf"), "reference": {"width": 1.0},
                                   "exponents": {"width": -1.0}, "intervals": {"width": [-1.1, -0.9]}}}},
    {"laws": {"lr": {"intercept_log2": True, "reference": {"width": 1.0}, "exponents": {"width": -1.0},
                     "intervals": {"width": [-1.1, -0.9]}}}},
    {"laws": {"lr": {"intercept_log2": -8.0, "reference": {"width": 1.0}, "exponents": {"width": False},
                     "intervals": {"width": [-1.1, -0.9]}}}},
])
def test_a_law_file_of_wrong_types_is_refused(tmp_path, edit):
    """A law.json whose policy is not a name and options, with no law, or with a number that is infinite or a
    bool (which float() takes as 1): one line, as other damaged laws (they failed in the policy's code, or ran)."""
    path = tmp_path / "law.json"
    write_law(path, {"width": -1.0})
    path.write_text(json.dumps({**json.loads(path.read_text()), **edit}))
    with pytest.raises(ValueError, match="is not a zoo.fit law"):
        zoo.policy.get("fitted", law=str(path))


def test_a_law_file_naming_code_imports_nothing(tmp_path):
    """The base policy a law.json names is read from a file: a module:Class there was imported (running its code)
    where a config file or run dir naming one is refused; now one line saying which flag allows it."""
    from zoo.registry import ALLOWED

    path = write_law(tmp_path / "law.json", {"width": -1.0}, {"name": "zoo_never_imported:Policy", "options": {}})
    with pytest.raises(ValueError, match="never makes zoo import code: if you trust it, give --allow-import "
                                         "zoo_never_imported:Policy"):
        zoo.policy.get("fitted", law=path)
    assert "zoo_never_imported" not in sys.modules and "zoo_never_imported:Policy" not in ALLOWED
