"""Export a trained zoo run in SP form: every multiplier folded into the weights (zoo.export.fold), so the network
loads anywhere as an ordinary one, with the same outputs.

    python -m zoo.export runs/gpt_depth_mup_w768_d12_s0 --out exported/gpt [--step N]

writes DIR/config.json (the run's config under `--param sp` with base width = width and base depth = depth: it
builds the same architecture with no multipliers), DIR/checkpoints/<step> (orbax, {"params": ...}: finetune with
`python train.py --config DIR/config.json --init-from DIR`) and DIR/model.safetensors (the same parameters by path,
kernels [fan_out, fan_in] as in PyTorch's nn.Linear, block parameters stacked on a leading depth axis). A tied GPT
embedding is exported untied: the readout multiplier cannot move into a table the input embedding shares. Before
anything is written the exported network's logits are checked against the run's on random inputs (f32).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from shlex import quote
from typing import Any

import jax
import numpy as np
from flax import nnx

import zoo.models
import zoo.param
from zoo.config import RunConfig
from zoo.diagnostics.inputs import random_inputs
from zoo.errors import DiskFull, forget_stops, sigterm_stops, stops_held
from zoo.export.fold import folded_params
from zoo.files import (
    check_can_write_in,
    resolved,
    stale_temporaries,
    temporary,
    undo_folders_made_on_failure,
    write_atomic,
)
from zoo.models.transformer import attention_heads
from zoo.outputs import check_outside
from zoo.registry import import_flags
from zoo.train.checkpoint import Checkpoints
from zoo.train.load import EXPORTED, load_run
from zoo.train.setup import setup
from zoo.train.step import jit_run_once
from zoo.tree import fill_by_name, key_path

CHECK_RTOL = 1e-4  # the exported logits agree with the run's to ~1e-6 in f32; a failed fold is off by far more


def export(run_dir: str | Path, out: str | Path, step: int | None = None,
           echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Writes the SP form of `run_dir`'s checkpoint `step` (default: the latest) into `out`; returns its config.
    The folders made for `out` are removed again when the export fails (a refused export leaves nothing)."""
    run_dir, out = Path(run_dir), Path(out)
    if out.is_symlink():  # the export goes where the link points (the link itself cannot be replaced by a folder)
        out = resolved(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a directory; choose another")
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out} exists and is not an empty directory; choose another")
    check_outside(run_dir, out, "--out", "an export")
    with sigterm_stops(), undo_folders_made_on_failure(out.parent):
        check_can_write_in(out.parent, f"--out {out}")  # before the work, not after it
        return write_export(run_dir, out, step, echo)


def write_export(run_dir: Path, out: Path, step: int | None, echo: Callable[[str], None]) -> dict[str, Any]:
    """`export`'s work, `out.parent` writable: load, fold, check the logits, write atomically."""
    loaded = load_run(run_dir, step, report=echo)
    cfg, run, state, step = loaded.cfg, loaded.setup, loaded.state, loaded.step
    model = cfg.model.name
    f32 = dataclasses.replace(run.model_cfg, dtype="float32")
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: zoo.models.create(model, f32, run.plugin, nnx.Rngs(0))))
    native = nnx.merge(graphdef, state["params"], state["rest"])
    params = folded_params(native)

    sp_cfg = sp_form(cfg, run.model_cfg)
    target_cfg = dataclasses.replace(setup(sp_cfg, run.data).model_cfg, dtype="float32")

    def target():
        return zoo.models.create(model, target_cfg, zoo.param.get("sp"), nnx.Rngs(0))

    sp_params = fill(nnx.state(nnx.eval_shape(target), nnx.Param), params)

    native_graphdef, native_state = nnx.split(native)

    @jit_run_once  # runs once
    def both_logits(native_state, sp_params, x):  # the SP model's own init is dead code here: only its multipliers
        graphdef, _, rest = nnx.split(target(), nnx.Param, ...)
        return nnx.merge(native_graphdef, native_state)(x)[0], nnx.merge(graphdef, sp_params, rest)(x)[0]

    with jax.default_matmul_precision("highest"):  # a GPU's float32 products default to TF32: 1e-4 apart in the forms
        err = relative_error(*both_logits(native_state, sp_params, random_inputs(f32, 4, jax.random.key(0))))
    if not err <= CHECK_RTOL:
        raise ValueError(f"the folded network's logits differ from the run's by {err:.2g} (relative): not exported")

    for stale in stale_temporaries(out, mine=True):  # a SIGKILLed export's half-written folder
        shutil.rmtree(stale, ignore_errors=True)
    meta = {"step": step, "config": sp_cfg.to_json(), "plugin": zoo.param.get("sp").spec(),
            "exported_from": {"run_dir": str(run_dir.absolute()), "step": step, "param": cfg.param.name,
                              "param_opt": cfg.param.options}}
    tmp, was_there = temporary(out), out.exists()  # an empty folder given as --out
    with stops_held() as stops:  # the write ends whole (orbax's threads write it), undone where a stop came first
        try:
            _write(tmp, out, sp_params, sp_cfg, meta)
        except DiskFull as e:  # named as the export's folder, not the temporary one it is built in
            raise DiskFull(str(e).replace(str(tmp), str(out))) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        stopped = stops[:1]  # a stop after this one came when the export was whole, and stops nothing
        if not stopped:
            echo(f"exported step {step} of {run_dir} ({cfg.param}) in SP form to {out}: logits agree to {err:.1g} "
                 f"(relative, f32); finetune with: python train.py --config {quote(str(out / 'config.json'))} "
                 f"--init-from {quote(str(out))}{import_flags(cfg.model.name)}")
    if stopped:
        shutil.rmtree(out, ignore_errors=True)
        if was_there:
            out.mkdir()
        raise stopped[0]
    return sp_cfg.to_json()


def _write(tmp: Path, out: Path, sp_params: Any, sp_cfg: Any, meta: dict[str, Any]) -> None:
    """The export built in `tmp` (its checkpoint, model.safetensors, config.json), then renamed to `out`."""
    ckpts = Checkpoints(tmp, keep=1)
    ckpts.save(meta["step"], {"params": sp_params}, meta)
    ckpts.wait()
    ckpts.close()
    save_safetensors(tmp / EXPORTED, sp_params, sp_cfg)
    write_atomic(tmp / "config.json", json.dumps(sp_cfg.to_json(), indent=2))
    try:
        if out.exists():
            out.rmdir()  # empty (checked before the work)
        os.replace(tmp, out)
    except OSError as e:  # another export into the same --out ended first
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        raise ValueError(f"--out {out} was filled while this export was written (by another export into it); "
                         "choose another") from None
    forget_stops()  # the export is whole: a stop a library swallowed on the way (raised at the end) stops nothing


def relative_error(want: jax.Array, got: jax.Array) -> float:
    """|got - want| / |want| (Frobenius norms); 0 where both are 0: a run whose readout is 0 (zero_init with the
    output frozen) has logits 0, which the fold keeps exactly (0 / 0 read as nan, and the export was refused)."""
    diff, scale = (float(np.linalg.norm(np.asarray(a, np.float64))) for a in (got - want, want))
    return diff / scale if scale > 0 else 0.0 if diff == 0 else math.inf


def sp_form(cfg: RunConfig, model_cfg: Any) -> RunConfig:
    """The run's config under `sp` at base width = width and base depth = depth, the same architecture: tied
    embeddings untied, and a head count that followed the base width pinned; no mesh (the run's devices', which a
    finetune elsewhere need not have: it takes its own --mesh, or spreads the batch over the devices it has)."""
    model_opt = dict(cfg.model.options)
    if getattr(model_cfg, "tie_embeddings", False):
        model_opt["tie_embeddings"] = False
    if getattr(model_cfg, "scale_heads", True) is False:
        heads = attention_heads(model_cfg.width, model_cfg.base_width or model_cfg.width, model_cfg.head_dim, False,
                                model_cfg.num_heads)
        model_opt["num_heads"] = heads.num
    return cfg.replace(param="sp", param_opt={}, base_width=model_cfg.width, base_depth=model_cfg.depth,
                       model_opt=model_opt, run_dir=None, init_from=None, fork_from=None, mesh=None)


def fill(abstract: nnx.State, params: dict[str, jax.Array]) -> nnx.State:
    """The SP model's params state with the folded values, matched by path and shape (every one, both ways)."""
    filled, unmatched = fill_by_name(abstract, params)
    if unmatched:
        raise ValueError(f"the SP-form model's {unmatched[0]} has no counterpart in the run")
    names = {key_path(p) for p, _ in jax.tree_util.tree_flatten_with_path(abstract)[0]}
    extra = sorted(set(params) - names)
    if extra:
        raise ValueError(f"the run's {extra[0]} has no place in the SP-form model")
    return filled


def save_safetensors(path: Path, params: nnx.State, cfg: RunConfig) -> None:
    """The params as safetensors, written as every file of zoo's (`write_atomic`: mode 0666 less the umask, where
    safetensors' save_file left 0600, the weights unreadable beside a readable config.json)."""
    from safetensors.numpy import save

    flat = {key_path(p): np.asarray(v) for p, v in jax.tree_util.tree_flatten_with_path(params)[0]}
    blob = save(flat, metadata={"format": "zoo SP form", "config": json.dumps(cfg.to_json())})
    write_atomic(path, sorted_metadata(blob), "wb")


def sorted_metadata(blob: bytes) -> bytes:
    """safetensors bytes with the header's __metadata__ in sorted key order. Its writer keeps the metadata in a hash
    map of random order, so two exports of one checkpoint differed in their bytes. The format: an 8-byte little-endian
    header length, the JSON header (padded with spaces to a multiple of 8), then the data, whose offsets count from
    the header's end."""
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + blob[8 + n:]
