"""An audit as a table (one row per parameter and axis: measured slope / theory's, per rule) and as JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from zoo.audit.judge import Check
from zoo.audit.sweep import Audit, ParamResult
from zoo.files import write_atomic

UPDATE = {"adam": "update_rms", "spectral": "spectral_step", "sgd": "step_size"}
COLUMNS = (("multiplier", "multiplier"), ("init rms", "init_rms"), ("init ||.||*", "init_spectral"),
           ("update", None), ("wd shrink", "wd_shrink"), ("eps", "eps_scale"))
POLICY_COLUMNS = (("lr", "lr"), ("wd shrink", "wd_shrink"), ("EMA timescale", "timescale"),
                  ("b2 half-life", "b2_half_life"), ("eps", "eps_scale"), ("eps / sqrt(v)", "eps_ratio"))
POLICY_AXES = ("batch_size", "steps")  # zoo.audit.policy's: judged against a scaling policy


def cell(c: Check | None) -> str:
    """`measured / theory` of a check's slopes, marked when it failed; `-` when absent."""
    if c is None:
        return "-"
    if c.measured is None:
        text = c.note or "n/a"
    else:
        text = f"{c.measured:+.2f}" + ("" if c.expected is None else f"/{c.expected:+.2f}")
    return f"[red]{text}[/red]" if c.passed is False else text


def row(path: str, p: ParamResult, columns: tuple = COLUMNS) -> list[str]:
    by_name = {c.quantity: c for c in p.checks}
    kind = p.kind if p.kind == p.tag_kind else f"[red]{p.kind} (tag: {p.tag_kind})[/red]"
    if "branch" in by_name:
        kind += " [red](branch?)[/red]"
    family = f"[red]{p.family} ({by_name['family'].note})[/red]" if "family" in by_name else p.family
    update = "frozen" if "frozen" in by_name else UPDATE.get(p.family)
    cells = [cell(by_name.get(update if name is None else name)) for _, name in columns]
    return [path, kind, family, *cells, "PASS" if p.passed else "[red]FAIL[/red]"]


def tables(audit: Audit) -> list[Table]:
    """One table per axis: each rule's measured log-log slope against size / the slope theory gives."""
    out = []
    for axis in audit.axes:
        sizes = ", ".join(map(str, axis.sizes))
        columns, law = (POLICY_COLUMNS, f"policy {audit.run.get('policy', {}).get('name')}") \
            if axis.axis in POLICY_AXES else (COLUMNS, "theory")
        t = Table(title=f"{audit.run['model']} {audit.run['param']['name']} {audit.run['optimizer']}: slopes in "
                  f"{axis.axis} ({sizes}), measured / {law}", title_justify="left")
        for name in ("parameter", "kind", "family", *(c for c, _ in columns), "verdict"):
            t.add_column(name, no_wrap=name == "parameter")
        for path, p in axis.params.items():
            t.add_row(*row(path, p, columns))
        out.append(t)
    return out


def to_json(audit: Audit) -> dict[str, Any]:
    return {"run": audit.run, "tol": audit.tol, "passed": audit.passed, "failures": audit.failures(),
            "axes": {a.axis: {"sizes": a.sizes, "passed": a.passed,
                              "params": {path: {**{k: v for k, v in dataclasses.asdict(p).items() if k != "checks"},
                                                "passed": p.passed,
                                                "checks": {c.quantity: dataclasses.asdict(c) for c in p.checks}}
                                         for path, p in a.params.items()}}
                     for a in audit.axes}}


def write_json(audit: Audit, path: str | Path) -> Path:
    """The audit as JSON, written whole (a temporary file renamed over the target)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(to_json(audit), indent=1) + "\n")
    return path
