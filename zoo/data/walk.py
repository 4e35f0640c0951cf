"""The files under a folder, through linked folders too."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def files_under(root: Path) -> Iterator[Path]:
    """Every file under `root`, through linked folders (os.walk and Path.rglob follow none by default, so a folder
    linked in from elsewhere, as subsets of ImageNet are made, was skipped without a word), except a link to a
    folder above it, which would loop."""
    for dirpath, dirs, files in os.walk(root, followlinks=True):
        here = Path(os.path.realpath(dirpath))
        dirs[:] = [d for d in dirs if not here.is_relative_to(os.path.realpath(os.path.join(dirpath, d)))]
        yield from (Path(dirpath) / f for f in files)
