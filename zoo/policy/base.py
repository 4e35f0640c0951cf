"""The scaling-policy contract: a proxy's tuned optimizer settings mapped to a target's when the batch size, the
horizon or the data change (issue 42). The plugin (zoo.param) owns width and depth; a policy owns the rest.

With kappa = B / B0 (examples per step), rho = T / T0 (steps) and D / D0 (the examples a timescale counts), a policy
rewrites the run's *global* settings only, those of zoo.optim.OptimConfig: lr, b1, b2, eps, momentum, muon_beta,
weight_decay, warmup (the decaying schedules' length is the run's, T, by construction). The chain (zoo.optim) then
applies the plugin's per-parameter rules to them unchanged, so every factor is applied once: width and depth by the
plugin, per parameter; batch, horizon and data by the policy, globally. For a parameter p at width ratio m, depth
ratio r under the target's global settings (lr', eps', wd'):

    LR                 lr' * m^-c r^-gamma                 (the plugin's LR multiplier, lr_mult_p)
    Adam's epsilon     eps' * m^-d r^-alpha                (through the gradient pre-scale, grad_scale_p)
    decay per step     lr' * wd' * wd_mult_p               decoupled: NOT times lr_mult_p (TP IVb 2.10.1)
    EMA timescale      tau_p = B / (lr' wd' wd_mult_p D)   in epochs of D (Wang & Aitchison, ICML 2025)
    beta's half-life   B ln(1/2) / ln(beta')               examples (b1, b2, muon_beta alike)

The decay's independence of lr_mult_p is what keeps tau_p width-independent: in PyTorch's AdamW (decay lr_p *
lambda_p) the same tau needs lambda_p = wd / lr_mult_p, which under muP grows with fan-in (Wang & Aitchison).
zoo's chain realises that factor once, per parameter, where it adds the decay; so a policy never multiplies wd by a
width factor, and zoo.audit checks the realised shrink (slope 0 in width, tau's ratio across batch and horizon).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from zoo.optim import USED_BY, OptimConfig
from zoo.param import families
from zoo.schedule import longest_warmup

# the global settings a policy maps, and the optimizers that read each (zoo.optim.USED_BY; the rest are read by all)
SETTINGS = ("lr", "b1", "b2", "eps", "momentum", "muon_beta", "weight_decay", "warmup")


def reads(optimizer: str, setting: str) -> bool:
    """Whether `optimizer` reads the global `setting`."""
    return setting not in USED_BY or optimizer in USED_BY[setting]


def family(optimizer: str) -> str:
    """The family whose rule a policy applies to an optimizer's global LR: sgd (sgd, momentum: the update follows the
    gradient's size), spectral (muon: the matrices' orthogonalised update), adam (every other: entrywise
    normalised). Muon's vectors and io layers are Adam's, and share its one LR (zoo.optim: Moonlight's matching)."""
    return families.family(optimizer, "hidden")


@dataclasses.dataclass(frozen=True)
class Change:
    """What changes from the proxy to the target: examples per step, steps, and optionally the training sets' sizes
    (the examples D a timescale counts when it counts the data rather than the budget B T) and the widths and depths
    (read only by a fitted law's residual exponents: the plugin owns them)."""

    proxy_batch: int
    batch: int
    proxy_steps: int
    steps: int
    proxy_data: int | None = None
    data: int | None = None
    proxy_width: int | None = None
    width: int | None = None
    proxy_depth: int | None = None
    depth: int | None = None

    def __post_init__(self) -> None:
        for name in ("proxy_batch", "batch", "proxy_steps", "steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name.replace('_', ' ')} must be a positive integer, got {v!r}")

    @property
    def kappa(self) -> float:
        """B / B0."""
        return self.batch / self.proxy_batch

    @property
    def rho(self) -> float:
        """T / T0."""
        return self.steps / self.proxy_steps

    def axis(self, name: str) -> tuple[float, float] | None:
        """(proxy, target) of a size axis a fitted law reads (width, depth, batch_size, steps); None if not given."""
        pair = {"batch_size": (self.proxy_batch, self.batch), "steps": (self.proxy_steps, self.steps),
                "width": (self.proxy_width, self.width), "depth": (self.proxy_depth, self.depth)}.get(name)
        if pair is None:
            raise ValueError(f"a law's axis is one of batch_size, steps, width, depth, got {name!r}")
        return None if None in pair else pair


@dataclasses.dataclass(frozen=True)
class Rule:
    """One global setting mapped: its proxy and target values, the law that gave it, and the policy."""

    setting: str
    proxy: Any
    target: Any
    law: str
    policy: str

    def record(self) -> dict[str, Any]:
        return {"proxy": self.proxy, "target": self.target, "law": self.law, "policy": self.policy}


@dataclasses.dataclass(frozen=True)
class ScalingPolicy:
    """Base policy: every setting kept. Subclasses set `name`, their options (fields) and `options_read`: option ->
    the optimizers that read it (an option given for another optimizer is refused), and override `rule`."""

    name: ClassVar[str] = ""
    options_read: ClassVar[dict[str, tuple[str, ...]]] = {}

    def rule(self, setting: str, cfg: OptimConfig, change: Change, mapped: dict[str, Any]) -> tuple[Any, str]:
        """(target value, law) of one setting; `mapped`: the target values of the settings before it in SETTINGS."""
        del cfg, change, mapped
        return None, "kept"

    def rules(self, cfg: OptimConfig, change: Change) -> list[Rule]:
        """A Rule for every setting cfg's optimizer reads, in SETTINGS order."""
        out, mapped = [], {}
        for setting in SETTINGS:
            if not reads(cfg.name, setting):
                continue
            proxy = proxy_value(cfg, setting)
            value, law = self.rule(setting, cfg, change, mapped)
            if value is None:
                value, law = proxy, "kept"
            mapped[setting] = value
            out.append(Rule(setting, proxy, value, law, self.name))
        return out

    def apply(self, cfg: OptimConfig, change: Change) -> tuple[OptimConfig, list[Rule]]:
        """The target's optimizer settings and the rules that made them."""
        rules = self.rules(cfg, change)
        try:
            return dataclasses.replace(cfg, **{r.setting: r.target for r in rules}), rules
        except ValueError as e:  # the mapped value is refused as a flag's would be: say the policy made it
            laws = "; ".join(f"{r.setting} {r.proxy!r} -> {r.target!r} ({r.law})" for r in rules
                             if r.setting in str(e))
            raise ValueError(f"policy {self.name} maps {laws or 'the settings'} from batch {change.proxy_batch}, "
                             f"{change.proxy_steps} steps to batch {change.batch}, {change.steps} steps, and "
                             f"the result is refused: {e}") from None

    def check(self, optimizer: str, given: set[str]) -> None:
        """Refuse an option among `given` that `optimizer` does not read (`--policy-opt betas=false` under sgd)."""
        for option in sorted(given):
            users = self.options_read.get(option)
            if users is not None and optimizer not in users:
                raise ValueError(f"policy {self.name} option {option} is read only by --optimizer "
                                 f"{' / '.join(users)}; --optimizer {optimizer} does not read it: leave it out")

    def check_run(self, run: Any) -> None:
        """Refuse a run (zoo.config.RunConfig) the policy cannot map (a fitted law of another model); none here."""
        del run

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "options": {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}


def proxy_value(cfg: OptimConfig, setting: str) -> Any:
    """A setting's value in the proxy's config (weight_decay: the decay it applies, 0.1 for adamw by default)."""
    return cfg.decay if setting == "weight_decay" else getattr(cfg, setting)


def half_life_beta(beta: float, kappa: float) -> float:
    """beta^kappa: an EMA's half-life in examples kept when each step sees kappa times the examples (B ln(1/2) /
    ln(beta) is fixed); to first order 1 - kappa (1 - beta), the square-root rule's (Malladi et al. 2022, arXiv
    2205.10287), and a valid beta for every kappa (1 - kappa (1 - beta) is negative past kappa = 1 / (1 - beta))."""
    return float(beta**kappa)


def examples_warmup(cfg: OptimConfig, kappa: float, steps: int) -> int:
    """The warmup that covers the proxy's examples: round(W / kappa), at least 1 where W was, and reaching its peak
    within the run (zoo.schedule.longest_warmup)."""
    if cfg.warmup == 0:
        return 0
    return max(0, min(max(1, round(cfg.warmup / kappa)), longest_warmup(cfg, steps)))


def fmt(x: float) -> str:
    return f"{x:.4g}"


def power(base: float, exponent: float) -> str:
    """`(4)^0.5` as a law's text."""
    return f"({fmt(base)})^{exponent:g}" if not math.isclose(exponent, 1.0) else f"({fmt(base)})"
