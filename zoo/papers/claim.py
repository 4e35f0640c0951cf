"""What one regenerated claim is: the paper's setting and result, zoo's experiment, and the checks that give the
verdict from the experiment's numbers (never by hand)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

Numbers = dict[str, Any]
VERDICTS = ("reproduced", "partly reproduced", "not reproduced")


@dataclasses.dataclass(frozen=True)
class Check:
    """One statement of the paper tested on zoo's numbers: the rule (with its thresholds, fixed before the run), the
    numbers it read, whether they pass, and when they do not, why (scale, data, a known inconsistency)."""

    claim: str
    rule: str
    measured: str
    passed: bool
    why_not: str = ""


def verdict(checks: list[Check]) -> str:
    """reproduced: every check passes; not reproduced: none does; partly reproduced: in between."""
    passed = sum(c.passed for c in checks)
    return VERDICTS[0] if passed == len(checks) else VERDICTS[2] if passed == 0 else VERDICTS[1]


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim module's contract.

    run(quick) -> numbers: the experiment (JSON-able; quick: the tiny version the tests run); a claim whose members
    can split over worker processes (its LR sweeps: zoo.papers.lr_sweep.sweep) takes run(quick, processes) and has
    `serial` empty, any other names in `serial` why it cannot. checks(numbers) ->
    the checks. plot(numbers, path): the figure. setting(numbers) and result(numbers): zoo's side of the page, in
    words built from the numbers. paper_setting, paper_result: the paper's side; scale: why zoo's scale differs.
    """

    name: str
    title: str
    source: str
    paper_setting: str
    paper_result: str
    scale: str
    run: Callable[..., Numbers]
    checks: Callable[[Numbers], list[Check]]
    plot: Callable[[Numbers, Path], None]
    setting: Callable[[Numbers], str]
    result: Callable[[Numbers], str]
    serial: str = "it trains no LR sweep"
