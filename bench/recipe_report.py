"""The result of an image recipe's run, as its recipe comment and docs state it: best and last test accuracy, the
wall time to the best (from the command's start: data, compile and evals included) and to the end, ms/step.

    start=$(date +%s.%N); python train.py --model vit --param sp --precision bf16 --run-dir runs/vit
    python bench/recipe_report.py runs/vit --start "$start" --write docs/recipes     # docs/recipes/vit.{md,json}

bench/gpu_acceptance.sh's vit and mixer parts run both lines.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax

# the references' own reports (the recipe comments in zoo/models name them)
REFERENCE = {"vit": "93.58% (aanna0701/SPT_LSA_ViT's README, 100 epochs of its 3x sampler = 300 epochs; time not "
                    "reported)",
             "mixer": "90.83% (omihub777/MLP-Mixer-CIFAR's README, 300 epochs in 3:34:31 on a P100)"}


def report(run_dir: Path, start: float) -> dict:
    config = json.loads((run_dir / "config.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in rows if r.get("split") != "train" and "accuracy" in r]
    best = max(evals, key=lambda r: (r["accuracy"], -r["step"]))  # the first eval at the best accuracy
    model = config["model"]["name"]
    return {"model": model, "device": jax.devices()[0].device_kind, "best_accuracy": best["accuracy"],
            "best_step": best["step"], "last_accuracy": evals[-1]["accuracy"], "steps": summary["steps"],
            "seconds_to_best": best["time"] - start, "seconds_total": max(r["time"] for r in rows) - start,
            "ms_per_step": summary.get("ms_per_step"), "reference": REFERENCE.get(model, "")}


def markdown(r: dict) -> str:
    return (f"| {r['model']} | {r['best_accuracy']:.2%} at step {r['best_step']:,} of {r['steps']:,} (last "
            f"{r['last_accuracy']:.2%}) | {r['seconds_to_best']:.0f} s to the best, {r['seconds_total']:.0f} s in "
            f"all, {r['ms_per_step']:.2f} ms/step | {r['device']} | {r['reference']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--start", type=float, required=True, help="the command's start, seconds since the epoch")
    ap.add_argument("--write", type=Path, help="a folder for <model>.md and <model>.json")
    args = ap.parse_args()
    r = report(args.run_dir, args.start)
    line = markdown(r)
    print(line)
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
        header = ("| model | test accuracy | wall time (data, compile, evals included) | device | reference |\n"
                  "|---|---|---|---|---|\n")
        stamp = time.strftime("%Y-%m-%d")
        (args.write / f"{r['model']}.md").write_text(f"`python train.py --model {r['model']} --param sp "
                                                     f"--precision bf16`, {stamp}:\n\n{header}{line}\n")
        (args.write / f"{r['model']}.json").write_text(json.dumps(r, indent=2) + "\n")


if __name__ == "__main__":
    main()
