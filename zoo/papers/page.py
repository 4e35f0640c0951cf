"""The outputs of a claim: OUT/NAME/figure.png, OUT/NAME/results.json (every number, the checks, the verdict) and
OUT/NAME/README.md (the paper beside zoo), plus the index OUT/README.md of every claim of its shelf found under OUT.

Pages are rendered from results.json's raw numbers only, so `render` reproduces them without rerunning: it
recomputes every fit, the checks and the verdict from those numbers and writes them back into results.json, so
the stored verdict, the figure and the page always say what the numbers say (a claim module stores measurements,
never a fit of them: its checks fit the stored curve). A shelf is a set of claims with its command and index: the
source papers (zoo.papers) and the scaling policies' evidence (zoo.policy.pages).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from zoo.files import jsonable, read_mapping, save_figure, write_atomic
from zoo.papers.claim import Claim, Numbers, verdict

FIGURE, RESULTS, PAGE, INDEX = "figure.png", "results.json", "README.md", "README.md"
STALE = (KeyError, IndexError, TypeError, ValueError)  # what checks raise on numbers of another version


@dataclasses.dataclass(frozen=True)
class Shelf:
    """A set of claims: `module` runs them (`python -m MODULE run NAME`), `claims` names them (a function, read when
    needed), the index has `title` and `intro`; full runs go to `out`, quick ones to `quick_out`."""

    module: str
    title: str
    intro: str
    claims: Callable[[], dict[str, Claim]]
    out: Path
    quick_out: Path


def command(name: str, shelf: Shelf, quick: bool = False, out: Path | None = None) -> str:
    """The command that reruns claim `name` into `out` (named unless it is the default root of a run so quick)."""
    default = shelf.quick_out if quick else shelf.out
    where = f" --out {out}" if out is not None and Path(out) != default else ""
    return f"python -m {shelf.module} run {name}" + (" --quick" if quick else "") + where


def writable(out: Path, name: str, shelf: Shelf, quick: bool = False) -> None:
    """Refuses an output root that cannot be created or written, or where claim `name`'s folder or files cannot go,
    before the experiment runs (not after an hour); one with a README.md that is not the shelf's index or the
    claim's page (`check_ours`); and, for a quick run, one that holds the claim's full run, which it would replace."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"the output root {out} is a file, not a folder")
    check_ours(out, name, shelf)
    if quick and (out / name / RESULTS).is_file() and read_mapping(out / name / RESULTS, "a claim's results",
                                                                   "rerun the claim").get("quick") is False:
        raise FileExistsError(f"{out / name} holds {name}'s full run, which a --quick run would replace: give "
                              f"another --out (the quick runs' default is {shelf.quick_out})")
    folder = out / name
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file, where the claim's folder goes")
    for path in (out / INDEX, folder / RESULTS, folder / FIGURE, folder / PAGE):
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a folder, where the claim writes a file")
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as e:
        raise ValueError(f"cannot write under the output root {out}: {e.strerror or e}") from None


def check_ours(out: Path, name: str, shelf: Shelf) -> None:
    """Refuses an output root whose README.md does not start as the shelf's index does (`index`'s title line), or
    whose NAME/README.md does not start as claim `name`'s page does (`page`'s): the index of another shelf given the
    same root, or a file of the user's, which the index or the page would replace."""
    for path, first, what in ((out / INDEX, f"# {shelf.title}\n", f"the index of {shelf.module}'s claims"),
                              (out / name / PAGE, f"# {name}: ", f"{name}'s page")):
        if not path.is_file():
            continue
        with path.open(encoding="utf-8", errors="replace") as f:
            if not f.readline().startswith(first):
                raise FileExistsError(f"{path} is not {what}, which would replace it: give another output root "
                                      f"(default {shelf.out})")


def write(claim: Claim, numbers: Numbers, out: Path, quick: bool, shelf: Shelf) -> Path:
    """results.json from the run's numbers, then everything derived from them (`render`). The checks read the
    numbers as the JSON holds them (NaN as null)."""
    folder = out / claim.name
    folder.mkdir(parents=True, exist_ok=True)
    record = {"claim": claim.name, "quick": quick, "command": command(claim.name, shelf, quick, out),
              "numbers": numbers}
    write_atomic(folder / RESULTS, dump(record))
    render(claim, out, shelf)
    return folder


def render(claim: Claim, out: Path, shelf: Shelf) -> None:
    """From OUT/NAME/results.json's numbers: the checks and the verdict (written back into results.json in place of
    any stored before), the figure, the page, and the index."""
    check_ours(out, claim.name, shelf)
    folder = out / claim.name
    record = read(folder)
    tmp = folder / f".{FIGURE}.tmp.png"
    try:  # numbers of another version (or edited) fail the checks, or only the plot or the page (a list as a scalar)
        checks = claim.checks(record["numbers"])
        claim.plot(record["numbers"], tmp)
        text = page(claim, record["numbers"], checks, record["command"], record.get("quick") is True)
    except STALE as e:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"{folder / RESULTS} does not hold this version's numbers of {claim.name} "
                         f"({type(e).__name__}: {e}): rerun the claim") from None
    derived = {"verdict": verdict(checks), "checks": [dataclasses.asdict(c) for c in checks]}
    write_atomic(folder / RESULTS, dump({**{k: v for k, v in record.items() if k != "numbers"}, **derived,
                                         "numbers": record["numbers"]}))
    os.replace(tmp, folder / FIGURE)
    write_atomic(folder / PAGE, text)
    write_atomic(out / INDEX, index(out, shelf))


def dump(record: dict[str, Any]) -> str:
    return json.dumps(jsonable(record), indent=1) + "\n"


def read(folder: Path) -> dict[str, Any]:
    path = folder / RESULTS
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a claim's results: remove it and run the claim")
    if not path.is_file():
        raise FileNotFoundError(f"no results in {folder} ({RESULTS} is missing): run the claim first")
    record = read_mapping(path, "a claim's results", "rerun the claim")
    if not {"numbers", "command"} <= record.keys() or not isinstance(record["command"], str):
        raise ValueError(f"{path} is not a claim's results (it needs 'numbers' and a 'command' string): rerun the "
                         "claim")
    return record


def page(claim: Claim, numbers: Numbers, checks: list, cmd: str, quick: bool = False) -> str:
    """The claim's README: verdict, figure, the paper's setting and result beside zoo's, the checks, the scale (a
    quick run's page says that its title and scale are the full run's)."""
    v = verdict(checks)
    rows = "\n".join(f"| {_cell(c.claim)} | {_cell(c.rule)} | {_cell(c.measured)} | {'yes' if c.passed else '**no**'} |"
                     for c in checks)
    why = "\n".join(f"- *{c.claim}*: {c.why_not}" for c in checks if not c.passed and c.why_not)
    wall = numbers.get("wall_s")
    took = f" (this run: {wall / 60:.1f} min on {numbers.get('machine', 'this machine')})" if wall else ""
    tiny = "\n*A `--quick` run: the tiny version of the setting (zoo's column below); the title and the scale are " \
        "the full run's, whose numbers the claim is judged by.*\n" if quick else ""
    return f"""# {claim.name}: {claim.title}

Source: {claim.source}.

**Verdict: {v}** ({sum(c.passed for c in checks)} of {len(checks)} checks pass; computed from `results.json` by
`{claim.run.__module__.replace('.', '/')}.py`).
{tiny}
![{claim.name}]({FIGURE})

| | paper | zoo |
|---|---|---|
| setting | {_cell(claim.paper_setting)} | {_cell(claim.setting(numbers))} |
| result | {_cell(claim.paper_result)} | {_cell(claim.result(numbers))} |

## Checks

| claim | rule | measured | passes |
|---|---|---|---|
{rows}
{chr(10) + "Where zoo differs from the paper:" + chr(10) + chr(10) + why + chr(10) if why else ""}
## Scale

{claim.scale}

## Rerun

```bash
{cmd}
```
{took}. Seeds are fixed, so a rerun gives the same numbers up to floating-point differences between machines.
"""


def index(out: Path, shelf: Shelf) -> str:
    """OUT/README.md: every claim of the shelf with a results.json under OUT, its thumbnail, verdict and command."""
    rows = []
    for name, claim in shelf.claims().items():
        folder = out / name
        if not (folder / RESULTS).is_file():
            continue
        try:
            record = read(folder)
            v = verdict(claim.checks(record["numbers"]))
        except STALE:  # not results, or numbers from an older version of the claim
            v, record = "stale: rerun it", {"command": command(name, shelf)}
        # the folder, not its README.md: raw HTML links are not rewritten by the docs site, where the page is name/
        thumb = f'<a href="{name}/"><img src="{name}/{FIGURE}" width="220"></a>'
        rows.append(f"| [{name}]({name}/{PAGE}) | {claim.source} | {thumb} | **{v}** | `{record['command']}` |")
    return (f"# {shelf.title}\n\n{shelf.intro} `python -m {shelf.module} list` names them; "
            f"`python -m {shelf.module} run NAME` reruns one.\n\n"
            "| claim | source | figure | verdict | command |\n|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def figure(cols: int, rows: int = 1, size: tuple[float, float] = (4.6, 3.6)) -> tuple[Any, np.ndarray]:
    """A matplotlib figure of rows x cols panels (axes as a 2-D array), for a claim's plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)


def save(fig: Any, path: Path) -> None:
    """Save a claim's figure small (dpi 100) and close it."""
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def sizes(values: dict[Any, float | None], prefix: str = "L=", digits: int = 0, none: str = "all diverged") -> str:
    """`L=8: -9, L=16: -9` from {8: -9.0, 16: -9.0}; None shown as `none`."""
    return ", ".join(f"{prefix}{k}: " + (none if v is None else f"{v:.{digits}f}") for k, v in values.items())


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
