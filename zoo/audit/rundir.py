"""What an audit measures when a command line names a run: the run train.py would start with these settings (the
model's recipe, then the flags), or a run directory as it ran (zoo.train.load.load_run): its model (with its data's
input shape, classes and sequence length), plugin, optimizer, mesh, gradient accumulation, precision and batch
size; and the sizes to measure at. A run dir is measured at its base width and its width (half its width when it
runs at its base; 1 and 2 at 1), and in depth likewise when its plugin scales with depth; its saved optimizer state
says which family each parameter really got."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax

import zoo.models
import zoo.param
from zoo.audit.probe import paths
from zoo.audit.subjects import ZooRun
from zoo.config import DataConfig, RunConfig
from zoo.param import families
from zoo.param.tags import Tag
from zoo.tree import key_path

SIZES = ("width", "depth", "base_width", "base_depth", "dtype")
DEFAULT_WIDTHS, DEFAULT_DEPTH = [64, 128, 256], 2


@dataclasses.dataclass
class Subject:
    run: ZooRun
    widths: list[int]
    depths: list[int]
    depth: int
    saved: list[str] = dataclasses.field(default_factory=list)  # families the saved state contradicts
    unreadable: list[str] = dataclasses.field(default_factory=list)  # a run dir's newer checkpoints that fail to read
    step: int | None = None  # the checkpoint a run dir is audited at


def from_config(cfg: RunConfig, batch_size: int) -> Subject:
    """The run of `cfg` (resolved: recipe and flags), at widths 64, 128, 256 and depth 2."""
    model_opt = dict(cfg.model.options)
    fields = {f.name for f in dataclasses.fields(zoo.models.config(cfg.model.name))}
    if "seq_len" in fields:
        model_opt.setdefault("seq_len", cfg.data.seq_len)
    elif cfg.data.seq_len != DataConfig.seq_len:  # taken and ignored, where train.py refuses it
        raise ValueError(f"--seq-len is the context length of a language model, but {cfg.model.name} has none; "
                         "leave it out")
    run = zoo_run(cfg, model_opt, batch_size, cfg.loop.steps)
    return Subject(run, DEFAULT_WIDTHS, [], DEFAULT_DEPTH)


def from_run_dir(run_dir: str | Path, batch_size: int | None = None, mesh: str | None = None) -> Subject:
    """The run in `run_dir` at its newest checkpoint that reads; the newer ones that do not are `unreadable` (their
    lines), which the verdict names: an audit of an older checkpoint said PASS as if it were the run's newest."""
    from zoo.train.load import load_run

    unreadable: list[str] = []
    loaded = load_run(run_dir, report=unreadable.append)  # a reader reports only the checkpoints that fail
    model = loaded.setup.model_cfg
    model_opt = {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.name not in SIZES}
    plugin = loaded.setup.plugin
    cfg = loaded.cfg if mesh is None else dataclasses.replace(
        loaded.cfg, loop=dataclasses.replace(loaded.cfg.loop, mesh=mesh))
    check_mesh_here(run_dir, cfg.loop.mesh, mesh is not None)
    run = zoo_run(cfg, model_opt, batch_size or cfg.loop.batch_size, loaded.setup.steps)
    depth_scaling = float(plugin.alpha) != 0.0 or float(plugin.gamma) != 0.0
    depths = around(model.depth, model.base_depth) if depth_scaling else []
    tags = {p: v.get_metadata()["tag"] for p, v in paths(jax.eval_shape(loaded.setup.program.init,
                                                                        jax.random.key(0))["params"]).items()}
    return Subject(run, around(model.width, model.base_width), depths, model.depth,
                   saved_families(loaded.state["opt"], tags, loaded.cfg), unreadable, loaded.step)


def check_mesh_here(run_dir: str | Path, mesh: str | None, given: bool) -> None:
    """The mesh the audit measures under (the run's, or --mesh) fits this process's devices: a run's own that does
    not was refused as if the user had given it ('--mesh data=2,fsdp=3: ... must equal the 1 devices present')."""
    from zoo.train.mesh import parse

    try:
        parse(mesh, jax.device_count())
    except ValueError:
        if given:
            raise
        raise ValueError(f"{run_dir} ran on the mesh {mesh}, which the {jax.device_count()} device(s) here cannot "
                         "form; audit it with as many devices, or give --mesh for these (its numbers do not depend "
                         "on the mesh)") from None


def zoo_run(cfg: RunConfig, model_opt: dict[str, Any], batch_size: int, horizon: int | None) -> ZooRun:
    return ZooRun(cfg.model.name, zoo.param.get(cfg.param.name, **cfg.param.options), cfg.optim, model_opt,
                  cfg.loop.mesh, cfg.loop.grad_accum, cfg.loop.precision, batch_size, horizon)


def around(size: int, base: int | None) -> list[int]:
    """The base size and the size, or half the size and the size when they are equal (1 and 2 at size 1, which has
    no half: a Depth-muP run at depth 1 = its base depth was audited at depths [1, 1] and refused)."""
    base = base or size
    if base != size:
        return sorted({base, size})
    return [size // 2, size] if size > 1 else [1, 2]


def saved_families(opt: Any, tags: dict[str, Tag], cfg: RunConfig) -> list[str]:
    """`path: ... holds it; theory: <family>` for each parameter whose saved optimizer state (as the checkpoint
    holds it, read without a target: nested dicts) shows another family than its kind's: an array under Adam's `nu`
    is Adam's; under the `spectral` part of zoo's Muon chain, Muon's."""
    out = []
    for keys, leaf in jax.tree_util.tree_flatten_with_path(opt)[0]:
        path = key_path(keys)
        if not hasattr(leaf, "shape") or not ("/nu/" in f"/{path}" or "spectral/inner_state/mu/" in path):
            continue
        family, param = ("adam", path.split("nu/", 1)[1]) if "/nu/" in f"/{path}" else \
            ("spectral", path.split("spectral/inner_state/mu/", 1)[1])
        tag = tags.get(param)
        want = tag and families.family(cfg.optim.name, tag.kind, cfg.optim.muon_io)
        if want and want != family:
            out.append(f"saved state {param}: {'Muon' if family == 'spectral' else 'Adam'}'s state holds it; "
                       f"theory: {want}")
    return out
