"""`python train.py`: the command line over zoo.train.loop, built from the RunConfig schema (zoo.config), so the
flags, the config files and --help share one definition. Bad input gets one line and a non-zero exit."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from zoo.config import FIELDS, HINTS, base_type, default_text, read_file, resolve

OPTIMIZER_FLAGS = ("optimizer", "schedule", "warmup", "min_lr_ratio", "b1", "b2", "eps", "weight_decay",
                   "clip_norm", "clip_rms")
MULTI_HOST_FLAGS = ("coordinator", "num_processes", "process_id", "timeout_s")


def _kv(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    k, v = text.split("=", 1)
    return k.strip().replace("-", "_"), v.strip()


def _model_value(v: str) -> Any:
    """Model options from the CLI: ints, floats, booleans, or strings."""
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def _bool(text: str) -> bool:
    value = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value


def add_flags(p: argparse.ArgumentParser, names: Iterable[str], defaults: bool = True) -> None:
    """One flag per RunConfig field, typed and documented by the schema; `defaults`: say the real default."""
    for name in names:
        f, base = FIELDS[name], base_type(HINTS[name])
        help_text = f.metadata["help"]
        if defaults and base is not dict:
            help_text += f" (default: {default_text(name)})"
        flag = "--" + name.replace("_", "-")
        kwargs: dict[str, Any] = {"help": help_text.replace("%", "%%"), "metavar": f.metadata["metavar"]}
        if base is dict:
            p.add_argument(flag, action="append", type=_kv, **kwargs)
        elif base is bool:
            p.add_argument(flag, nargs="?", const=True, type=_bool, **{**kwargs, "metavar": "true|false"})
        else:
            p.add_argument(flag, type=base, **kwargs)


def add_optimizer_flags(p: argparse.ArgumentParser) -> None:
    """The optimizer flags of train.py and zoo.sweep (RunConfig fields; the LR is each tool's own)."""
    add_flags(p, OPTIMIZER_FLAGS)


def parser() -> argparse.ArgumentParser:
    import zoo.models
    import zoo.param

    p = argparse.ArgumentParser(
        prog="train.py", argument_default=None, allow_abbrev=False,
        description="Train a zoo model under a parametrization plugin. Flags override --config, which overrides "
        "the model's defaults. Rerunning the same command in the same run dir resumes; a rerun whose settings "
        "differ is refused (use --fork-from in a new run dir).")
    p.add_argument("--config", help="YAML or JSON file of options (keys as the flags, with _ or -), e.g. "
                   "configs/run.yaml")
    p.add_argument("--model", help=f"one of {', '.join(zoo.models.names())} (default: mlp_resnet)")
    p.add_argument("--param", help=f"parametrization plugin: {', '.join(zoo.param.names())} (default: sp)")
    add_flags(p, [n for n in FIELDS if n not in ("model", "param")])
    g = p.add_argument_group("multi-host (or JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID, "
                             "ZOO_COORDINATOR_TIMEOUT)")
    g.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0's coordinator")
    g.add_argument("--num-processes", type=int, help="number of processes (hosts)")
    g.add_argument("--process-id", type=int, help="this process's index, 0 .. num-processes - 1")
    g.add_argument("--coordinator-timeout", dest="timeout_s", type=float, metavar="SECONDS",
                   help="give up when not every process has reached the coordinator after this long (default: 300)")
    return p


def config_from_args(args: argparse.Namespace) -> Any:
    """The resolved RunConfig of parsed flags and their --config file."""
    flags = {k: v for k, v in vars(args).items() if k in FIELDS}
    flags["param_opt"] = dict(args.param_opt or [])
    flags["model_opt"] = {k: _model_value(v) for k, v in (args.model_opt or [])}
    return resolve(flags, read_file(args.config) if args.config else None)


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    from zoo.train.errors import exit_on_error

    with exit_on_error():
        cfg = config_from_args(args)
        from zoo.train import backend, distributed
        from zoo.train.loop import train

        distributed.initialize(**{k: getattr(args, k) for k in MULTI_HOST_FLAGS})
        backend.check()
        train(cfg)


if __name__ == "__main__":
    main()
