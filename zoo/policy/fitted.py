"""A law fitted from sweeps by `python -m zoo.fit` (its law.json): log2 x* = a + sum_k e_k log2(s_k / s0_k) for the
best LR (and, where the sweeps swept it, the best weight decay) over the size axes s_k that varied (batch_size, steps,
width, depth). It starts from the policy the sweeps were read under (law.json's `policy`, `none` by default) and
multiplies by the law's ratio, not its intercept, so the proxy's tuned value anchors it:

    lr'  = base(lr)  prod_k (s'_k / s_k)^e_k        wd' = base(wd) prod_k (s'_k / s_k)^f_k   (no wd law: base(wd))

every other setting as the base policy maps it. The sweeps swept the *base* LR with the plugin on: a width or depth
exponent is the drift the plugin leaves (about 0 under muP), so applying it on top of the plugin's per-parameter
rules applies nothing twice. A law fitted on another model, plugin or optimizer is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.optim import OptimConfig
from zoo.policy.base import Change, ScalingPolicy, fmt, proxy_value
from zoo.policy.registry import get


@dataclasses.dataclass(frozen=True)
class Fitted(ScalingPolicy):
    name = "fitted"

    law: str = ""  # the law.json zoo.fit wrote

    def __post_init__(self) -> None:
        if not self.law:
            raise ValueError("policy fitted needs law=PATH, the law.json `python -m zoo.fit` wrote")
        self.base(self.read())

    def read(self) -> Any:
        """The law file (read at each use: a refit between two uses is taken)."""
        from zoo.fit.lawfile import read_law

        return read_law(self.law)

    def base(self, law: Any) -> ScalingPolicy:
        """The policy the law's sweeps were read under."""
        name = law.policy.get("name", "none")
        if name == self.name:
            raise ValueError(f"{self.law}: a law read under a fitted policy cannot be a fitted policy's base")
        try:  # the registry's words name a flag (--policy-opt) the user never gave: the file holds them
            return get(name, **law.policy.get("options", {}))
        except ValueError as e:
            raise ValueError(f"{self.law}: the policy its sweeps were read under: {e}") from None

    def check_run(self, run: Any) -> None:
        self.read().check_run(run.model.name, run.param.name, run.optim.name)

    def rule(self, setting: str, cfg: OptimConfig, change: Change, mapped: dict[str, Any]) -> tuple[Any, str]:
        del mapped  # the law's targets: the base's rules read the base's
        law = self.read()
        law.check_run(law.model, law.param, cfg.name)
        base = self.base(law)  # the base maps each setting from its own targets: the sweeps ran at base(wd), not at a
        own = {r.setting: r.target for r in base.rules(cfg, change)}  # wd the law's LR would give under sde's rule
        value, text = base.rule(setting, cfg, change, own)
        power = law.laws.get(setting)
        if power is None:
            return value, text
        start = proxy_value(cfg, setting) if value is None else value
        try:
            factor, terms, held = power.ratio(change.axis)
        except ValueError as e:
            raise ValueError(f"{self.law}: {e}; refit the law, or keep the target nearer the sweeps") from None
        untested = f" [not in the law, which has no term for it: {'; '.join(held)}]" if held else ""
        if unknown := [a for a in power.exponents if change.axis(a) is None]:  # e.g. no widths given (zoo.audit)
            untested += (f" [the law's {', '.join(unknown)} term{'s' if len(unknown) > 1 else ''} not applied: no "
                         f"proxy and target {', '.join(unknown)} given]")
        if not terms:
            why = "none of its axes changed" if not unknown else "no axis it could apply changed"
            return start, f"{text if value is not None else setting}; the law changes nothing ({why}){untested}"
        base_text = f"{base.name}'s rule ({text})" if value is not None else f"the proxy's {setting}"
        return start * factor, (f"{base_text}, then the law's x {' '.join(terms)} = {fmt(start)} x {fmt(factor)} "
                                f"(law {self.law}){untested}")
