"""The configuration of a training run, in typed parts: model, param (the plugin), optim, data and loop (levanter
nests its TrainerConfig the same way). One schema serves flags, config files and defaults (the model's recipe <
config file < command-line flags), and says which settings are the run's *identity*: every setting that shapes
the trajectory. A rerun in a run dir is refused when an identity setting differs; `--fork-from` continues a run's
state under new settings in a new run dir.

Every setting has one flat name, its flag (`--lr`, `--model-opt`), which config files may use at the top level;
files may also nest by part (`optim: {lr: 3e-3}`, `model: {name: gpt, width: 512}`). Run dirs store the nested
form. A config is a frozen value: resolution and setup return new configs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import typing
from pathlib import Path
from typing import Any

from zoo import settings_file
from zoo.data.config import DataConfig
from zoo.files import path_name_problem
from zoo.optim import SCHEDULE_READS, USED_BY, OptimConfig, default_eps
from zoo.option_defaults import changed_settings
from zoo.schedule import longest_warmup, outlasts, warmup_span
from zoo.schema import NON_NEGATIVE, POSITIVE, SEED, check_settings, check_type, compute_dtype, flag_name, setting
from zoo.train.mesh import given_axes


@dataclasses.dataclass(frozen=True)
class ModelPart:
    name: str = setting("mlp_resnet", "model name (a registered name or module:Class)", flag="model")
    width: int | None = setting(None, "model width n", shown="the model's", check=POSITIVE)
    depth: int | None = setting(None, "number of blocks L", shown="the model's", check=POSITIVE)
    base_width: int | None = setting(None, "base width n0 at which every plugin equals SP",
                                     shown="the model's default width", check=POSITIVE)
    base_depth: int | None = setting(None, "base depth L0", shown="the model's default depth", check=POSITIVE)
    options: dict[str, Any] = setting({}, "model config option, repeatable (e.g. activation=abs)", flag="model_opt",
                                      metavar="K=V")

    def __post_init__(self):
        check_settings(self)
        if self.options:  # typed by the model's config: `--model-opt head_dim=16` is the recipe's head_dim 16
            import zoo.models

            object.__setattr__(self, "options", zoo.models.stored_options(self.name, self.options))


@dataclasses.dataclass(frozen=True)
class ParamPart:
    name: str = setting("sp", "parametrization plugin (a registered name or module:Class)", flag="param")
    options: dict[str, Any] = setting({}, "plugin option, repeatable (e.g. alpha=1)", flag="param_opt",
                                      metavar="K=V")

    def __post_init__(self):
        check_settings(self)
        if self.options:  # typed by the plugin: `--param-opt alpha=1` is a file's alpha: 1.0
            import zoo.param

            object.__setattr__(self, "options", zoo.param.stored_options(self.name, self.options))

    def __str__(self) -> str:
        """The plugin as a user names it: `depth_mup` or `depth_mup(alpha=1)`, each value as --param-opt takes it."""
        options = ", ".join(f"{k}={word(v)}" for k, v in sorted(self.options.items()))
        return f"{self.name}({options})" if options else self.name


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    steps: int | None = setting(None, "training steps (the run's horizon)", shown="the model's", check=POSITIVE)
    epochs: float | None = setting(None, "training epochs in place of --steps (the model's steps)", identity=False,
                                   check=POSITIVE)
    batch_size: int = setting(128, "global batch size (split over the devices)", check=POSITIVE)
    eval_batch_size: int = setting(500, "eval batch size", identity=False, check=POSITIVE)
    grad_accum: int = setting(1, "microbatches per step, scanned inside the jitted step (the batch is split K ways)",
                              identity=False, check=POSITIVE)
    seed: int = setting(0, "seed of init, data order and dropout", check=SEED)
    label_smoothing: float = setting(0.0, "train against (1 - e) labels + e uniform (Szegedy et al. 2016)",
                                     check=(lambda v: 0 <= v < 1, "must be in [0, 1)"), metavar="E")
    precision: str = setting("f32", "compute precision (params stay f32)", choices=("f32", "bf16"))
    mesh: str | None = setting(None, "device mesh data=D,fsdp=F,tensor=T (product = device count)", identity=False,
                               metavar="AXES", shown="data = all devices")
    remat: str = setting("none", "block: rematerialise each block in the backward pass (less memory)",
                         identity=False, choices=("none", "block"))
    run_dir: str | None = setting(None, "where checkpoints, metrics.jsonl and plots go", identity=False,
                                  shown="runs/<model>_<param>_w<width>_d<depth>_s<seed>")
    init_from: str | None = setting(None, "a run dir whose latest params initialise this run (finetuning)")
    fork_from: str | None = setting(None, "continue RUN_DIR[:STEP]'s full state (params, optimizer moments, step, "
                                    "data position) under this command's settings, in a new run dir",
                                    metavar="RUN_DIR[:STEP]")
    eval_every: int = setting(500, "eval every N steps", identity=False, check=POSITIVE)
    eval_iters: int = setting(0, "at each eval also estimate the train and eval splits' losses as nanoGPT does: the "
                              "mean over N random batches of --batch-size each (sampled_loss, train_sampled_loss); "
                              "0: off", identity=False, check=NON_NEGATIVE)
    ckpt_every: int = setting(500, "checkpoint every N steps", identity=False, check=POSITIVE)
    log_every: int = setting(10, "log train metrics every N steps", identity=False, check=POSITIVE)
    keep: int = setting(3, "checkpoints to keep", identity=False, check=POSITIVE)
    max_loss_ratio: float = setting(10.0, "stop when the train loss exceeds this times the first logged loss "
                                    "(0 disables)", identity=False, check=NON_NEGATIVE)
    diversity: float | None = setting(None, "at each eval also log the feature-diversity slope of the residual "
                                      "stream at depth fraction LAMBDA (Depth-muP; ~0.5 with diverse features, ~1 "
                                      "when redundant)", identity=False, metavar="LAMBDA",
                                      check=(lambda v: 0 <= v < 1, "is a depth fraction in [0, 1)"))

    def __post_init__(self):
        check_settings(self)
        for name in ("run_dir", "init_from", "fork_from"):  # `run_dir: ~/runs/a` in a file made ./~/runs/a
            if getattr(self, name):
                if (why := path_name_problem(getattr(self, name))) is not None:
                    raise ValueError(f"--{name.replace('_', '-')} cannot name a file: {why}")
                object.__setattr__(self, name, os.path.expanduser(getattr(self, name)))
        if self.batch_size % self.grad_accum:
            raise ValueError(f"--batch-size {self.batch_size} is not divisible by --grad-accum {self.grad_accum}")
        if self.init_from and self.fork_from:
            raise ValueError("--init-from and --fork-from exclude each other: finetune from params, or fork a state")
        given_axes(self.mesh)  # its form; whether it fits the devices is known once they are (zoo.train.mesh.parse)

    def model_facts(self) -> dict[str, tuple[str, Any]]:
        """The model options the loop's settings set: option -> (the setting, the option's value)."""
        return {"dtype": ("precision", compute_dtype(self.precision)), "remat": ("remat", self.remat == "block")}


PARTS: dict[str, type] = {"model": ModelPart, "param": ParamPart, "optim": OptimConfig, "data": DataConfig,
                          "loop": LoopConfig}
PART_TITLES = {"model": "model", "param": "parametrization", "optim": "optimizer", "data": "data",
               "loop": "training loop"}
# flat name (the flag, underscores) -> (part, field)
FLAT: dict[str, tuple[str, dataclasses.Field]] = {
    flag_name(f): (part, f) for part, cls in PARTS.items() for f in dataclasses.fields(cls)}
HINTS: dict[str, Any] = {name: typing.get_type_hints(PARTS[part])[f.name] for name, (part, f) in FLAT.items()}


@dataclasses.dataclass(frozen=True)
class RunConfig:
    model: ModelPart = dataclasses.field(default_factory=ModelPart)
    param: ParamPart = dataclasses.field(default_factory=ParamPart)
    optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    loop: LoopConfig = dataclasses.field(default_factory=LoopConfig)

    @classmethod
    def from_flat(cls, values: dict[str, Any]) -> RunConfig:
        """A config from flat settings (flag names with underscores); left-out settings take their defaults."""
        unknown = sorted(set(values) - set(FLAT))
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(unknown)}")
        parts: dict[str, dict[str, Any]] = {part: {} for part in PARTS}
        for name, value in values.items():
            part, f = FLAT[name]
            parts[part][f.name] = value
        return cls(**{part: PARTS[part](**kw) for part, kw in parts.items()})

    def flat(self) -> dict[str, Any]:
        """Every setting by its flat name."""
        return {name: getattr(getattr(self, part), f.name) for name, (part, f) in FLAT.items()}

    def replace(self, **flat: Any) -> RunConfig:
        """A new config with the given flat settings changed."""
        return RunConfig.from_flat({**self.flat(), **flat})

    def to_json(self) -> dict[str, Any]:
        """The nested form run dirs store (JSON types: tuples as lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_json(cls, values: dict[str, Any], where: str = "the config") -> RunConfig:
        """A config from its stored form, nested or flat; settings a newer zoo added take their defaults, settings
        an older one had are ignored."""
        flat = flatten(settings_file.shallow(values, where), where, strict=False)
        typed = {k: check_type(f"{where}: {k}", v, HINTS[k]) for k, v in flat.items()}
        names_no_code(typed, where)
        return cls.from_flat(typed)

    def identity(self) -> dict[str, Any]:
        """The settings that shape the trajectory, by flat name (`steps` too: the schedule and last checkpoint)."""
        flat = self.flat()
        return {name: flat[name] for name, (_, f) in FLAT.items() if f.metadata["identity"]}

    def run_dir(self) -> str:
        """--run-dir, or by default runs/MODEL_PARAM_wWIDTH_dDEPTH_sSEED."""
        m = self.model
        return self.loop.run_dir or str(Path("runs") / f"{m.name}_{self.param.name}_w{m.width}_d{m.depth}_s"
                                                         f"{self.loop.seed}")


# settings whose values an older zoo stored in another form: augment was true (pad-crop-flip) or false
LEGACY = {"augment": {True: "crop,flip", False: "none"}}


def flatten(values: dict[str, Any], where: str, strict: bool = True) -> dict[str, Any]:
    """Flat settings from a mapping that is flat (flag names, dashes or underscores) or nested by part; `strict`:
    unknown settings are an error (else ignored). A LEGACY value is read as its present form."""
    out: dict[str, Any] = {}
    given_as: dict[str, str] = {}

    def put(name: str, value: Any, written: str) -> None:
        if strict and name in given_as:  # lr and optim.lr, or lr and --lr: the one read last would win silently
            raise ValueError(f"{where}: {name} is given twice, as {given_as[name]} and as {written}; give it once")
        if isinstance(value, bool) and name in LEGACY:
            value = LEGACY[name][value]
        out[name], given_as[name] = value, written

    for raw, value in values.items():
        key = str(raw).replace("-", "_")
        if key in PARTS and isinstance(value, dict):
            fields = {f.name: flag_name(f) for f in dataclasses.fields(PARTS[key])}
            for raw_k, v in value.items():
                k = str(raw_k).replace("-", "_")
                name = fields.get(k) or (k if FLAT.get(k, ("",))[0] == key else None)
                if name is None:
                    if strict:
                        raise ValueError(f"{where}: {key} has no setting {key_name(k)}; its settings are "
                                         f"{', '.join(fields)}")
                    continue
                put(name, v, f"{raw}.{raw_k}")
        elif key in FLAT:
            put(key, value, str(raw))
        elif strict:  # a part that is no mapping (`loop: 5`) was called an unknown option
            raise ValueError(f"{where}: " + (f"{key} holds settings (a mapping), not {type(value).__name__}"
                                             if key in PARTS else f"unknown option(s) {key_name(key)}"))
    return out


def key_name(key: str) -> str:
    """A key of a file as an error line shows it: a name as settings are named (letters, digits, _ . -; up to 64
    characters), else not at all. A file given by mistake (--config /etc/shadow) read as one key, its first entry,
    which the line printed."""
    if re.fullmatch(r"[A-Za-z_][\w.-]{0,63}", key):
        return repr(key)
    return f"(a key of {len(key)} characters that is no setting's name, not shown: is it a config file?)"


def names_no_code(flat: dict[str, Any], where: str) -> None:
    """The model and plugin a file (`where`) names are registered or installed, or allowed by the user
    (zoo.registry.Registry.refuse_code): a file never names code to import."""
    import zoo.models
    import zoo.param

    for key, registry in (("model", zoo.models.MODELS), ("param", zoo.param.PLUGINS)):
        if isinstance(flat.get(key), str):
            registry.refuse_code(flat[key], where)


def resolve(flags: dict[str, Any], file_values: dict[str, Any] | None = None) -> RunConfig:
    """The model's recipe, then the file, then the flags given (None: not given; option mappings merge; epochs given
    replace the steps before them, and steps the epochs; an augment given the augment options before it but a file's
    given without one; synthetic data takes no augmentation but one given). Model and plugin checked before data."""
    import zoo.models
    import zoo.param

    file_values = file_values or {}
    model = flags.get("model") or file_values.get("model") or FLAT["model"][1].default
    recipe = zoo.models.recipe(model)
    values: dict[str, Any] = {"model": model, **recipe}
    for source in (file_values, {k: v for k, v in flags.items() if v is not None}):
        if source.get("augment") is not None:  # the options before it were for other ops, but a file's own
            mine = source is not file_values and file_values.get("augment") is None  # (given without its ops)
            values["augment_opt"] = (file_values.get("augment_opt") or {}) if mine else {}  # are for the ops given
        if source.get("epochs") is not None:  # the horizon in epochs replaces the steps of the recipe or file
            if source.get("steps") is not None:
                where = " (both in the config file)" if source is file_values else ""
                raise ValueError(f"--steps and --epochs exclude each other{where}: give the horizon in steps or in "
                                 "epochs")
            values.pop("steps", None)
        elif source.get("steps") is not None:  # and steps the epochs of the file
            values.pop("epochs", None)
        for k, v in source.items():
            values[k] = {**values.get(k, {}), **v} if isinstance(v, dict) else v
    if str(values.get("data", "")).startswith("synthetic") and all(s.get("augment") is None
                                                                    for s in (file_values, flags)):
        if any(s.get("augment_opt") for s in (file_values, flags)):
            raise ValueError("--augment-opt sets options of --augment's ops, and synthetic data is augmented only by "
                             "an --augment given: leave it out, or give --augment")
        values.pop("augment", None)  # the recipe's augmentation presumes natural images, whose labels survive crops,
        values.pop("augment_opt", None)  # flips and mixing; a synthetic set's (a teacher's, or random) do not
    if file_eps_is_a_default(file_values, flags, recipe):
        values.pop("eps")  # the new optimizer's own
    cfg = RunConfig.from_flat(values)
    given = {k for k, v in flags.items() if v is not None} | {  # a file's setting that repeats the recipe's (or the
        k for k, v in file_values.items() if v is not None and recipe.get(k, _default(k)) != v}  # default) is not
    # given: a run's config.json holds them all, and its `remat: none` refused its own `--model-opt remat=true`
    check_used(given, cfg)
    check_warmup(cfg, flags, file_values, recipe)
    recorded = zoo.param.get(cfg.param.name, **cfg.param.options).recorded_options(cfg.param.options)
    check_model_facts(cfg, given)
    return cfg if recorded == cfg.param.options else cfg.replace(param_opt=recorded)


def _default(name: str) -> Any:
    f = FLAT[name][1]
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def check_model_facts(cfg: RunConfig, given: set[str]) -> None:
    """Refuse a model option that a loop setting sets (LoopConfig.model_facts) where the two differ: `--model-opt
    dtype=bfloat16 --precision f32` computed in bf16 without a word (the option won, while the run recorded f32). An
    identity setting (--precision: it changes every number) is checked always; --remat (the same losses, less
    memory) where given (by a flag, or a file with another value than the default: a run's config.json holds
    `remat: none` beside its own option), as the commands without it take the option for it."""
    import zoo.models

    options = zoo.models.options(cfg.model.name, cfg.model.options)  # typed; an unknown option is refused here
    for name, (loop_setting, value) in cfg.loop.model_facts().items():
        checked = FLAT[loop_setting][1].metadata["identity"] or loop_setting in given
        if checked and name in options and options[name] != value:
            flag = f"--{loop_setting}"
            raise ValueError(f"--model-opt {name}={word(options[name])} contradicts {flag} "
                             f"{getattr(cfg.loop, loop_setting)} (which sets {name}={word(value)}): leave out "
                             f"--model-opt {name}, {flag} sets it")


def file_eps_is_a_default(file_values: dict[str, Any], flags: dict[str, Any], recipe: dict[str, Any]) -> bool:
    """Whether the file's eps is only its optimizer's default (as a run's config.json holds it) under a flag that
    changes the optimizer: a config.json of an Adafactor run holds eps 1e-30, which `--optimizer adam` then took
    silently (Adam's default is 1e-8), and an Adam run's 1e-8 became Adafactor's eps1 (its default 1e-30)."""
    old = file_values.get("optimizer") or recipe.get("optimizer") or FLAT["optimizer"][1].default
    new = flags.get("optimizer") or old
    return (flags.get("eps") is None and new != old and file_values.get("eps") is not None
            and file_values["eps"] == default_eps(old))


def check_used(given: set[str], cfg: RunConfig) -> None:
    """Refuse an optimizer setting given (by a flag or the file) that the run's optimizer or schedule does not read:
    `--optimizer sgd --b1 0.5` trained as if --b1 were not there."""
    for name in cfg.optim.unused(given):
        flag = "--" + name.replace("_", "-")
        if name == "decay_vectors":
            raise ValueError(f"{flag} widens the weight decay, and the run has none: leave it out, or give one")
        if name in SCHEDULE_READS:
            reads = SCHEDULE_READS[name]
            what = "is where the decaying schedules end" if name == "min_lr_ratio" else "is read by --schedule wsd"
            raise ValueError(f"{flag} {what}; --schedule {cfg.optim.schedule} does not read it: leave it out, or give "
                             f"--schedule {' or '.join(reads)}")
        raise ValueError(f"{flag} is read only by --optimizer {' / '.join(USED_BY[name])}; --optimizer "
                         f"{cfg.optim.name} does not read it: leave it out")


def check_warmup(cfg: RunConfig, flags: dict[str, Any], file_values: dict[str, Any], recipe: dict[str, Any]) -> None:
    """Refuse a warmup longer than the run, where it was set with the run's length in view: by a flag, or by the
    config file when no flag shortened the file's steps (the factor (t + 1) / D, D = zoo.schedule.warmup_span, would
    end below 1, the peak --lr never reached). A warmup set for a longer run is left as it is under a shorter
    --steps: the recipe's, a file's (configs/gpt2_124m.yaml's 2000 under --steps 2), and a file's that equals the
    recipe's (a run's config.json holds it). A horizon in --epochs is known only once the data is loaded.
    --warmup-peak given without a warmup is refused: it shapes nothing (a file's too, where not the recipe's)."""
    steps, warmup, span = cfg.loop.steps, cfg.optim.warmup, warmup_span(cfg.optim)
    peak_by_file = file_values.get("warmup_peak") not in (None, recipe.get("warmup_peak", "last"))
    if warmup == 0 and (flags.get("warmup_peak") is not None or peak_by_file):
        raise ValueError(f"--warmup-peak {cfg.optim.warmup_peak} shapes the warmup, and the run has none (--warmup "
                         "0): leave it out, or give --warmup")
    by_file = file_values.get("warmup") not in (None, recipe.get("warmup", 0)) and flags.get("steps") is None
    if (flags.get("warmup") is not None or by_file) and steps is not None and span > steps:
        longest = longest_warmup(cfg.optim, steps)
        fix = (f"give --warmup {longest} or less" if longest > 0 else
               f"give more --steps, or leave out --warmup-peak {cfg.optim.warmup_peak}")  # --warmup 0 refuses it
        raise ValueError(f"--warmup {warmup} {outlasts(warmup, steps)}: the LR would end at {steps / span:.3g} of its "
                         f"peak --lr; {fix}")


def identity_changes(old: dict[str, Any], new: RunConfig) -> list[str]:
    """`name: old -> new` for each identity setting that differs; `old` is a stored config (nested or flat), a
    setting it lacks read as `from_json` reads it, as its default (zoo's behaviour before the setting existed)."""
    before = json.loads(json.dumps(RunConfig.from_json(old, "the stored config").identity()))
    now = json.loads(json.dumps(new.identity()))  # as config.json holds them (tuples as lists)
    changed = changed_settings(before, now)
    return [f"{k} {_show(before[k])} -> {_show(v)}" for k, v in now.items() if k in changed]


def word(v: Any) -> str:
    """An option's value as a command line gives it (false, not False; 1 for 1.0; a list comma-separated)."""
    if isinstance(v, (list, tuple)):
        return ",".join(map(word, v))
    if isinstance(v, float):
        return f"{v:g}" if float(f"{v:g}") == v else repr(v)  # 1 for 1.0; 0.123456789 kept whole
    return str(v).lower() if isinstance(v, bool) else str(v)


def _show(v: Any) -> str:
    if isinstance(v, (dict, str, bool)) or v is None:
        return json.dumps(v)
    return f"{v:g}" if isinstance(v, float) else str(v)


def default_text(name: str) -> str:
    """The real default of a setting for --help: the schema's, and the models' own where they differ."""
    import zoo.models

    f = FLAT[name][1]
    default = f.default if f.default is not dataclasses.MISSING else None

    def show(v: Any) -> str:
        return v if isinstance(v, str) else _show(v)

    text = f.metadata["shown"] or ("off" if default is None else show(default))
    own = {m: r[name] for m, r in zoo.models.recipes().items() if name in r and r[name] != default}
    if own:
        text += "; " + ", ".join(f"{m} {show(v)}" for m, v in own.items())
    return text

