"""The law file `python -m zoo.fit` writes (law.json) and the `fitted` policy reads: per fitted hyperparameter (lr,
and weight_decay where swept) log2 x* = intercept + sum_k e_k log2(s_k / s0_k) over the size axes s_k, with each
exponent's interval and the span of sizes it was fitted on (a proxy or target beyond it is named extrapolated); and what
it was fitted on (model, plugin, optimizer, data, metric, the policy the sweeps were read under), which a run must
match."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo.files import read_mapping
from zoo.schema import check_type, power

KIND = "zoo.fit law"
AXES = ("width", "depth", "batch_size", "steps")
HYPER = ("lr", "weight_decay")


def size(value: float) -> str:
    """A size as it is given (1000000 steps, not 1e+06)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclasses.dataclass(frozen=True)
class Power:
    """log2 x* = intercept + sum_k exponents[k] log2(s_k / reference[k])."""

    intercept: float
    reference: dict[str, float]
    exponents: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    # every size axis (those the sweeps held fixed too) -> the sizes fitted (min, max)
    span: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def predict(self, size: dict[str, float]) -> float:
        return self.intercept + sum(e * math.log2(size[a] / self.reference[a]) for a, e in self.exponents.items())

    def ratio(self, axis: Callable[[str], tuple[float, float] | None]) -> tuple[float, list[str], list[str]]:
        """prod_k (s'_k / s_k)^e_k over the axes whose (proxy, target) `axis` gives, each term as text, and the axes
        the law has no term for (held fixed by the sweeps, or left out by --axes) that the proxy or the target leaves
        the span of: the law says nothing of how its optimum moves along them."""
        factor, terms = 1.0, []
        for a, e in self.exponents.items():
            pair = axis(a)
            if pair is None or pair[0] == pair[1]:
                continue
            factor *= power(pair[1] / pair[0], e, f"the law's {a} factor")
            terms.append(f"({a} {size(pair[1])}/{size(pair[0])})^{e:.3f}{self.beyond(a, pair)}")
        held = [f"{a} {size(pair[1])}/{size(pair[0])}{self.beyond(a, pair)}" for a in self.span
                if a not in self.exponents and (pair := axis(a)) is not None and self.beyond(a, pair)]
        return factor, terms, held

    def beyond(self, axis: str, pair: tuple[float, float]) -> str:
        """` [extrapolated: the sweeps' width 48-640]` where the proxy's or the target's size lies outside the sizes
        the law was fitted on; ` [the sweeps' span not recorded]` for a law.json written before it was."""
        if axis not in self.span:
            return " [the sweeps' span not recorded]"
        lo, hi = self.span[axis]
        sizes = size(lo) if lo == hi else f"{size(lo)}-{size(hi)}"
        return "" if all(lo <= s <= hi for s in pair) else f" [extrapolated: the sweeps' {axis} {sizes}]"

    def record(self) -> dict[str, Any]:
        return {"intercept_log2": self.intercept, "reference": self.reference, "exponents": self.exponents,
                "intervals": {a: list(v) for a, v in self.intervals.items()},
                "span": {a: list(v) for a, v in self.span.items()}}


@dataclasses.dataclass(frozen=True)
class Law:
    model: str
    param: str
    optimizer: str
    data: str
    metric: str
    policy: dict[str, Any]
    laws: dict[str, Power]

    def check_run(self, model: str, param: str, optimizer: str) -> None:
        """Refuse a run of another model, plugin or optimizer than the sweeps': their exponents do not carry over."""
        for what, mine, theirs in (("model", self.model, model), ("parametrization", self.param, param),
                                   ("optimizer", self.optimizer, optimizer)):
            if mine != theirs:
                raise ValueError(f"the fitted law is of {what} {mine}, this run's is {theirs}: fit the sweeps of this "
                                 f"{what} (python -m zoo.fit)")

    def elsewhere(self, data: str, metric: str) -> str | None:
        """A note when the run's data or metric is not the sweeps' (the law applies, as a guess), else None."""
        other = [f"{what} {mine} (this run's: {theirs})" for what, mine, theirs in
                 (("data", self.data, data), ("metric", self.metric, metric)) if mine != theirs]
        return f"note: the law was fitted on {' and '.join(other)}: its exponents are applied as they are, " \
            "untested there" if other else None

    def record(self) -> dict[str, Any]:
        return {"kind": KIND, "model": self.model, "param": self.param, "optimizer": self.optimizer,
                "data": self.data, "metric": self.metric, "policy": self.policy,
                "laws": {k: p.record() for k, p in self.laws.items()}}


def read_law(path: str | Path) -> Law:
    """The law in `path`; one line naming the file where it is not one."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, not a law file: give the law.json in it ({path / 'law.json'})")
    if not path.is_file():
        raise FileNotFoundError(f"no law file {path}: `python -m zoo.fit DIRS --out DIR` writes DIR/law.json")
    data = read_mapping(path, "a zoo.fit law", "give the law.json `python -m zoo.fit` wrote")
    try:
        if data.get("kind") != KIND or not data["laws"]:
            raise ValueError
        laws = {}
        for k, v in data["laws"].items():
            if k not in HYPER or not set(v["exponents"]) | set(v.get("span", {})) <= set(AXES):
                raise ValueError
            laws[k] = Power(_finite(v["intercept_log2"]), {a: _finite(x) for a, x in v["reference"].items()},
                            {a: _finite(e) for a, e in v["exponents"].items()},
                            {a: (_number(lo), _number(hi)) for a, (lo, hi) in v["intervals"].items()},
                            {a: (_finite(lo), _finite(hi)) for a, (lo, hi) in v.get("span", {}).items()})
            if not all(x > 0 for x in laws[k].reference.values()) or any(lo > hi for lo, hi in laws[k].span.values()):
                raise ValueError
        policy = data["policy"]
        if not isinstance(policy.get("name", "none"), str) or not isinstance(policy.get("options", {}), dict):
            raise ValueError
        law = Law(str(data["model"]), str(data["param"]), str(data["optimizer"]), str(data["data"]),
                  str(data["metric"]), dict(policy), laws)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ValueError(f"{path} is not a zoo.fit law (kind {KIND!r} with laws of lr or weight_decay over "
                         f"{', '.join(AXES)}): give the law.json `python -m zoo.fit` wrote") from None
    from zoo.policy.registry import POLICIES

    POLICIES.refuse_code(law.policy.get("name", "none"), str(path))  # the base policy it names is no code to import
    return law


def _number(value: Any) -> float:
    """A JSON number (not a bool, which float() takes as 0 or 1) as a float; ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError
    return float(value)


def _finite(value: Any) -> float:
    """A finite JSON number as a float; ValueError otherwise."""
    return check_type("a law's number", value, float)
