"""python -m zoo.papers list | run NAME [--quick] [--out DIR] | render NAME [--out DIR]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import zoo.papers as papers


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m zoo.papers", description="The source papers' claims, regenerated.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every claim with its source")
    for name, text in (("run", "run a claim and write DIR/NAME/ (figure, results.json, README.md) and DIR/README.md"),
                       ("render", "redraw DIR/NAME/'s figure and page from its results.json")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("name", metavar="NAME")
        cmd.add_argument("--out", type=Path, default=papers.DEFAULT_OUT, metavar="DIR",
                         help=f"root of the claims' folders (default {papers.DEFAULT_OUT})")
        if name == "run":
            cmd.add_argument("--quick", action="store_true", help="the tiny version (seconds; what the tests run)")
    args = p.parse_args(argv)
    try:
        if args.command == "list":
            for claim in papers.CLAIMS.values():
                print(f"{claim.name:22s} {claim.source}: {claim.title}")
            return 0
        if args.command == "render":
            papers.render(papers.get(args.name), args.out)
            print(f"{args.out / args.name}")
            return 0
        folder = papers.run(args.name, args.quick, args.out)
    except (ValueError, FileNotFoundError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    record = papers.page.read(folder)
    print(f"{args.name}: {record['verdict']} -> {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
