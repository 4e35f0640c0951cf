"""The figure and numbers of docs/muon/transfer.sh: loss against log2 LR per width for Adam and Muon, each under
mup and sp, with each sweep's transfer score (grid steps the best LR moves across widths) and its transfer regret
(the loss at the largest width with the smallest width's best LR, minus the best loss at the largest width).

    python docs/muon/transfer_plot.py runs/muon_transfer      # writes transfer.png and transfer.json beside itself
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from zoo.sweeps import report, results

SWEEPS = [("adam", "mup"), ("adam", "sp"), ("muon", "mup"), ("muon", "sp")]


def regret(summary: report.Summary) -> float | None:
    """loss(largest width, smallest width's best LR) - best loss(largest width); None where undefined."""
    small, large = summary.curves[0], summary.curves[-1]
    if small.best is None or large.best is None:
        return None
    at = np.flatnonzero(np.isclose(large.log2_lr, small.log2_lr[small.best]))
    if not at.size or not np.isfinite(large.loss[at[0]]):
        return float("inf")
    return float(large.loss[at[0]] - large.loss[large.best])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="?", type=Path, default=Path("runs/muon_transfer"), help="the sweeps' parent "
                   "folder (default: runs/muon_transfer, as transfer.sh writes it)")
    p.add_argument("out", nargs="?", type=Path, default=Path(__file__).resolve().parent,
                   help="where transfer.png and transfer.json go (default: beside this script)")
    args = p.parse_args(argv)
    runs, out = args.runs, args.out
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    numbers = {}
    for ax, (opt, param) in zip(axes.flat, SWEEPS, strict=True):
        summary = report.summarize(results.read(runs / f"{opt}_{param}"))
        report.panel(ax, summary, f"{opt}, {param}")
        numbers[f"{opt} {param}"] = {
            "transfer_score": summary.transfer_score, "regret": regret(summary),
            "best_log2_lr": {c.width: c.best_log2_lr for c in summary.curves},
            "best_loss": {c.width: c.best_loss for c in summary.curves}}
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "transfer.png", dpi=110)
    (out / "transfer.json").write_text(json.dumps(numbers, indent=1) + "\n")
    for name, n in numbers.items():
        print(f"{name}: transfer score {n['transfer_score']} grid steps, regret {n['regret']}, best log2 LR "
              f"{n['best_log2_lr']}, best loss {n['best_loss']}")


if __name__ == "__main__":
    main()
