"""`python -m zoo.policy list | run NAME [--quick] [--out DIR] | render NAME [--out DIR]`: the scaling policies'
pages (zoo.policy.pages), run and rendered as `python -m zoo.papers` runs the source papers' claims; each writes
DIR/NAME/ (figure.png, results.json, README.md) and the index DIR/README.md (default DIR: docs/policies).

    python -m zoo.policy list
    python -m zoo.policy run sde-batch                       # into docs/policies/sde-batch/
    python -m zoo.policy run fit-width --quick --out /tmp/p  # the tiny version
"""

from __future__ import annotations

from zoo.cli.boundary import boundary
from zoo.cli.papers import command


@boundary
def main(argv: list[str] | None = None) -> None:
    from zoo.policy.pages import SHELF

    command(argv, SHELF)
