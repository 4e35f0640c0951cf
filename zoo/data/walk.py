"""The files under a folder, through linked folders too."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def files_under(root: Path) -> Iterator[Path]:
    """Every file under `root`, through linked folders (os.walk and Path.rglob follow none by default, so a folder
    linked in from elsewhere, as subsets of ImageNet are made, was skipped without a word). A link is not followed
    where it would loop: to a folder that holds the folder it is in (a link to '..' or '/'), or to one the walk
    came through on its way there (A/toB -> B, B/toA -> A)."""
    above: dict[str, frozenset[str]] = {}  # a folder to walk -> the real paths the walk came through to it
    for dirpath, dirs, files in os.walk(root, followlinks=True):
        here = os.path.realpath(dirpath)
        path = above.pop(dirpath, frozenset()) | {here}
        kept = []
        for d in dirs:
            real = os.path.realpath(os.path.join(dirpath, d))
            if real not in path and not Path(here).is_relative_to(real):
                above[os.path.join(dirpath, d)] = path
                kept.append(d)
        dirs[:] = kept
        yield from (Path(dirpath) / f for f in files)
