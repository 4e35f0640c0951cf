"""The results of a sweep on disk: DIR/sweep.json (the settings every shape shares) and DIR/results.jsonl
(one line per member, appended as each shape finishes)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from zoo.sweeps.grid import lr_key

SETTINGS, RESULTS = "sweep.json", "results.jsonl"


def check_settings(out: Path, settings: dict[str, Any]) -> None:
    """Write DIR/sweep.json, or check that the sweep already in DIR has the same settings."""
    path = out / SETTINGS
    if path.exists():
        old = json.loads(path.read_text())
        differ = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
        if differ:
            raise ValueError(f"{out} holds a sweep with other settings ({', '.join(differ)}); "
                             "use another --out or the same settings")
        return
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=1, sort_keys=True) + "\n")


def read_settings(out: Path) -> dict[str, Any]:
    path = out / SETTINGS
    if not path.exists():
        raise FileNotFoundError(f"no sweep in {out} ({SETTINGS} is missing)")
    return json.loads(path.read_text())


def read(out: Path) -> list[dict[str, Any]]:
    """Every member record in DIR/results.jsonl (a torn last line, from an interrupted write, is skipped)."""
    path = out / RESULTS
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def append(out: Path, records: list[dict[str, Any]]) -> None:
    """Append member records (NaN and inf written as null) in one write."""
    text = "".join(json.dumps({k: _finite(v) for k, v in r.items()}) + "\n" for r in records)
    with open(out / RESULTS, "a") as f:
        f.write(text)
        f.flush()


def done(records: list[dict[str, Any]]) -> set[tuple[Any, Any, float, int]]:
    """The finished members as (width, depth, rounded log2 LR, seed)."""
    return {(r["width"], r["depth"], lr_key(r["lr"]), r["seed"]) for r in records}


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v
