"""A run directory owned by this process: one run per directory (a lock), the run's identity checked against the
config it stored, the finished state, the files a run leaves (config.json, summary.json, curves.png;
metrics.jsonl through the Logger), and the one way a run prints (`say`, process 0 only).

Nothing is written before everything that can be checked was checked (train()'s order); a directory this process
created is removed again when the run is refused before it started.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from shlex import quote
from typing import Any

from zoo.config import RunConfig, identity_changes
from zoo.errors import RunLocked, log_failures_in
from zoo.files import check_replaceable, first_missing, read_regular, remove_empty_folders, write_atomic
from zoo.train.checkpoint import Checkpoints
from zoo.train.distributed import barrier, is_main
from zoo.train.load import check_not_export, check_same_run, read_config_json, stored_config
from zoo.train.lock import RunLock, claim
from zoo.train.logger import console, plot_curves, trim_metrics

RUN_FILES = ("metrics.jsonl", "summary.json", "curves.png")  # beside config.json (zoo.train.load) and checkpoints/


def say_on(main: bool) -> Callable[[str], None]:
    """A line to the user (stderr), from process 0 only."""
    return (lambda text: console.print(text, highlight=False)) if main else (lambda text: None)


class Run:
    def __init__(self, path: Path, cfg: RunConfig, lock: RunLock | None, steps: list[int], made: Path | None = None):
        self.dir, self.cfg, self.lock, self.saved_steps = path, cfg, lock, steps
        self.made, self.started = made, False  # the outermost folder this process made for it; the step compiled
        self.main = is_main()
        self.say = say_on(self.main)

    @classmethod
    def open(cls, cfg: RunConfig) -> Run:
        """Take the run dir `cfg.loop.run_dir` (default: by model, plugin and shape): refused when it is not a
        directory we can write, when another process holds it, or when it holds checkpoints of a run with other
        settings (a run dir without a checkpoint yet takes any settings)."""
        path = Path(cfg.run_dir())
        made, lock = first_missing(path), None
        say = say_on(is_main())
        try:
            check_not_export(path)  # before the lock: nothing is written into an export
            if is_main():
                lock = claim(path, say)
            _check_layout(path)
            check_same_run(path)
            steps = _saved_steps(path)
            old = stored_config(path)
            strays = [name for name in RUN_FILES if (path / name).exists()]
            if old is None and strays:  # a run writes config.json before any of them
                raise FileExistsError(f"{path} holds {', '.join(strays)} but no run's config.json or checkpoints: "
                                      "another program's files would be overwritten; use another --run-dir")
            changes = identity_changes(old, cfg) if old is not None else []
            if changes and steps:
                raise ValueError(f"{path} holds a run with other settings ({'; '.join(changes)}): rerun with its "
                                 f"settings to resume it, or continue it under the new ones in a new run dir "
                                 f"(--fork-from {quote(str(path))} --run-dir {quote(f'{path}-fork')}), or start over "
                                 "in another --run-dir")
            if changes:
                say(f"{path} has no checkpoint yet: starting it with these settings ({'; '.join(changes)})")
            barrier("zoo:run-read")  # every process read the dir before any creates its checkpoints/
        except BaseException as e:
            if is_main() and not isinstance(e, RunLocked):  # a locked dir is its holder's, however new it is
                _remove_made(path, made)
            if lock is not None:
                lock.release()  # after the removal: no other process takes the dir before it is gone
            raise
        log_failures_in(path)
        run = cls(path, cfg, lock, steps, made)
        if old is not None and not changes and read_config_json(path) is None:
            run.write_config()  # config.json was lost: rebuilt from the checkpoints' copy
        return run

    def finished_summary(self) -> dict[str, Any] | None:
        """The summary of this run when it trained all its steps and saved its last one (a rerun changes nothing).
        A damaged summary.json (not UTF-8, or JSON but no object: [1]) is none, as a torn one is: it stopped the
        rerun with 'unexpected AttributeError' or a decode error."""
        steps = self.cfg.loop.steps
        try:
            summary = json.loads(read_regular(self.dir / "summary.json"))
        except (OSError, ValueError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            return None
        finished = isinstance(summary, dict) and summary.get("steps") == steps and steps in self.saved_steps
        return summary if finished else None

    def write_config(self) -> None:
        if self.main:
            write_atomic(self.dir / "config.json", json.dumps(self.cfg.to_json(), indent=2) + "\n")

    def start(self, step: int) -> None:
        """Before the first step, once the step compiled and fits: config.json written (atomically) and metrics
        after `step` dropped."""
        self.started = True
        if not self.main:
            return
        self.write_config()
        dropped = trim_metrics(self.dir, step)
        if dropped:
            self.say(f"dropped {dropped} metrics.jsonl rows after step {step} (written before the last stop)")

    def finish(self, summary: dict[str, Any]) -> None:
        """curves.png, then summary.json, which marks the run finished (`finished_summary`): a stop between them left
        a finished run without its curves, which no rerun drew."""
        if self.main:
            plot_curves(self.dir)
            write_atomic(self.dir / "summary.json", json.dumps(summary, indent=2) + "\n")

    def close(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def __enter__(self) -> Run:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: Any) -> None:
        """A dir this process created for a run refused before it started (the compiled step does not fit, a
        Ctrl-C during the compile, --init-from of another model) is removed, with the folders made on the way to it:
        a refused command leaves nothing behind."""
        if kind is not None and not self.started and self.main:
            _remove_made(self.dir, self.made)
        self.close()


def _remove_made(path: Path, made: Path | None) -> None:
    """The run dir `path` and the empty folders above it up to `made`, when this process made them (`made` is
    None when `path` was there)."""
    if made is not None:
        shutil.rmtree(path, ignore_errors=True)
        remove_empty_folders(path.parent, made)


def _check_layout(path: Path) -> None:
    """What the run will write can be written: checkpoints/ is a folder and the files are regular files or not there
    yet (found at the first save or at the end of training otherwise, naming a temporary file)."""
    folder = path / "checkpoints"
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a directory, so no checkpoint could be saved there; use another "
                                 "--run-dir")
    for name in RUN_FILES:
        if (path / name).is_dir():
            raise IsADirectoryError(f"{path / name} is a directory, so the run could not write it; use another "
                                    "--run-dir")
    for name in ("config.json", *RUN_FILES):
        if not (path / name).is_dir():  # config.json: a folder is named as one by the config's reader
            check_replaceable(path / name)  # a link (to a file outside the run) or a FIFO is refused, not written


def _saved_steps(path: Path) -> list[int]:
    if not (path / "checkpoints").is_dir():
        return []
    with Checkpoints(path, read_only=True) as ckpts:
        return ckpts.steps()
