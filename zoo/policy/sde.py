"""The SDE rules for a change of batch size, kappa = B / B0: keep the optimizer's stochastic differential equation,
whose time counts examples (Malladi et al. 2022, arXiv 2205.10287, for Adam and RMSprop; Li, Tai & E 2017 and Goyal
et al. 2017 for SGD).

    lr            adam family  lr kappa^(1/2)     the square-root rule: a normalised update's noise falls as B^-1/2
                  sgd family   lr kappa           the linear rule
                  muon         lr kappa^(1/2)     see below
    b2            b2^kappa                        half-life in examples kept (`betas` b2, the default; `betas` all
                                                  also maps b1 and muon_beta, the momenta, as the rule has it; none)
    momentum      kept                            the linear rule keeps SGD's momentum (Goyal et al.)
    eps           eps kappa^(-1/2)                beside sqrt(v), the gradient's RMS, which falls as B^-1/2 where noise
                                                  dominates (adam, adamw, muon; `eps`); adafactor's eps1 sits beside
                                                  g^2: eps kappa^-1
    weight_decay  wd kappa lr / lr'               the decay per example kept: the EMA timescale in examples
                                                  B / (lr wd) is fixed (zoo.policy.timescale with D fixed)
    warmup        W / kappa                       its examples kept

Muon: its matrices' update is the orthogonalised momentum, whose scale does not follow the gradient's, as Adam's
does not; its noise falls as B^-1/2 like Adam's, so the square-root rule, and zoo's Muon shares one LR with its Adam
part (Moonlight's RMS matching, zoo.optim), which one factor keeps matched. The field has no study of it
(field_scan_2026-11.md section 2.5: nanochat applies sqrt(B) to Muon calling it an assumption; marin's fitted MuonH
law is proportional to sqrt(B), R^2 0.996, section 1); zoo.policy.fitted replaces it by a measured exponent.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.optim import OptimConfig
from zoo.policy.base import Change, ScalingPolicy, examples_warmup, family, fmt, half_life_beta, power

BETAS = ("adam", "adamw", "lion", "muon")  # the optimizers with b1, b2 or muon_beta
EPS = ("adam", "adamw", "muon", "adafactor")
BETA_CHOICES = {"b2": ("b2",), "all": ("b1", "b2", "muon_beta"), "none": ()}


@dataclasses.dataclass(frozen=True)
class SDE(ScalingPolicy):
    name = "sde"
    options_read = {"betas": BETAS, "eps": EPS}

    betas: str = "b2"  # the EMAs kept at a fixed half-life in examples: b2, all (b1, b2, muon_beta) or none
    eps: bool = True  # epsilon with the gradient's RMS

    def __post_init__(self) -> None:
        if self.betas not in BETA_CHOICES:
            raise ValueError(f"policy {self.name}: betas must be one of {', '.join(BETA_CHOICES)}, got {self.betas!r}")

    def examples_ratio(self, change: Change) -> tuple[float, str]:
        """D / D0, the examples the decay's timescale counts, and D's name: 1 here (the timescale in examples)."""
        del change
        return 1.0, "examples"

    def rule(self, setting: str, cfg: OptimConfig, change: Change, mapped: dict[str, Any]) -> tuple[Any, str]:
        k = change.kappa
        if setting == "lr":
            e = 1.0 if family(cfg.name) == "sgd" else 0.5
            return cfg.lr * k**e, f"lr (B/B0)^{e:g} = {fmt(cfg.lr)} {power(k, e)}"
        if setting in BETA_CHOICES[self.betas]:
            beta = getattr(cfg, setting)
            return half_life_beta(beta, k), f"{setting}^(B/B0) = {fmt(beta)}^{fmt(k)}: half-life in examples kept"
        if setting == "eps" and self.eps:
            e = -1.0 if cfg.name == "adafactor" else -0.5
            return cfg.eps * k**e, f"eps (B/B0)^{e:g} = {fmt(cfg.eps)} {power(k, e)}"
        if setting == "weight_decay":
            return self.decay(cfg, change, mapped["lr"])
        if setting == "warmup":
            return examples_warmup(cfg, k, change.steps), f"warmup B0/B = {cfg.warmup} / {fmt(k)}: its " \
                "examples kept"
        return None, "kept"

    def decay(self, cfg: OptimConfig, change: Change, lr: float) -> tuple[float, str]:
        """wd' = wd (B/B0) (lr/lr') (D0/D): the EMA timescale tau = B / (lr wd D) kept (zoo.policy.base)."""
        wd = cfg.decay
        ratio, unit = self.examples_ratio(change)
        if wd == 0:
            return 0.0, "no decay (timescale infinite): kept"
        target = wd * change.kappa * (cfg.lr / lr) / ratio
        tau = change.proxy_batch / (cfg.lr * wd) / self.proxy_examples(change)
        return target, (f"wd (B/B0) (lr/lr') (D0/D) = {fmt(wd)} {fmt(change.kappa)} {fmt(cfg.lr / lr)} "
                        f"{fmt(1 / ratio)}: tau = B/(lr wd D) kept at {fmt(tau)} {unit}")

    def proxy_examples(self, change: Change) -> float:
        """D0 in the unit the timescale is counted in (1: examples)."""
        del change
        return 1.0
