"""A config file (`train.py --config FILE`): YAML or JSON settings, flat or nested by part, read against the
schema (zoo.config); a run's config.json, a transfer's target.json or an export's config read back as one."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from zoo import settings_file
from zoo.config import HINTS, PARTS, ModelPart, RunConfig, flatten, names_no_code
from zoo.schema import check_type


def read_file(path: str) -> dict[str, Any]:
    """A YAML or JSON file of settings (flat or nested by part) as flat settings, type-checked against the
    schema; model and plugin options must be plain values (numbers, strings, true/false, lists of them). A top-level
    `provenance` mapping (zoo.transfer's record of which scaling policy produced each number) is no setting: it is
    left out. A config zoo wrote (`written_by_zoo`) gives a setting added since as its default: an older ViT run's
    config.json (no decay_vectors) read back trained with today's recipe's value, not the run's. Its nulls are the
    run's values; a null in a file written by hand is a setting not given (the recipe's, as a flag left out)."""
    data = settings_file.load(path, "config file")
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a mapping of option: value")
    if isinstance(data.get("provenance"), dict):
        data = {k: v for k, v in data.items() if k != "provenance"}
    flat = flatten(data, f"config file {path}")
    ours = written_by_zoo(data)
    if ours:  # a setting added to zoo since is its default (the behaviour then), not the recipe's
        flat = {**json.loads(json.dumps(RunConfig.from_json(data, f"config file {path}").flat())), **flat}
    out = {k: check_type(f"config file {path}: {k}", v, HINTS[k]) for k, v in flat.items()}
    if not ours:
        # A null written by hand is not given, as a flag left out: the recipe's value stands (it replaced mixer's
        # width 128 with the class's 256). So is an option's (model_opt: {init_std: null}).
        out = {k: v for k, v in out.items() if v is not None}
        out |= {k: {o: v for o, v in out[k].items() if v is not None}
                for k in ("model_opt", "param_opt", "augment_opt") if isinstance(out.get(k), dict)}
    names_no_code(out, f"config file {path}")
    for name in ("model_opt", "param_opt", "augment_opt"):
        for k, v in out.get(name, {}).items():
            if not isinstance(k, str):
                raise ValueError(f"config file {path}: {name} has the key {k!r}; option names are strings")
            if not _plain(v):
                raise ValueError(f"config file {path}: {name}.{k} must be a number, a string, true/false or a list "
                                 f"of them, got {v!r}" + (" (an option's None is the text none)" if v is None else ""))
    return out


def written_by_zoo(data: dict[str, Any]) -> bool:
    """Whether a file's settings are a config zoo wrote (RunConfig.to_json: every part nested, the model's with
    every field), which held every setting zoo had then."""
    return (all(isinstance(data.get(part), dict) for part in PARTS)
            and {f.name for f in dataclasses.fields(ModelPart)} <= set(data["model"]))


def _plain(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool)) or (isinstance(v, list) and all(map(_plain, v)))
