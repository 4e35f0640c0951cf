"""A wrong hidden-matrix LR against the width coordinate check (issue 41). `slow_hidden` is muP whose optimizer
builder gives the hidden matrices of one optimizer family an LR with an extra 1/m (Muon's, or Adam's: 16x too small
at width 1536), its stated table muP's. On the default MLP-ResNet (3072 inputs, depth 8) at widths 96..1536, with
the check's own choices (its LR, 3 seeds, 3 steps, batch 16), every hidden and stream layer's total change is the
input layer's, n^0 whatever the hidden rule; the hidden parameters' own part moves like n^-1 and FAILs
(zoo.diagnostics.coord), while muP passes in every total and every part. Writes hidden_lr.json (every case's rows,
resumable: a case already there is kept) and hidden_lr.md beside this script.

    nice -n 19 python docs/coord_check/hidden_lr.py [CASE ...]      (default: every case; 47 min on 2 shared cores)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import zoo.param
from zoo.diagnostics.coord_sweep import CoordSpec, coord_sweep, passed
from zoo.param.mup import MuP
from zoo.param.tags import Tag

HERE = Path(__file__).resolve().parent
WIDTHS = [96, 192, 384, 768, 1536]


@dataclasses.dataclass(frozen=True)
class SlowHidden(MuP):
    """muP with the hidden matrices' LR exponent one higher than the stated table's in one family ("spectral": Muon,
    "adam": entrywise)."""

    name = "slow_hidden"
    family: str = "spectral"

    def lr_exponent(self, tag: Tag, family: str = "adam") -> float:
        c = super().lr_exponent(tag, family)
        return c + 1 if family == self.family and tag.kind == "hidden" else c


CASES = {  # name -> (plugin, its options, optimizer, muon_io)
    "mup-adam": ("mup", {}, "adam", False),
    "slow_hidden-adam": ("slow_hidden", {"family": "adam"}, "adam", False),
    "mup-muon": ("mup", {}, "muon", False),
    "slow_hidden-muon": ("slow_hidden", {}, "muon", False),
    "mup-muon_io": ("mup", {}, "muon", True),
    "slow_hidden-muon_io": ("slow_hidden", {}, "muon", True),
}


def run(case: str) -> dict:
    """One width check: its verdict, LR and every judged row (the totals' and each part's)."""
    param, opts, optimizer, muon_io = CASES[case]
    spec = CoordSpec(param=param, param_opt=opts, optimizer=optimizer, muon_io=muon_io)
    result = coord_sweep(spec, "width", WIDTHS, {})
    rows = [("total", v) for v in result["verdicts"]] + [
        (p, v) for p, vs in result["part_verdicts"].items() for v in vs]
    return {"passed": passed(result), "lr": result["lr"], "rows": [
        {"part": p, "layer": v.layer, "group": v.group, "slopes": [float(s) for s in v.slopes],
         "expected": float(v.expected), "matches": bool(v.matches)} for p, v in rows]}


def span(rows: list[dict], part: str, group: str) -> str:
    """min..max slope over the rows of a part and group, and the predicted slope."""
    mine = [r for r in rows if r["part"] == part and r["group"] == group]
    slopes = [s for r in mine for s in r["slopes"] if s == s]
    if not slopes:
        return "-"
    bad = sum(not r["matches"] for r in mine)
    return f"{min(slopes):+.2f}..{max(slopes):+.2f} ({mine[0]['expected']:+.2f}){f', {bad} FAIL' if bad else ''}"


def table(results: dict) -> str:
    lines = ["| case | verdict | LR | total: hidden | total: stream | hidden part: hidden | hidden part: stream |",
             "|---|---|---|---|---|---|---|"]
    for case, r in results.items():
        cells = [span(r["rows"], p, g) for p in ("total", "hidden") for g in ("hidden", "stream")]
        lines.append(f"| {case} | {'PASS' if r['passed'] else 'FAIL'} | {r['lr']:.3g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", choices=[[], *CASES], metavar="CASE", help=", ".join(CASES))
    cases = parser.parse_args(argv).cases
    if SlowHidden.name not in zoo.param.names():
        zoo.param.register(SlowHidden)
    path = HERE / "hidden_lr.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    for case in cases or CASES:
        if case not in results:
            results[case] = run(case)
            path.write_text(json.dumps(results, indent=1) + "\n")
            print(case, "PASS" if results[case]["passed"] else "FAIL", flush=True)
    text = table({c: results[c] for c in CASES if c in results})
    (HERE / "hidden_lr.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
