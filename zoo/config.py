"""The resolved configuration of a training run: per-model defaults < config file < command-line flags."""

from __future__ import annotations

import dataclasses
import json
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
# Fields that define the state of a run: resuming with different values is refused.
IDENTITY = ("model", "param", "param_opt", "width", "depth", "base_width", "base_depth", "model_opt", "optimizer",
            "data", "seq_len", "byte_level", "batch_size", "seed", "precision")


@dataclasses.dataclass
class RunConfig:
    model: str = "mlp_resnet"
    param: str = "sp"
    param_opt: dict[str, Any] = dataclasses.field(default_factory=dict)
    width: int | None = None
    depth: int | None = None
    base_width: int | None = None
    base_depth: int | None = None
    model_opt: dict[str, Any] = dataclasses.field(default_factory=dict)
    optimizer: str = "adam"
    lr: float = 1e-3
    schedule: str = "constant"
    warmup: int = 0
    min_lr_ratio: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float | None = None
    clip_norm: float | None = None
    clip_rms: float | None = None
    steps: int | None = None
    epochs: float | None = None
    batch_size: int = 128
    eval_batch_size: int = 500
    data: str = "cifar10"
    data_dir: str | None = None
    seq_len: int = 256
    byte_level: bool = False
    augment: bool = False
    run_dir: str | None = None
    init_from: str | None = None
    seed: int = 0
    precision: str = "f32"
    eval_every: int = 500
    ckpt_every: int = 500
    log_every: int = 10
    keep: int = 3
    diversity: float | None = None  # depth fraction lambda at which eval also measures feature diversity

    def validate(self) -> None:
        if self.precision not in ("f32", "bf16"):
            raise ValueError(f"--precision must be f32 or bf16, got {self.precision!r}")
        for name in ("batch_size", "eval_batch_size", "eval_every", "ckpt_every", "log_every", "keep", "seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        for name in ("width", "depth", "base_width", "base_depth", "steps"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}")
        if self.lr <= 0:
            raise ValueError(f"--lr must be positive, got {self.lr}")
        if self.diversity is not None and not 0 <= self.diversity < 1:
            raise ValueError(f"--diversity is a depth fraction in [0, 1), got {self.diversity}")

    def default_run_dir(self) -> str:
        return str(Path("runs") / f"{self.model}_{self.param}_w{self.width}_d{self.depth}_s{self.seed}")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}


def read_file(path: str) -> dict[str, Any]:
    """A YAML or JSON mapping of RunConfig fields (dashes or underscores)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        data = json.loads(p.read_text()) if p.suffix == ".json" else yaml.safe_load(p.read_text())
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"config file {path} is not valid {'JSON' if p.suffix == '.json' else 'YAML'}: "
                         f"{str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a mapping of option: value")
    data = {k.replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ValueError(f"config file {path}: unknown option(s) {', '.join(unknown)}")
    return data


def resolve(flags: dict[str, Any], file_values: dict[str, Any] | None = None) -> RunConfig:
    """Model defaults, then the file, then flags that were given (None means not given)."""
    model = flags.get("model") or (file_values or {}).get("model") or "mlp_resnet"
    values: dict[str, Any] = {"model": model, **MODEL_DEFAULTS.get(model, {})}
    values.update(file_values or {})
    values.update({k: v for k, v in flags.items() if v is not None and v != {}})
    cfg = RunConfig(**values)
    cfg.validate()
    return cfg
