"""The results of a sweep on disk: DIR/sweep.json (the settings every shape shares) and DIR/results.jsonl
(one line per member, appended as each shape finishes).

One sweep writes DIR at a time (`open_dir` takes DIR/.lock, as a run dir's), so no member is trained twice; a
torn last line (a write cut by a kill or a full disk) is repaired when DIR is opened, so the next record starts
on a line of its own and the torn member trains again."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zoo.models
import zoo.param
from zoo.config import RunConfig
from zoo.errors import naming_full_disk
from zoo.files import open_regular, read_mapping, read_regular, write_atomic
from zoo.option_defaults import changed_settings
from zoo.outputs import OUTPUTS
from zoo.sweeps.grid import lr_key
from zoo.train.lock import RunLock, claim

SETTINGS, RESULTS, DATA = "sweep.json", "results.jsonl", "data.json"
# the identity settings a member sets for itself; sweep.json holds the others (runner.SweepSpec.settings)
PER_MEMBER = ("width", "depth", "base_width", "base_depth", "lr", "init_from", "fork_from")


def check_settings(out: Path, settings: dict[str, Any], report: Callable[[str], None] = print, *,
                   base_defaulted: bool = True) -> None:
    """Write DIR/sweep.json, or check that the sweep already in DIR has the same settings; a sweep with no results
    yet (refused or stopped before its first shape finished) takes the new ones, saying so. Results without a
    sweep.json (it is written before any result, so it was removed) are refused: their settings are unknown, and
    their members would have been skipped as this sweep's and reported under its settings. base_defaulted: the base
    width or depth was left to default to the smallest swept (a refusal for it then names the flags that keep it)."""
    path, held = out / SETTINGS, read(out)
    if not path.exists() and held:
        raise ValueError(f"{out} holds {len(held)} member results ({RESULTS}) but no {SETTINGS}: the settings "
                         f"that trained them are unknown; use another --out, or move {RESULTS} away to start over")
    if path.exists():
        old = read_settings(out)
        differ = sorted(changed_settings(old, settings))
        if not differ:
            return
        if held:
            said = ", ".join(f"{k} {json.dumps(old.get(k))} there, {json.dumps(settings.get(k))} here" for k in differ)
            hint = " (the base width and depth default to the smallest swept: give --base-width/--base-depth)" \
                if base_defaulted and {"base_width", "base_depth"} & set(differ) else ""
            raise ValueError(f"{out} holds a sweep with other settings ({said}){hint}; use another --out or the "
                             "same settings")
        report(f"{out} has no results yet: starting it with these settings ({', '.join(differ)} changed)")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(settings, indent=1, sort_keys=True) + "\n")


def check_data(out: Path, data_name: str, digest: str | None) -> None:
    """Write DIR/data.json (the train split's digest, `DataView.digest`), or check that the members already in DIR
    trained on the same examples: a rerun of a relative text:FILE from another folder (same characters, same size)
    trained its next shapes on other text beside the first, without a word. A sweep from before the digest was kept
    takes this one."""
    path = out / DATA
    if path.exists() and read(out):
        then = read_mapping(path, "a sweep's data record", "move it away").get("train_digest")
        if then is not None and digest is not None and then != digest:
            raise ValueError(f"--data {data_name} is not the data {out}'s members trained on: its train split holds "
                             "other examples (another file, or a relative path read from another folder); give the "
                             "sweep's data, or use another --out")
        if then is not None:
            return
    write_atomic(path, json.dumps({"train_digest": digest}) + "\n")


def read_settings(out: Path, advice: str = "use another --out") -> dict[str, Any]:
    """DIR/sweep.json; `advice` ends the line that refuses a damaged one. A setting added to zoo since it was written
    is there as its default, the behaviour zoo had before it (as a run dir's config.json reads it): a sweep from
    before decay_vectors was refused as 'other settings', and could not be fitted with a newer one. Its model and
    plugin options are typed as the model and plugin type them (a sweep of `--model-opt head_dim=16` stored "16")."""
    path = out / SETTINGS
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out} is a file, not a sweep dir (a folder holding {SETTINGS})")
    if not path.exists():
        raise FileNotFoundError(f"no sweep in {out} ({SETTINGS} is missing)")
    stored = read_mapping(path, "a sweep's settings", advice)
    for key, registry in (("model", zoo.models), ("param", zoo.param)):  # options typed, as a run's are (zoo.config)
        if isinstance(stored.get(f"{key}_opt"), dict) and isinstance(stored.get(key), str):
            stored[f"{key}_opt"] = registry.stored_options(stored[key], stored[f"{key}_opt"])
    defaults = json.loads(json.dumps(RunConfig().identity()))
    return {**{k: v for k, v in defaults.items() if k not in PER_MEMBER and k not in stored}, **stored}


def open_dir(out: Path, report: Callable[[str], None] = print, what: str = "sweep") -> RunLock:
    """Take DIR (created if needed) for this process and repair a torn last line of its results; the lock is
    held until released (a `with` block)."""
    check_not_run(out)
    lock = claim(out, report, what=what, flag="--out")
    try:
        repair(out, report)
    except BaseException:
        lock.release()
        raise
    return lock


def check_not_run(out: Path) -> None:
    """DIR holds no run of train.py or export (config.json or checkpoints/) unless it is a sweep already: the report
    writes DIR/summary.json and DIR/sweep.png, and a run's own summary.json (its best and final eval) was replaced;
    nor a transfer or a fit, which would then refuse their own folder as holding a sweep."""
    held = [name for name in ("config.json", "checkpoints") if (out / name).exists()]
    if held and not (out / SETTINGS).exists():
        raise ValueError(f"--out {out} holds a run ({held[0]}), whose summary.json a sweep's report would replace; "
                         "give the sweep a folder of its own")
    for name in (name for name, kind in OUTPUTS.items() if kind not in ("run", "sweep")):
        if (out / name).exists():
            raise ValueError(f"--out {out} holds a {OUTPUTS[name]} ({name}); give the sweep a folder of its own")


def repair(out: Path, report: Callable[[str], None] = print) -> None:
    """End DIR/results.jsonl with a newline: a last line that is a whole record gets one, a torn one is cut."""
    path = out / RESULTS
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return
    if not data or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    with open_regular(path, "r+b") as f:
        if _record(data[start:]) is not None:
            f.seek(len(data))
            f.write(b"\n")
            return
        f.truncate(start)
    report(f"{path}: cut a torn last line (an interrupted write); its member trains again")


def read(out: Path) -> list[dict[str, Any]]:
    """Every member record in DIR/results.jsonl, once each (a line that is not a record is skipped)."""
    path = out / RESULTS
    if not path.exists():
        return []
    records, seen = [], set()
    for line in read_regular(path).splitlines():
        r = _record(line)
        if r is None or _key(r) in seen:
            continue
        seen.add(_key(r))
        records.append(r)
    return records


def unreadable(out: Path) -> int:
    """The non-blank lines of DIR/results.jsonl that `read` skips, but for a member's repeat of the same numbers: the
    lines that are no member record, and those that give a member again with other numbers (the first is kept)."""
    return sum(line_faults(out))


def line_faults(out: Path) -> tuple[int, int]:
    """The lines of DIR/results.jsonl that are no member record (torn or edited), and those that give a member again
    with other numbers. zoo.sweep trains a member once, so the second kind is another sweep's result in this file."""
    path = out / RESULTS
    if not path.exists():
        return 0, 0
    first: dict[tuple, dict[str, Any]] = {}
    torn = repeated = 0
    for line in read_regular(path).splitlines():
        if line.strip():
            r = _record(line)
            torn += r is None
            repeated += r is not None and first.setdefault(_key(r), r) != r
    return torn, repeated


def skipped_lines(n: int, where: str) -> str:
    """What a reader says of the `n` lines of `where` (a results.jsonl) that `unreadable` counts."""
    return (f"{n} line(s) of {where} were skipped: no member record (torn or edited), or a member's second line with "
            "other numbers (its first is kept)")


def append(out: Path, records: list[dict[str, Any]]) -> None:
    """Append member records (NaN and inf written as null) in one write."""
    text = "".join(json.dumps({k: _finite(v) for k, v in r.items()}) + "\n" for r in records)
    with naming_full_disk(out / RESULTS), open_regular(out / RESULTS, "a") as f:  # a short write names the file
        f.write(text)
        f.flush()


def check_record(r: dict[str, Any], metric: str = "train_loss") -> None:
    """A member record has what the report reads, of its type: one edited by hand or written by another program
    (no "diverged"; a width "32", which cannot be sorted beside 16) stopped the report with an unexpected error, and
    one whose log2_lr is not its lr's, or whose seed is negative, was averaged into another member's point."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    def size(v: Any) -> bool:
        return type(v) is int and v >= 1

    def lr(v: Any) -> bool:
        return number(v) and v > 0

    fields = {"width": size, "depth": size, "seed": lambda v: type(v) is int and v >= 0, "lr": lr,
              "log2_lr": lambda v: number(v) and (not lr(r.get("lr")) or lr_key(r["lr"]) == round(v, 6)),
              "diverged": lambda v: type(v) is bool,
              **{k: lambda v: v is None or number(v) for k in (metric, "eval_accuracy")}}
    bad = [k for k, ok in fields.items() if k not in r or not ok(r[k])]
    if bad:
        raise ValueError(f"a record in {RESULTS} has no valid {', '.join(bad)} (written by another program?): "
                         f"{json.dumps(r)[:200]}; delete its line and rerun to train that member again")


def done(records: list[dict[str, Any]]) -> set[tuple[Any, Any, float, int]]:
    """The finished members as (width, depth, rounded log2 LR, seed)."""
    return {_key(r) for r in records}


def _key(r: dict[str, Any]) -> tuple[Any, Any, float, int]:
    return r["width"], r["depth"], lr_key(r["lr"]), r["seed"]


def _record(line: bytes) -> dict[str, Any] | None:
    """A member record, or None for a line that is not one (torn, or not JSON)."""
    try:
        r = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(r, dict) or not {"width", "depth", "lr", "seed"} <= r.keys():
        return None
    try:
        hash(_key(r))
    except (TypeError, ValueError):
        return None
    return r


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v
