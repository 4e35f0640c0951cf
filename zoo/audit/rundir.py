"""A run directory as an audit subject: the run's model (with its data's input shape, classes and sequence length),
plugin, optimizer, mesh, gradient accumulation, precision and batch size, read from its config.json as train.py
resolves it, and the sizes to measure at: the run's base width and its width (or half its width, when it runs at
its base), and in depth likewise when its plugin scales with depth."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from zoo.audit.subjects import ZooRun
from zoo.train.run import read_run_config
from zoo.train.setup import optim_config, setup

SIZES = ("width", "depth", "base_width", "base_depth", "dtype")


@dataclasses.dataclass
class RunDir:
    run: ZooRun
    widths: list[int]
    depths: list[int]
    depth: int


def from_run_dir(run_dir: str | Path) -> RunDir:
    cfg = read_run_config(run_dir)
    s = setup(cfg)
    model = s.model_cfg
    model_opt = {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.name not in SIZES}
    run = ZooRun(cfg.model, s.plugin, optim_config(cfg, s.steps), model_opt, cfg.mesh, cfg.grad_accum,
                 cfg.precision, cfg.batch_size)
    depth_scaling = float(s.plugin.alpha) != 0.0 or float(s.plugin.gamma) != 0.0
    return RunDir(run, around(model.width, model.base_width), around(model.depth, model.base_depth)
                  if depth_scaling else [], model.depth)


def around(size: int, base: int | None) -> list[int]:
    """The base size and the size, or half the size and the size when they are equal."""
    base = base or size
    return sorted({base, size}) if base != size else [max(1, size // 2), size]
