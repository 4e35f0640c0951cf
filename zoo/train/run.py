"""A run directory: one run per directory (a lock), the run's identity checked against config.json, the finished
state, and the files a run leaves (config.json, summary.json, curves.png; metrics.jsonl through the Logger)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from zoo.config import FIELDS, RunConfig, identity_changes
from zoo.train.distributed import is_main
from zoo.train.lock import RunLock
from zoo.train.logger import console, plot_curves, trim_metrics, write_atomic


class Run:
    def __init__(self, path: Path, cfg: RunConfig, lock: RunLock | None, old: dict[str, Any] | None):
        self.dir, self.cfg, self.lock, self.old = path, cfg, lock, old
        self.main = is_main()

    @classmethod
    def open(cls, cfg: RunConfig) -> Run:
        """Take the run dir `cfg.run_dir` (default: by model, plugin and shape): refused when it is not a directory
        we can write, when another process holds it, or when it holds a run with other settings."""
        path = Path(cfg.run_dir or cfg.default_run_dir())
        cfg.run_dir = str(path)
        if path.exists() and not path.is_dir():
            raise ValueError(f"--run-dir {path} is a file, not a directory")
        lock = None
        if is_main():
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ValueError(f"cannot create --run-dir {path}: {e.strerror}") from None
            if not os.access(path, os.W_OK | os.X_OK):
                raise ValueError(f"--run-dir {path} is not writable")
            lock = RunLock(path, report=lambda line: console.print(line, highlight=False))
        try:
            old = _read_config(path)
            if old is not None:
                changes = identity_changes(old, cfg)
                if changes:
                    fork = f"--fork-from {path} --run-dir {path}-fork"
                    raise ValueError(f"{path} holds a run with other settings ({'; '.join(changes)}): rerun with its "
                                     f"settings to resume it, or continue it under the new ones in a new run dir "
                                     f"({fork}), or start over in another --run-dir")
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(path, cfg, lock, old)

    def finished_summary(self, steps: int) -> dict[str, Any] | None:
        """The summary of this run when it already trained all `steps` (a rerun then changes nothing)."""
        path = self.dir / "summary.json"
        try:
            summary = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        return summary if summary.get("steps") == steps else None

    def start(self, step: int) -> None:
        """Before the first step: config.json written (atomically) and metrics after `step` dropped."""
        if not self.main:
            return
        write_atomic(self.dir / "config.json", json.dumps(self.cfg.to_json(), indent=2) + "\n")
        dropped = trim_metrics(self.dir, step)
        if dropped:
            console.print(f"dropped {dropped} metrics.jsonl rows after step {step} (written before the last stop)",
                          highlight=False)

    def finish(self, summary: dict[str, Any]) -> None:
        if self.main:
            write_atomic(self.dir / "summary.json", json.dumps(summary, indent=2) + "\n")
            plot_curves(self.dir)

    def close(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_run_config(run_dir: str | Path) -> RunConfig:
    """A run dir's resolved config (its config.json) as a RunConfig (for --fork-from, export and sampling);
    settings a newer zoo added take their defaults."""
    values = _read_config(Path(run_dir))
    if values is None:
        raise FileNotFoundError(f"{run_dir}: no config.json there (is it a zoo run directory?)")
    if "model" not in values:
        raise ValueError(f"{Path(run_dir) / 'config.json'} is not a zoo run's config (it names no model)")
    return RunConfig(**{k: v for k, v in values.items() if k in FIELDS})


def _read_config(path: Path) -> dict[str, Any] | None:
    config = path / "config.json"
    if not config.is_file():
        return None
    try:
        old = json.loads(config.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"{config} is not valid JSON; use another --run-dir") from None
    if not isinstance(old, dict):
        raise ValueError(f"{config} does not hold a run's config; use another --run-dir")
    return old
