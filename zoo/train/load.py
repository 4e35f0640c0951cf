"""Reading a run that may still be training: its config and its state at a step, never writing to it.
Its data is what its checkpoints record of it (zoo.data.card: shapes and tokenizer, no examples), so a run dir read
elsewhere needs no data files.

One way for every reader (--fork-from, --init-from, export, sampling, the audit): `load_run(run_dir, step)` gives
the run's config, its setup (data, model config, plugin, program) and its verified state; `read_params` gives its
parameters by name. The config is the run's config.json, or, when that is gone, the one stored in its newest
checkpoint.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from shlex import quote
from typing import Any

import jax
import numpy as np

import zoo.data
from zoo.config import RunConfig, identity_changes
from zoo.data.card import described, from_card
from zoo.errors import CheckpointError, one_line, reraise_stop
from zoo.files import read_regular, refuse_special, shallow
from zoo.schema import digits
from zoo.train.checkpoint import Checkpoints
from zoo.train.setup import Setup, setup
from zoo.tree import key_path


@dataclasses.dataclass(frozen=True)
class LoadedRun:
    dir: Path
    cfg: RunConfig
    setup: Setup
    state: dict[str, Any]
    step: int
    meta: dict[str, Any]


def parse_run_spec(spec: str, flag: str = "--fork-from") -> tuple[Path, int | None]:
    """RUN_DIR[:STEP] -> (run dir, step or None for its newest good checkpoint); a tail that is not a step is one
    line listing the saved steps."""
    head, sep, tail = spec.rpartition(":")
    if not sep or Path(spec).is_dir():
        return Path(spec), None
    if digits(tail) and not head.strip():  # ':3' (an unset shell variable before it) read the current folder
        raise ValueError(f"{flag} {spec} names no run dir before its step; give RUN_DIR:{tail}")
    if digits(tail):
        return Path(head), int(tail)
    if Path(head).is_dir():
        steps = []
        if (Path(head) / "checkpoints").is_dir():
            with Checkpoints(head, read_only=True) as ckpts:
                steps = ckpts.steps()
        raise ValueError(f"{flag} {spec}: {tail!r} is not a step; {head} has checkpoints at "
                         f"{', '.join(map(str, steps)) or 'no step yet'}")
    return Path(spec), None


def stored_config(run_dir: str | Path) -> dict[str, Any] | None:
    """A run dir's stored config as saved (config.json, else its newest checkpoint's), or None when it has neither."""
    found = stored_config_where(run_dir)
    return None if found is None else found[0]


def stored_config_where(run_dir: str | Path) -> tuple[dict[str, Any], str] | None:
    """`stored_config` and the file it is read from, for the lines that blame it: config.json, or a checkpoint's
    metadata (an unknown model option was blamed on a config.json that was gone)."""
    path = Path(run_dir)
    values = read_config_json(path)
    if values is not None:
        return values, str(path / "config.json")
    if not (path / "checkpoints").is_dir():
        return None
    with Checkpoints(path, read_only=True) as ckpts:
        for step in ckpts.newest_first():
            try:
                config = ckpts.meta(step).get("config")
            except CheckpointError as e:
                reraise_stop(e)
                continue
            if isinstance(config, dict):
                return config, f"{ckpts.metadata_file(step)}"
    return None


def read_config_json(path: Path) -> dict[str, Any] | None:
    config = path / "config.json"
    if config.is_dir():
        raise IsADirectoryError(f"{config} is a directory, not a run's config; use another run dir")
    refuse_special(config, str(config))
    if not config.is_file():
        return None
    try:
        values = shallow(json.loads(read_regular(config)), str(config))
    except RecursionError:  # the parser recurses once per level
        raise ValueError(f"{config} nests its values too deep to be a run's config; use another run dir") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"{config} is not valid JSON; use another run dir") from None
    model = values.get("model") if isinstance(values, dict) else None
    if not (isinstance(model, str) or isinstance(model, dict) and isinstance(model.get("name"), str)):
        # another program's config.json (every run's names its model): never taken over, nor overwritten
        raise ValueError(f"{config} does not hold a zoo run's config (it names no model); use another run dir")
    return values


def read_config(run_dir: str | Path) -> RunConfig:
    """A run dir's config (config.json, or its newest checkpoint's when config.json is gone)."""
    path = Path(run_dir)
    if not path.exists():
        raise FileNotFoundError(f"no run dir at {run_dir}: it does not exist")
    if not path.is_dir():
        raise FileNotFoundError(f"{run_dir} is not a directory (a zoo run dir holds config.json and checkpoints/)")
    found = stored_config_where(path)
    if found is None:
        raise FileNotFoundError(f"{run_dir}: neither a config.json nor a checkpoint there (is it a zoo run dir?)")
    values, where = found
    if "model" not in values:
        raise ValueError(f"{where} is not a zoo run's config (it names no model)")
    return RunConfig.from_json(values, where)


EXPORTED = "model.safetensors"  # what zoo.export writes beside its checkpoint, and a run dir never holds


def check_not_export(path: Path) -> None:
    """Refuse an export (SP form: parameters only, no multipliers or optimizer state) where a run dir is read or
    resumed: a resume called its checkpoint unreadable ('move them away'), an export of it was an unexpected
    KeyError."""
    if (path / EXPORTED).is_file():
        raise ValueError(f"{path} is an export in SP form ({EXPORTED}: parameters only), not a run dir; finetune it "
                         f"in a new run dir: python train.py --config {quote(str(path / 'config.json'))} --init-from "
                         f"{quote(str(path))}")


def load_run(run_dir: str | Path, step: int | None = None, *, data: Any = None, place: Callable | None = None,
             report: Callable[[str], None] = print) -> LoadedRun:
    """The run's config, setup and verified train state at `step` (default: its newest good checkpoint), read
    without writing anything. `data`: the run's data set when the caller has it loaded; `place`: abstract state ->
    the same placed as the caller wants it (default: on this process's first device)."""
    path = Path(run_dir)
    cfg = read_config(path)
    check_not_export(path)
    if not (path / "checkpoints").is_dir():
        raise FileNotFoundError(f"{run_dir}: no checkpoints/ folder there (is it a run dir?)")
    with Checkpoints(path, read_only=True) as ckpts:
        recorded, where = recorded_meta(ckpts, step)
        same_run(path, cfg, recorded)
        s = setup(cfg, data if data is not None else run_data(recorded, where, cfg, path), reading=True)
        abstract = jax.eval_shape(s.program.init, jax.random.PRNGKey(cfg.loop.seed))
        target = place(abstract) if place is not None else None
        state, meta, step = ckpts.restore_at(step, target, report, same_data(s.data, cfg.data.name, path))
    return LoadedRun(path, cfg, s, state, step, meta)


def recorded_meta(ckpts: Checkpoints, step: int | None) -> tuple[dict[str, Any], Path]:
    """The metadata of checkpoint `step`, else of the newest checkpoint whose metadata reads (a run's checkpoints
    record one config and one data set), and its folder; {} where none reads."""
    for at in itertools.chain([step] if step in ckpts.steps() else [], (s for s in ckpts.newest_first() if s != step)):
        try:
            return ckpts.meta(at), ckpts.dir / str(at)
        except CheckpointError as e:
            reraise_stop(e)
            continue
    return {}, ckpts.dir


def run_data(meta: dict[str, Any], where: Path, cfg: RunConfig, run_dir: Path) -> Any:
    """The run's data as a checkpoint's metadata `meta` (of folder `where`) recorded it, else, for checkpoints of a
    zoo that did not record it, loaded from --data; one line where that cannot be loaded here."""
    card = meta.get("data")
    if isinstance(card, dict):
        return from_card(card, where)
    try:
        return zoo.data.load(cfg.data)
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"{run_dir} was saved by a zoo that did not record its data in its checkpoints, and "
                                f"--data {cfg.data.name} cannot be read here ({one_line(e)}): read the run where its "
                                "data is") from None


def check_same_run(run_dir: Path) -> None:
    """The run dir's config.json, where it has one and checkpoints, is their config (`same_run`): a resume under
    another run's config.json called their checkpoints unreadable and moved them to corrupt/."""
    values = read_config_json(run_dir)
    if values is None or not (run_dir / "checkpoints").is_dir():
        return
    with Checkpoints(run_dir, read_only=True) as ckpts:
        same_run(run_dir, RunConfig.from_json(values, str(run_dir / "config.json")), recorded_meta(ckpts, None)[0])


def same_run(run_dir: Path, cfg: RunConfig, meta: dict[str, Any]) -> None:
    """The run dir's config (config.json) is the one its checkpoints were saved under: a config.json copied from
    another run (another model, plugin or data) was read over checkpoints it does not describe, and refused only
    where their shapes happened to differ, naming the wrong data set or model."""
    saved = meta.get("config")
    changes = identity_changes(saved, cfg) if isinstance(saved, dict) else []
    if changes:
        raise ValueError(f"{run_dir / 'config.json'} is not the config its checkpoints were saved under "
                         f"({'; '.join(changes[:3])}): it was replaced or edited; restore it, or remove it to read "
                         "the checkpoints' own")


def same_data(data: Any, name: str, run_dir: str | Path, examples: bool = False) -> Callable[[dict[str, Any]], None]:
    """A check of a checkpoint's metadata (Checkpoints.restore's `check`): `data` (--data `name`) is the data the
    run that saved it trained on. A text set tokenizes as it did: a text file edited since the run (a character
    added, or one replaced by another) gives other ids, which read silently (a resume trained on shifted tokens, a
    sample decoded with them, and a vocabulary grown by one was 'a checkpoint that cannot be read'). Any set has the
    classes and the example shape the run's data card recorded (`same_shape`); with `examples` (a resume, which
    trains on), its train split holds the run's examples (`same_examples`). Checkpoints from before they were
    recorded pass."""
    def check(meta: dict[str, Any]) -> None:
        saved, now = meta.get("tokenizer"), described(data)
        if saved is None or now is None or saved == now:
            same_shape(data, name, run_dir, meta.get("data"))
            if examples:
                same_examples(data, name, run_dir, meta)
            return
        was = saved.get("vocab_size") if isinstance(saved, dict) else None
        kind = saved.get("kind") if isinstance(saved, dict) else None
        if kind is not None and kind != now["kind"]:  # not the text: how it is read (--byte-level, another token dir)
            raise ValueError(f"--data {name} gives {now['kind']} tokens (a vocabulary of {now['vocab_size']}), but "
                             f"{run_dir} trained on {kind} tokens (a vocabulary of {was}): read the data as the run "
                             "did, or train a new run on it")
        count = "as many as the run's" if was == now["vocab_size"] else f"the run's had {was}"
        raise ValueError(f"--data {name} does not tokenize as when {run_dir} trained on it: its {now['kind']} "
                         f"vocabulary of {now['vocab_size']} tokens ({count}) gives other ids (the text changed "
                         "since the run, or is another text): restore it, or train a new run on it")

    return check


def same_shape(data: Any, name: str, run_dir: str | Path, card: Any) -> None:
    """`data` has the classes and example shape of the run's data `card` (zoo.data.card): an image folder given a
    class folder since the run (2 classes -> 3) failed every checkpoint's read ('Requested shape (3, 32) is not
    compatible with the stored shape (2, 32)') and was 'no checkpoint in RUN can be read ... move them away'."""
    if not isinstance(card, dict):
        return
    was, now = (card.get("num_classes"), card.get("in_shape")), (int(data.num_classes), [int(n) for n in data.in_shape])
    if was != now:
        raise ValueError(f"--data {name} has {now[0]} classes of examples of shape {tuple(now[1])}, but {run_dir} "
                         f"trained on {was[0]} of shape {tuple(was[1] or ())}, which its checkpoints fit (the data "
                         "changed since the run, or is another set): restore it, train a new run on it, or start "
                         f"one from the run's parameters with --init-from {quote(str(run_dir))}")


def same_examples(data: Any, name: str, run_dir: str | Path, meta: dict[str, Any]) -> None:
    """The train split holds the examples it held when the checkpoint was saved, where it has as many
    (`DataView.digest`): a relative text:FILE read from another folder, or a file replaced by another of the same
    size and characters, tokenized as the run's and resumed on other text silently. A split of another size is
    `changed_data_note`'s (data grown on purpose may be meant); checkpoints without a digest, and streamed sets,
    pass."""
    then = meta.get("train_digest")
    if then is None or meta.get("train_examples") != data.size("train"):
        return
    if (now := data.digest("train")) is not None and now != then:
        raise ValueError(f"--data {name} is not the data {run_dir} trained on: its train split has as many examples "
                         "but others (another file, or a relative path read from another folder): give the run's "
                         "data, or train a new run on this")


def changed_data_note(meta: dict[str, Any], data: Any, run_dir: str | Path) -> str | None:
    """A line where a resumed run's train split no longer has the size it had when the checkpoint was saved
    (images or classes added to a folder, text appended): the batches from here on are drawn from other examples
    than an uninterrupted run's (zoo.data.view.batch_indices permutes the split's size). A note, not a refusal: data
    grown on purpose may be meant."""
    then, now = meta.get("train_examples"), data.size("train")
    if then is None or then == now:
        return None
    return (f"note: the train split has {now} examples now and had {then} when {run_dir} saved step "
            f"{meta.get('step')}: the data changed, and the batches from here differ from an uninterrupted run's")


def other_tokens_note(meta: dict[str, Any], data: Any, run_dir: str | Path) -> str | None:
    """A line where --init-from's source trained on text tokenized otherwise than this run's (another corpus, its
    vocabulary's ids not this one's): its embedding and readout rows of a vocabulary of the same size load by shape
    and stand for other tokens here, which finetuning may intend (a new corpus) but should not meet silently."""
    saved, now = meta.get("tokenizer"), described(data)
    if not isinstance(saved, dict) or now is None or saved == now:
        return None
    return (f"note: --init-from {run_dir} trained on text tokenized otherwise (a {saved.get('kind')} vocabulary of "
            f"{saved.get('vocab_size')} tokens; this run's: {now['kind']}, {now['vocab_size']}): where its token table "
            "has this one's shape it is loaded, and its rows stand for other tokens here")


def read_params(run_dir: str | Path, step: int | None = None, report: Callable[[str], None] = print
                ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A run's parameters by name (`key_path`) at `step` (default: its newest good checkpoint), and that
    checkpoint's metadata with its step; the arrays as saved, no model built."""
    state, meta = read_state(run_dir, step, report)
    return by_name(state["params"]), meta


def read_state(run_dir: str | Path, step: int | None = None, report: Callable[[str], None] = print
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run's saved state as saved (params, and for a run's checkpoint its multipliers "rest", optimizer state,
    step) at `step` (default: its newest good checkpoint), and that checkpoint's metadata with its step."""
    path = Path(run_dir)
    if not (path / "checkpoints").is_dir():
        raise FileNotFoundError(f"{run_dir}: no checkpoints/ folder there (is it a run dir?)")
    with Checkpoints(path, read_only=True) as ckpts:
        state, meta, step = ckpts.restore_at(step, None, report)
    return state, {**meta, "step": step}


def by_name(tree: Any) -> dict[str, np.ndarray]:
    """The leaves of a tree as host arrays by path (`key_path`)."""
    return {key_path(p): np.asarray(v) for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]}
