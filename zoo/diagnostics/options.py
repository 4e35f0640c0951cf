"""Command-line helpers shared by the diagnostic CLIs: model options typed by the config's defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo import models
from zoo.cli import _model_value


def model_overrides(model_name: str, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """(key, text) pairs -> config overrides; tuple-valued options (in_shape) take "a,b,c" or one integer."""
    fields = {f.name: f.default for f in dataclasses.fields(models.config(model_name))}
    out: dict[str, Any] = {}
    for key, text in pairs:
        if isinstance(fields.get(key), tuple):
            try:
                out[key] = tuple(int(v) for v in str(text).split(","))
            except ValueError:
                raise ValueError(f"model option {key} takes integers a,b,c, got {text!r}") from None
        else:
            out[key] = _model_value(text)
    return out
