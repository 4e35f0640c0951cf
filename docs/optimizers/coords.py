"""The coordinate check of every optimizer zoo offers (issue 18, item 3): the MLP-ResNet under mup at widths
128..1024, under depth_mup at depths 4..64 (width 128), and under sp at widths 128..1024, each through
`python -m zoo.coord_check` (its LR choice, 3 seeds, 3 steps). Writes the table (markdown, one row per optimizer:
the largest |measured - predicted| slope over the layers and steps, and the verdict) and every number as JSON.

    nice -n 19 python docs/optimizers/coords.py      (about 25 min of CPU on 2 cores)

writes coords.md, coords.json and every check's run (runs/, not committed) beside this script.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from zoo.coord_check import main as coord_check
from zoo.optim import OPTIMIZERS

WIDTHS, DEPTHS = "128,256,512,1024", "4,8,16,32,64"
SWEEPS = {"mup": ["--param", "mup", "--widths", WIDTHS],
          "depth_mup": ["--param", "depth_mup", "--depths", DEPTHS, "--width", "128"],
          "sp": ["--param", "sp", "--widths", WIDTHS]}


def run(out: Path, optimizer: str, sweep: str) -> dict:
    """One coordinate check (skipped when its JSON is there), its JSON."""
    where = out / "runs" / f"{optimizer}_{sweep}"
    axis = "depth" if sweep == "depth_mup" else "width"
    result = where / f"coord_check_{axis}.json"
    if not result.exists():
        try:
            coord_check(["--model", "mlp_resnet", "--optimizer", optimizer, *SWEEPS[sweep], "--out", str(where)])
        except SystemExit as e:
            if e.code not in (0, 1):
                raise
    return json.loads(result.read_text())


def summary(result: dict) -> dict:
    """The verdict and, over the layers and steps, the largest |slope - predicted| (the totals' and, in width, every
    part's alone: zoo.diagnostics.coord) and the slopes of the hidden pre-activations and of the output (their
    totals, largest over layers and steps)."""
    layers = result["layers"].values()
    judged = [*layers, *(v for part in result.get("part_layers", {}).values() for v in part.values())]
    worst = max(abs(s - v["expected"]) for v in judged if isinstance(v["expected"], float) for s in v["slopes"]
                if isinstance(s, float))  # to_json writes a non-finite number as a string ('nan': no slope)
    by_group = {g: max(s for v in layers if v["group"] == g for s in v["slopes"] if s == s)
                for g in ("hidden", "output") if any(v["group"] == g for v in layers)}
    expected = {g: next(v["expected"] for v in layers if v["group"] == g) for g in by_group}
    return {"passed": result["passed"], "worst_deviation": worst, "slopes": by_group, "expected": expected,
            "unstable": result["unstable"], "lr": result["lr"]}


def cell(s: dict, growth: bool = False) -> str:
    verdict = "PASS" if s["passed"] else "FAIL"
    if growth:
        return (f"{verdict}: hidden {s['slopes']['hidden']:+.2f} (theory {s['expected']['hidden']:+.2f}), output "
                f"{s['slopes']['output']:+.2f} ({s['expected']['output']:+.2f})")
    return f"{verdict} (max dev {s['worst_deviation']:.2f})"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=Path, default=Path(__file__).resolve().parent,
                   help="where coords.md, coords.json and runs/ go (default: beside this script)")
    out = p.parse_args(argv).out
    rows = {opt: {sweep: summary(run(out, opt, sweep)) for sweep in SWEEPS} for opt in OPTIMIZERS}
    (out / "coords.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["| optimizer | mup, widths 128..1024 | depth_mup, depths 4..64 | sp, widths 128..1024 (slopes: largest, "
             "theory) |", "|---|---|---|---|"]
    lines += [f"| {opt} | {cell(r['mup'])} | {cell(r['depth_mup'])} | {cell(r['sp'], growth=True)} |"
              for opt, r in rows.items()]
    (out / "coords.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
