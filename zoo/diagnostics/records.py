"""The diagnostics' JSON records (criticality.json, coord_check_<axis>.json)."""

from __future__ import annotations

import json
import math
from typing import Any


def to_json(record: Any) -> str:
    """`record` as strict JSON (indented): non-finite floats as the strings "nan", "inf" and "-inf" (Python's NaN
    token is no JSON: a frozen group's expected slope, or a diverged check's changes, made the file unreadable to
    JavaScript and other strict parsers), tuples as lists."""
    return json.dumps(_plain(record), indent=1, allow_nan=False)


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x
