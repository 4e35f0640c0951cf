"""`python train.py`: train a zoo model under a parametrization plugin (zoo.train.loop.train), with the
diagnostics the flags ask for as hooks."""

from __future__ import annotations

import argparse
import os
import sys

import yaml

from zoo.cli.boundary import boundary
from zoo.cli.flags import (
    Once,
    Parser,
    add_allow_import,
    add_compile_cache,
    add_settings,
    finite,
    integer,
    path_arg,
    settings,
)
from zoo.config import FLAT, RunConfig, resolve
from zoo.config_file import read_file
from zoo.train import distributed

MULTI_HOST = ("coordinator", "num_processes", "process_id", "timeout_s")


def parser() -> argparse.ArgumentParser:
    import zoo.models
    import zoo.param

    p = Parser(prog="train.py", description="Train a zoo model under a parametrization plugin. Flags override "
               "--config, which overrides the model's recipe. Rerunning the same command in the same run dir "
               "resumes; a rerun whose settings differ is refused (use --fork-from in a new run dir).")
    p.add_argument("--config", type=path_arg, action=Once, help="YAML or JSON file of settings (flat, keys as the "
                   "flags with _ or -, or nested by part: model, param, optim, data, loop), e.g. configs/run.yaml")
    p.add_argument("--print-config", action="store_true", help="print the resolved settings as YAML and exit (the "
                   "data is not read nor the model built: what they refuse is refused when training starts)")
    add_compile_cache(p)
    add_settings(p, FLAT)
    add_allow_import(p)
    for action in p._actions:  # the registries' names in the help of --model and --param
        if action.dest == "model":
            action.help = f"one of {', '.join(zoo.models.names())}, or module:Class (default: mlp_resnet)"
        elif action.dest == "param":
            action.help = f"one of {', '.join(zoo.param.names())}, or module:Class (default: sp)"
    g = p.add_argument_group("multi-host (or JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID, "
                             "ZOO_COORDINATOR_TIMEOUT)")
    g.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0's coordinator")
    g.add_argument("--num-processes", type=integer, help="number of processes (hosts)")
    g.add_argument("--process-id", type=integer, help="this process's index, 0 .. num-processes - 1")
    g.add_argument("--coordinator-timeout", dest="timeout_s", type=finite, metavar="SECONDS",
                   help="give up when not every process has reached the coordinator after this long (default: 300)")
    return p


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The resolved RunConfig of parsed flags and their --config file."""
    return resolve(settings(args, FLAT), read_file(args.config) if args.config else None)


def check_mesh_fits(cfg: RunConfig, args: argparse.Namespace) -> None:
    """Refuse a --mesh whose sizes data x fsdp x tensor cannot equal the device count here, as training would (its
    form is checked with the config). A process that joins a multi-host run (--coordinator, or
    JAX_COORDINATOR_ADDRESS) knows the run's devices only once joined, so its mesh is checked then."""
    if cfg.loop.mesh is None or args.coordinator or os.environ.get(distributed.ENV["coordinator"]):
        return
    import jax

    from zoo.train import backend, mesh

    backend.check()
    mesh.parse(cfg.loop.mesh, jax.device_count())


def built_model(cfg: RunConfig) -> str:
    """The model config the settings build, as YAML comments (the file stays one --config reads): the sizes and
    options left to the model's defaults (width: null) are there as numbers; the data's facts are left out."""
    import dataclasses

    from zoo.train.setup import DATA_FACTS, model_config

    fields = {k: v for k, v in dataclasses.asdict(model_config(cfg)).items() if k not in DATA_FACTS}
    text = yaml.safe_dump({cfg.model.name: fields}, sort_keys=False)
    return (f"# the model these settings build ({', '.join(DATA_FACTS)}: the data's):\n"
            + "".join(f"#   {line}\n" for line in text.splitlines()))


@boundary(joins=True, interrupted="interrupted (Ctrl-C) before training started; nothing was saved")
def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    cfg = config_from_args(args)
    if args.print_config:
        from zoo.train.setup import check_size_options

        check_size_options(cfg)  # as training would refuse it (the checks that need the data are left out)
        check_mesh_fits(cfg, args)
        sys.stdout.write(yaml.safe_dump(cfg.to_json(), sort_keys=False) + built_model(cfg))
        return
    from zoo.diagnostics.hooks import diagnostics_hooks
    from zoo.train import compile_cache
    from zoo.train.loop import train

    distributed.initialize(**{k: getattr(args, k) for k in MULTI_HOST})
    compile_cache.use(args.compile_cache)
    train(cfg, hooks=diagnostics_hooks(cfg))  # starts the backend after the join, as JAX requires
