"""`python -m zoo.export RUN_DIR --out DIR [--step N]`: a run in SP form (orbax + safetensors + config).
Bad input: one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
import sys

from zoo.export import export
from zoo.train.checkpoint import CheckpointError


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m zoo.export", description=__doc__.split("\n")[0].split(": ", 1)[1])
    p.add_argument("run_dir", help="a zoo run directory (config.json and checkpoints/)")
    p.add_argument("--out", required=True, help="a new (or empty) directory for the export")
    p.add_argument("--step", type=int, default=None, help="the checkpoint step (default: the latest)")
    args = p.parse_args(argv)
    try:
        export(args.run_dir, args.out, args.step)
    except (ValueError, FileNotFoundError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
