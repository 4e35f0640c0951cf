"""Orbax checkpoints of the whole train state (stable args API): async, keep-N, atomic (orbax writes to a
temporary directory and renames it when complete, so a killed save leaves the last good checkpoint)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

log = logging.getLogger("zoo")


class CheckpointError(RuntimeError):
    """A checkpoint exists but cannot be read."""


class Checkpoints:
    """The checkpoints of one run directory: state (params, optimizer, step, RNG) and a JSON of metadata."""

    def __init__(self, run_dir: str | Path, keep: int = 3):
        self.dir = Path(run_dir).absolute() / "checkpoints"
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=True, create=True)
        self.manager = ocp.CheckpointManager(self.dir, options=options)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        args = ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        self.manager.save(step, args=args, force=True)

    def restore(self, abstract_state: Any, step: int | None = None) -> tuple[Any, dict[str, Any]]:
        """The state at `step` (default: latest), placed as the shardings in `abstract_state` say."""
        step = self.latest_step() if step is None else step
        args = ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore())
        try:
            out = self.manager.restore(step, args=args)
        except Exception as e:  # orbax raises many types for unreadable or mismatched files
            raise CheckpointError(f"checkpoint {self.dir / str(step)} cannot be restored ({_first_line(e)}); "
                                  "use another --run-dir or move it away") from None
        return out.state, out.meta

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()


def load_params(run_dir: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The latest checkpoint's parameters as {path: array} and its metadata (for --init-from)."""
    path = Path(run_dir)
    if not (path / "checkpoints").is_dir():
        raise FileNotFoundError(f"--init-from {run_dir}: no checkpoints/ folder there")
    ckpts = Checkpoints(path)
    step = ckpts.latest_step()
    if step is None:
        raise FileNotFoundError(f"--init-from {run_dir}: the run has no checkpoint yet")
    args = ocp.args.Composite(state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore())
    try:
        out = ckpts.manager.restore(step, args=args)
    except Exception as e:
        raise CheckpointError(f"--init-from {run_dir}: checkpoint {step} cannot be read ({_first_line(e)})") from None
    finally:
        ckpts.close()
    flat = jax.tree_util.tree_flatten_with_path(out.state["params"])[0]
    return {path_str(p): np.asarray(v) for p, v in flat}, out.meta


def path_str(path: tuple) -> str:
    """A tree path as 'embed/kernel' (orbax's and nnx's 'value' leaf keys dropped)."""
    parts = [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path]
    return "/".join(p for p in parts if p != "value")


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]
