"""The transfer runs behind depth_transfer.png and width_transfer.png beside this script (the page docs/sweeps.md).

    python docs/sweeps/transfer.py depth [--data synthetic] [--steps 500]          # depth_mup vs alpha = gamma = 0
    python docs/sweeps/transfer.py width [--data synthetic:teacher] [--steps 500]  # mup vs sp
    python docs/sweeps/transfer.py depth --plot-only                               # re-render from the sweep dirs

Each is two sweeps (as `python -m zoo.sweep` runs them; rerunning skips finished shapes), then one two-panel
PNG. The width runs default to `synthetic:teacher`, a 16-dimensional random-teacher task: with CIFAR-10's 3072
input pixels the input layer's fan-in, not the width, sets SP's best LR at widths well below 3072, which hides
SP's shift.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import zoo.data
from zoo.config import resolve
from zoo.sweeps import SweepSpec, parse_ints, parse_lrs, report, results, run_sweep

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]  # the checkout: docs/sweeps/ -> docs/ -> root
RUNS = {
    "depth": [("depth_mup", {}, "Depth-muP (1/2, 1/2)"),
              ("depth_mup", {"alpha": 0.0, "gamma": 0.0}, "no depth scaling (0, 0)")],
    "width": [("mup", {}, "muP"), ("sp", {}, "SP")],
}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("which", choices=sorted(RUNS))
    p.add_argument("--data", help="a zoo.data spec; default: synthetic for depth, synthetic:teacher for width")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--lrs", default="2^-15:2^-5:1")
    p.add_argument("--sizes", help="default: depths 4,8,16,32,64 at width 128; widths 64..512 at depth 4")
    p.add_argument("--out", default=str(ROOT / "runs" / "sweeps"), help="parent of the sweep dirs")
    p.add_argument("--png", help="default: <which>_transfer.png beside this script")
    p.add_argument("--plot-only", action="store_true")
    args = p.parse_args(argv)
    data = args.data or ("synthetic" if args.which == "depth" else "synthetic:teacher")
    dataset = zoo.data.load(data)
    if args.which == "depth":
        widths, depths = [128], parse_ints(args.sizes or "4,8,16,32,64", "--sizes")
    else:
        widths, depths = parse_ints(args.sizes or "64,128,256,512", "--sizes"), [4]
    panels = []
    for param, opts, label in RUNS[args.which]:
        out = Path(args.out) / f"{args.which}_{label.split(' ')[0].lower().replace('-', '')}_{data.replace(':', '_')}"
        if not args.plot_only:
            run = resolve({"model": "mlp_resnet", "param": param, "param_opt": opts, "steps": args.steps,
                           "batch_size": 64, "optimizer": "adam", "data": data})
            run_sweep(SweepSpec(run=run, lrs=parse_lrs(args.lrs), out=out, widths=widths, depths=depths),
                      data=dataset)
        if not results.read(out):
            raise SystemExit(f"error: no sweep results in {out}: run `python docs/sweeps/transfer.py {args.which}` "
                             "first (without --plot-only)")
        summary, settings = report.summarize(results.read(out)), results.read_settings(out)
        panels.append((summary, f"{label}: {settings['optimizer']}, {settings['steps']} steps, {data}"))
    png = Path(args.png or HERE / f"{args.which}_transfer.png")
    report.plot_panels(panels, png)
    for summary, label in panels:
        print(f"{label}: transfer score {summary.transfer_score} grid steps; best log2 LR "
              + ", ".join(f"{summary.label(c)}: {c.best_log2_lr}" for c in summary.curves))
    print(f"plot: {png}")


if __name__ == "__main__":
    main()
