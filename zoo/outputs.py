"""Where a command may write its output: never inside a folder it only reads, nor into or below another command's
output (a run dir, a sweep) whose files it would sit beside, under their lock."""

from __future__ import annotations

import json
from pathlib import Path

from zoo.files import resolved


def check_outside(run_dir: str | Path, out: str | Path, flag: str, reader: str, what: str = "run dir") -> None:
    """`out` (given by `flag`) is not inside `run_dir` (a `what`), which `reader` only reads: readers never write to
    a run dir (an export at RUN/checkpoints/N read as the run's newest checkpoint; a fork's dir was cleaned up with
    it), nor a fit to the sweeps it reads."""
    if resolved(out).is_relative_to(resolved(run_dir)):
        raise ValueError(f"{flag} {out} is inside the {what} {run_dir}, which {reader} only reads; choose a folder "
                         "outside it")


# the file or folder that marks a folder as another command's output, and which command's
OUTPUTS = {"config.json": "run", "checkpoints": "run", "sweep.json": "sweep", "transfer.json": "transfer",
           "law.json": "fit", "coord_check_width.json": "coord check", "coord_check_depth.json": "coord check",
           "criticality.json": "criticality report"}
# the keys of what zoo writes into a run dir's config.json (nested by part, or flat as zoo wrote it before) or a sweep's
# sweep.json (flat): one of these sets
ZOO_KEYS = ({"model", "param", "optim", "loop"}, {"model", "param", "optimizer", "steps"})


def check_own_folder(out: str | Path, flag: str, owner: str) -> None:
    """`out` holds no other command's output (OUTPUTS; the `owner`'s own, a rerun's, may be there), and lies in no
    run dir or sweep of zoo's (a folder above it whose config.json zoo wrote beside checkpoints/, or whose sweep.json
    zoo wrote): a fit or a transfer written there sat beside files it does not describe, under their lock. Another
    program's config.json above it (a model repository's) is no run dir."""
    for name, kind in OUTPUTS.items():
        if kind != owner and (Path(out) / name).exists():
            raise ValueError(f"{flag} {out} holds a {kind} ({name}); give the {owner} a folder of its own")
    for folder in resolved(out).parents:
        run = (folder / "checkpoints").is_dir() and _written_by_zoo(folder / "config.json")
        kind = "run dir" if run else "sweep" if _written_by_zoo(folder / "sweep.json") else None
        if kind is not None:
            raise ValueError(f"{flag} {out} is inside the {kind} {folder}; give the {owner} a folder of its own, "
                             f"outside it")


def _written_by_zoo(path: Path, limit: int = 1 << 20) -> bool:
    """Whether `path` is a regular file of at most `limit` bytes holding a JSON object with one of ZOO_KEYS' sets
    (anything else, however deeply it nests, is not zoo's)."""
    try:
        if not path.is_file() or path.stat().st_size > limit:
            return False
        values = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(values, dict) and any(keys <= set(values) for keys in ZOO_KEYS)
