"""`python -m zoo.export RUN_DIR --out DIR [--step N]`: a run in SP form (orbax + safetensors + config), by
zoo.export.export."""

from __future__ import annotations

from zoo.cli.boundary import boundary
from zoo.cli.flags import Once, Parser, add_allow_import, add_compile_cache, path_arg, step
from zoo.train import compile_cache


@boundary
def main(argv: list[str] | None = None) -> None:
    p = Parser(prog="python -m zoo.export", description="Export a run in SP form: every multiplier folded into the "
               "weights (orbax + safetensors + config); its logits are checked against the run's first.")
    p.add_argument("run_dir", type=path_arg, help="a zoo run directory (config.json and checkpoints/)")
    p.add_argument("--out", type=path_arg, action=Once, required=True, help="a new (or empty) directory for the export")
    p.add_argument("--step", type=step, default=None, help="the checkpoint step (default: the latest)")
    add_compile_cache(p)
    add_allow_import(p)
    args = p.parse_args(argv)
    compile_cache.use(args.compile_cache)
    from zoo.export import export

    export(args.run_dir, args.out, args.step)
