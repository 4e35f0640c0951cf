"""The format of a checkpoint's metadata (meta/metadata), which zoo.train.checkpoint writes with every checkpoint and
checks at every read, before any array is read.

`format` is FORMAT; a zoo that adds to the metadata, or to the config, plugin or model options it records, writes a
higher one. A reader refuses what it does not know, naming the field and the format, and blames the checkpoint
(not config.json): a format newer than its own, a top-level field, a setting of the recorded config, an option of
the recorded plugin (its spec and its config's options) or of the recorded model. Before formats were written
(checkpoints before 2026-11-29) a newer zoo's additions were dropped silently (a loop field, a plugin option) or
blamed on config.json (a model option); such checkpoints have no `format` and read as they always did.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from zoo.errors import CheckpointFormat

FORMAT = 3  # 2: the run's clock (wall_s, best_time), for a resumed run's summary; 3: train_digest
FIELDS = frozenset({"format", "step", "kernels", "checksums", "config", "plugin", "data_position", "first_loss",
                    "summary_extra", "train_examples", "train_digest", "data", "tokenizer", "exported_from", "wall_s",
                    "best_time"})


def check(meta: dict[str, Any], where: Path) -> None:
    """Refuse a metadata `meta` (of the file `where`) that this zoo cannot read whole (module docstring)."""
    if "format" not in meta:
        return
    found = meta["format"]
    if type(found) is not int or found < 1:
        raise CheckpointFormat(f"{where}: format {found!r} is not a checkpoint format (an integer from 1); the "
                               "checkpoint is damaged or not zoo's")
    if found > FORMAT:
        raise CheckpointFormat(f"{where} is in checkpoint format {found}, newer than this zoo's {FORMAT}: read it "
                               "with the zoo that wrote it, or a newer one")
    unknown = sorted(set(meta) - FIELDS)
    if unknown:
        _refuse(where, found, unknown[0])
    config = meta.get("config")
    if isinstance(config, dict):
        _check_config(config, meta.get("plugin"), where, found)


def _check_config(config: dict[str, Any], spec: Any, where: Path, found: int) -> None:
    """The recorded config's settings, plugin options (the config's and the plugin spec's) and model options are
    this zoo's."""
    import zoo.models
    import zoo.param
    from zoo.config import PARTS

    for part, values in config.items():
        if part not in PARTS:
            _refuse(where, found, f"config.{part}")
        fields = {f.name for f in dataclasses.fields(PARTS[part])}
        for key in values if isinstance(values, dict) else ():
            if key not in fields:
                _refuse(where, found, f"config.{part}.{key}")
    param, model = config.get("param", {}), config.get("model", {})
    for name, registry, options, known, field in (
            (param.get("name"), zoo.param.PLUGINS, param.get("options"), zoo.param.options, "param.options"),
            (model.get("name"), zoo.models.MODELS, model.get("options"), _model_fields, "model.options")):
        if not isinstance(name, str) or not registry.importable(name):  # code a file names: never imported here
            continue
        try:
            fields = set(known(name))
        except ValueError:  # a name this zoo does not have: refused where the config is read, naming it
            continue
        for key in options if isinstance(options, dict) else ():
            if key not in fields:
                _refuse(where, found, f"config.{field}.{key}")
        if field == "param.options" and isinstance(spec, dict) and isinstance(spec.get("options"), dict):
            for key in spec["options"]:
                if key not in fields:
                    _refuse(where, found, f"plugin.options.{key}")


def _model_fields(name: str) -> list[str]:
    import zoo.models

    return [f.name for f in dataclasses.fields(zoo.models.model_class(name).config_class)]


def _refuse(where: Path, found: int, field: str) -> None:
    raise CheckpointFormat(f"{where} (checkpoint format {found}) holds {field}, which this zoo does not know: it was "
                           "written by another zoo; read it with that zoo")
