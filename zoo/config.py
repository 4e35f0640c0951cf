"""The configuration of a training run: one typed schema for flags, config files and defaults
(per-model defaults < config file < command-line flags), and the run's identity.

Each field carries its help text and whether it is part of the run's *identity*: every setting that shapes the
trajectory (model, plugin, optimizer, schedule, data, seed, ...). A rerun in a run dir is refused when an
identity field differs; `--fork-from` continues a run's state under new settings in a new run dir.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from pathlib import Path
from typing import Any

import yaml

MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "mlp_resnet": dict(data="cifar10", optimizer="adam", lr=1e-3, batch_size=128, steps=2000, eval_every=500),
    "mixer": dict(data="cifar10", optimizer="adamw", lr=1e-3, schedule="cosine", warmup=500, batch_size=128,
                  steps=20000, eval_every=1000, augment=True, weight_decay=0.05),
    "vit": dict(data="cifar10", optimizer="adamw", lr=1e-3, schedule="cosine", warmup=500, batch_size=128,
                steps=20000, eval_every=1000, augment=True, weight_decay=0.05),
    "gpt": dict(data="shakespeare", optimizer="adamw", lr=1e-3, schedule="cosine", warmup=100, min_lr_ratio=0.1,
                b2=0.99, batch_size=64, steps=5000, eval_every=250, seq_len=256, weight_decay=0.1,
                clip_norm=1.0),
}
DECAYING_SCHEDULES = ("cosine", "linear")


def _field(default: Any, help: str, *, identity: bool = True, metavar: str | None = None,
           shown: str | None = None) -> Any:
    """A schema field: its help, whether it is part of the run's identity, and how --help shows its default."""
    kwargs = {"default_factory": dict} if default == {} else {"default": default}
    return dataclasses.field(**kwargs, metadata={"help": help, "identity": identity, "metavar": metavar,
                                                 "shown": shown})


@dataclasses.dataclass
class RunConfig:
    model: str = _field("mlp_resnet", "model name")
    param: str = _field("sp", "parametrization plugin")
    param_opt: dict[str, Any] = _field({}, "plugin option, repeatable (e.g. alpha=1)", metavar="K=V")
    width: int | None = _field(None, "model width n", shown="the model's")
    depth: int | None = _field(None, "number of blocks L", shown="the model's")
    base_width: int | None = _field(None, "base width n0 at which every plugin equals SP",
                                    shown="the model's default width")
    base_depth: int | None = _field(None, "base depth L0", shown="the model's default depth")
    model_opt: dict[str, Any] = _field({}, "model config option, repeatable (e.g. activation=abs)", metavar="K=V")
    optimizer: str = _field("adam", "sgd, momentum, adam, adamw, lion, adafactor, muon")
    lr: float = _field(1e-3, "peak learning rate at the base width (the plugin scales it per parameter)")
    schedule: str = _field("constant", "constant, cosine or linear (after --warmup)")
    warmup: int = _field(0, "linear warmup steps")
    min_lr_ratio: float = _field(0.0, "final LR / peak LR for cosine and linear")
    b1: float = _field(0.9, "Adam/Lion beta1, in [0, 1)")
    b2: float = _field(0.999, "Adam/Lion beta2, in [0, 1)")
    eps: float = _field(1e-8, "Adam epsilon at the base width (the plugin scales it), > 0")
    weight_decay: float | None = _field(None, "decoupled per-step shrink lr*wd", shown="0.1 for adamw, else 0")
    clip_norm: float | None = _field(None, "clip the global norm of the width-faithful gradients")
    clip_rms: float | None = _field(None, "clip each parameter's update RMS, width-independent")
    steps: int | None = _field(None, "training steps (the horizon of a decaying schedule)",
                               shown="the model's, or --epochs")
    epochs: float | None = _field(None, "training epochs, when --steps is not given", identity=False)
    batch_size: int = _field(128, "global batch size (split over the devices)")
    eval_batch_size: int = _field(500, "eval batch size", identity=False)
    grad_accum: int = _field(1, "microbatches per step, scanned inside the jitted step (the batch is split K ways)",
                             identity=False)
    data: str = _field("cifar10", "cifar10, shakespeare, synthetic, synthetic:text, synthetic:teacher, "
                       "imagefolder:<dir|.tar.gz>, text:<file>, tfds:<name>[:split]")
    data_dir: str | None = _field(None, "data dir for tfds and the bundled files", identity=False,
                                  shown="tfds's own; the bundled data/ folder")
    stream: bool | None = _field(None, "stream batches from the host through grain instead of holding the set on "
                                 "the devices", identity=False, shown="by decoded size: over 1 GiB streams")
    workers: int = _field(0, "processes that read and decode streamed batches (0: threads of the training process)",
                          identity=False)
    image_size: int | None = _field(None, "resize every image (shorter side) to N and center-crop it to N x N as it is "
                                    "read, so sets of varying image size work", metavar="N",
                                    shown="the set's own, which must be one size")
    seq_len: int = _field(256, "context length for text data")
    byte_level: bool = _field(False, "text as bytes instead of characters")
    augment: bool = _field(False, "CIFAR pad-crop and flip")
    run_dir: str | None = _field(None, "where checkpoints, metrics.jsonl and plots go", identity=False,
                                 shown="runs/<model>_<param>_w<width>_d<depth>_s<seed>")
    init_from: str | None = _field(None, "a run dir whose latest params initialise this run (finetuning)")
    fork_from: str | None = _field(None, "continue RUN_DIR[:STEP]'s full state (params, optimizer moments, step, "
                                   "data position) under this command's settings, in a new run dir",
                                   metavar="RUN_DIR[:STEP]")
    seed: int = _field(0, "seed of init, data order and dropout, >= 0")
    precision: str = _field("f32", "f32 or bf16 (compute; params stay f32)")
    mesh: str | None = _field(None, "device mesh data=D,fsdp=F,tensor=T (product = device count)", identity=False,
                              metavar="AXES", shown="data = all devices")
    remat: str = _field("none", "none or block: rematerialise each block in the backward pass (less memory)",
                        identity=False)
    eval_every: int = _field(500, "eval every N steps", identity=False)
    ckpt_every: int = _field(500, "checkpoint every N steps", identity=False)
    log_every: int = _field(10, "log train metrics every N steps", identity=False)
    keep: int = _field(3, "checkpoints to keep", identity=False)
    max_loss_ratio: float = _field(10.0, "stop when the train loss exceeds this times the first logged loss "
                                   "(0 disables)", identity=False)
    diversity: float | None = _field(None, "at each eval also log the feature-diversity slope of the residual "
                                     "stream at depth fraction LAMBDA (Depth-muP; ~0.5 with diverse features, ~1 "
                                     "when redundant)", identity=False, metavar="LAMBDA")

    def validate(self) -> None:
        """Every value in range before anything is loaded or compiled."""
        if self.precision not in ("f32", "bf16"):
            raise ValueError(f"--precision must be f32 or bf16, got {self.precision!r}")
        if self.remat not in ("none", "block"):
            raise ValueError(f"--remat must be none or block, got {self.remat!r}")
        check = self._check
        for name in ("batch_size", "eval_batch_size", "eval_every", "ckpt_every", "log_every", "keep", "seq_len",
                     "grad_accum"):
            check(name, lambda v: v >= 1, "must be positive")
        check("workers", lambda v: v >= 0, "must be >= 0")
        for name in ("width", "depth", "base_width", "base_depth", "steps", "image_size"):
            check(name, lambda v: v is None or v >= 1, "must be positive")
        check("lr", lambda v: math.isfinite(v) and v > 0, "must be positive and finite")
        check("epochs", lambda v: v is None or (math.isfinite(v) and v > 0), "must be positive")
        check("warmup", lambda v: v >= 0, "must be >= 0")
        check("seed", lambda v: v >= 0, "must be >= 0")
        check("min_lr_ratio", lambda v: 0 <= v <= 1, "must be in [0, 1]")
        for name in ("b1", "b2"):
            check(name, lambda v: 0 <= v < 1, "must be in [0, 1)")
        check("eps", lambda v: math.isfinite(v) and v > 0, "must be positive and finite")
        for name in ("weight_decay", "clip_norm", "clip_rms"):
            check(name, lambda v: v is None or (math.isfinite(v) and v >= 0), "must be >= 0 and finite")
        check("max_loss_ratio", lambda v: math.isfinite(v) and v >= 0, "must be >= 0 (0 disables the check)")
        check("diversity", lambda v: v is None or 0 <= v < 1, "is a depth fraction in [0, 1)")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"--batch-size {self.batch_size} is not divisible by --grad-accum {self.grad_accum}")
        if self.init_from and self.fork_from:
            raise ValueError("--init-from and --fork-from exclude each other: finetune from params, or fork a state")

    def _check(self, name: str, ok: Any, what: str) -> None:
        value = getattr(self, name)
        if not ok(value):
            raise ValueError(f"--{name.replace('_', '-')} {what}, got {value!r}")

    def default_run_dir(self) -> str:
        return str(Path("runs") / f"{self.model}_{self.param}_w{self.width}_d{self.depth}_s{self.seed}")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def identity(self) -> dict[str, Any]:
        """The settings that shape the trajectory; `steps` only when a schedule decays towards it."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata["identity"]}
        if self.schedule not in DECAYING_SCHEDULES:
            out.pop("steps")
        return out


FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}
HINTS = typing.get_type_hints(RunConfig)


def identity_changes(old: dict[str, Any], new: RunConfig) -> list[str]:
    """`name: old -> new` for each identity setting that differs (settings the old config lacks are skipped)."""
    now = json.loads(json.dumps(new.identity()))  # as config.json holds them (tuples as lists)
    return [f"{k} {_show(old[k])} -> {_show(v)}" for k, v in now.items() if k in old and old[k] != v]


def _show(v: Any) -> str:
    return json.dumps(v) if isinstance(v, (dict, str)) or v is None else f"{v:g}" if isinstance(v, float) else str(v)


def base_type(hint: Any) -> type:
    """int for `int | None`, dict for `dict[str, Any]`, ..."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(t for t in typing.get_args(hint) if t is not type(None))
    return typing.get_origin(hint) or hint


def check_type(where: str, value: Any, hint: Any) -> Any:
    """`value` checked against a type hint (int, float, str, bool, dict, tuple, X | None); ints pass as floats."""
    if value is None and type(None) in typing.get_args(hint):
        return None
    base = base_type(hint)
    ok = {bool: lambda v: isinstance(v, bool),
          int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str),
          dict: lambda v: isinstance(v, dict),
          tuple: lambda v: isinstance(v, (list, tuple))}.get(base, lambda v: True)
    if not ok(value):
        name = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a mapping",
                tuple: "a list"}[base]
        raise ValueError(f"{where} must be {name}, got {value!r}")
    return float(value) if base is float else tuple(value) if base is tuple else value


def read_file(path: str) -> dict[str, Any]:
    """A YAML or JSON mapping of RunConfig fields (dashes or underscores), type-checked against the schema."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        data = json.loads(p.read_text()) if p.suffix == ".json" else yaml.safe_load(p.read_text())
    except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as e:
        raise ValueError(f"config file {path} is not valid {'JSON' if p.suffix == '.json' else 'YAML'}: "
                         f"{str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a mapping of option: value")
    data = {str(k).replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ValueError(f"config file {path}: unknown option(s) {', '.join(unknown)}")
    return {k: check_type(f"config file {path}: {k}", v, HINTS[k]) for k, v in data.items()}


def resolve(flags: dict[str, Any], file_values: dict[str, Any] | None = None) -> RunConfig:
    """Model defaults, then the file, then flags that were given (None means not given)."""
    model = flags.get("model") or (file_values or {}).get("model") or "mlp_resnet"
    values: dict[str, Any] = {"model": model, **MODEL_DEFAULTS.get(model, {})}
    for source in (file_values or {}, {k: v for k, v in flags.items() if v is not None}):
        for k, v in source.items():
            values[k] = {**values.get(k, {}), **v} if isinstance(v, dict) else v
    cfg = RunConfig(**values)
    cfg.validate()
    return cfg


def default_text(name: str) -> str:
    """The real default of a field for --help: the schema's, and the models' own where they differ."""
    default = FIELDS[name].default
    def show(v: Any) -> str:
        return v if isinstance(v, str) else _show(v)

    text = FIELDS[name].metadata["shown"] or ("off" if default is None else show(default))
    own = {m: d[name] for m, d in MODEL_DEFAULTS.items() if name in d and d[name] != default}
    if own:
        text += "; " + ", ".join(f"{m} {show(v)}" for m, v in own.items())
    return text
