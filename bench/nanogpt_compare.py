"""zoo's GPT recipe and nanoGPT's own training, side by side over seeds, on the bundled tiny shakespeare: each seed
runs `python train.py --model gpt` (with --eval-iters: nanoGPT's estimate beside zoo's whole-split eval) and
bench/nanogpt_char.py (nanoGPT's model.py and loop) at the same shape, and a markdown table gives each run's best
val loss, its step, the wall time to it and the whole run's, with the mean and spread over seeds.

    python bench/nanogpt_compare.py --nanogpt ../nanoGPT --seeds 1,2,3 --width 128 --depth 4 --heads 4 \\
        --block 64 --batch 32 --steps 1500 --out runs/compare_cpu          # the CPU size (docs/gpt_parity.md)
    python bench/nanogpt_compare.py --nanogpt ../nanoGPT --seeds 1337 --gpu --out runs/compare_gpu
                                                                          # the char config on a GPU: bf16, compile

zoo runs at base width and depth = its width and depth, so its init is nanoGPT's at every size (0.02, and 0.02 /
sqrt(2 L) on the branches' last matrices). --steps is nanoGPT's max_iters: both train iterations 0..max_iters (zoo's
--steps max_iters + 1, as its gpt recipe's 5001), each LR get_lr's, and evaluate after the last. nanoGPT also
evaluates at step 0, zoo does not (the best is never there).
Writes OUT/table.md and OUT/runs.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from nanogpt_char import checkout, shape_args

ROOT = Path(__file__).resolve().parents[1]


def zoo_command(a: argparse.Namespace, seed: int, run_dir: Path) -> list[str]:
    cmd = [sys.executable, str(ROOT / "train.py"), "--model", "gpt", "--param", "sp", "--width", str(a.width),
           "--depth", str(a.depth), "--base-width", str(a.width), "--base-depth", str(a.depth), "--model-opt",
           f"head_dim={a.width // a.heads}", "--model-opt", f"dropout={a.dropout}", "--seq-len", str(a.block),
           "--batch-size", str(a.batch), "--steps", str(a.steps + 1), "--eval-every", str(a.eval_every), "--eval-iters",
           str(a.eval_iters), "--seed", str(seed), "--run-dir", str(run_dir)]
    for opt in a.zoo_opt:
        cmd += ["--model-opt", opt]
    cmd += a.zoo_flag
    return cmd + (["--precision", "bf16"] if a.gpu else [])


def nanogpt_command(a: argparse.Namespace, seed: int, out: Path) -> list[str]:
    cmd = [sys.executable, str(ROOT / "bench" / "nanogpt_char.py"), "--nanogpt", a.nanogpt, "--width", str(a.width),
           "--depth", str(a.depth), "--heads", str(a.heads), "--block", str(a.block), "--batch", str(a.batch),
           "--dropout", str(a.dropout), "--steps", str(a.steps), "--eval-every", str(a.eval_every), "--eval-iters",
           str(a.eval_iters), "--seed", str(seed), "--json", str(out)]
    return cmd + (["--compile"] if a.gpu else ["--device", "cpu", "--threads", str(a.threads)])


def run(cmd: list[str], log: Path) -> None:
    print("$ " + " ".join(cmd), flush=True)
    with log.open("w") as f:
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}).returncode
    if code:
        raise SystemExit(f"failed ({code}): see {log}")


def zoo_row(run_dir: Path) -> dict:
    s = json.loads((run_dir / "summary.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if r.get("split") == "eval"]
    best = min(evals, key=lambda r: r["loss"])
    sampled = min(evals, key=lambda r: r.get("sampled_loss", float("inf")))
    return {"best_val": best["loss"], "best_step": best["step"], "best_sampled": sampled.get("sampled_loss"),
            "sampled_step": sampled["step"], "time_to_best_s": s["time_to_best_s"].get("loss"),
            "time_to_best_sampled_s": s["time_to_best_s"].get("sampled_loss"), "wall_s": s["wall_s"],
            "final_val": evals[-1]["loss"], "final_sampled": evals[-1].get("sampled_loss")}


def spread(values: list[float]) -> str:
    mean = statistics.mean(values)
    return f"{mean:.4f} +- {statistics.stdev(values):.4f}" if len(values) > 1 else f"{mean:.4f}"


def table(runs: list[dict], iters: int) -> str:
    lines = [f"| seed | zoo best val (whole split) | zoo best val ({iters} random batches) | nanoGPT best val ({iters} "
             "random batches) | zoo steps (whole / sampled) | nanoGPT step | zoo time to best (s) | nanoGPT time to "
             "best (s) | zoo wall (s) | nanoGPT wall (s) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        z, n = r["zoo"], r["nanogpt"]
        lines.append(f"| {r['seed']} | {z['best_val']:.4f} | {z['best_sampled']:.4f} | {n['best_val']:.4f} | "
                     f"{z['best_step']} / {z['sampled_step']} | {n['best_step']} | {z['time_to_best_s']:.0f} | "
                     f"{n['time_to_best_s']:.0f} | {z['wall_s']:.0f} | {n['wall_s']:.0f} |")
    cols = [[r["zoo"]["best_val"] for r in runs], [r["zoo"]["best_sampled"] for r in runs],
            [r["nanogpt"]["best_val"] for r in runs]]
    lines.append(f"| mean +- sd | {' | '.join(spread(c) for c in cols)} | | | | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shape_args(p)
    p.add_argument("--seeds", default="1337", help="comma list")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-iters", type=int, default=200)
    p.add_argument("--gpu", action="store_true", help="zoo in bf16, nanoGPT on cuda with autocast and compile")
    p.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    p.add_argument("--only", choices=("zoo", "nanogpt"), help="run one side (the other's results read if there)")
    p.add_argument("--zoo-opt", action="append", default=[], metavar="K=V",
                   help="a model option of the zoo runs (an ablation: attn_dropout=false), repeatable")
    p.add_argument("--zoo-flag", action="append", default=[], metavar="--FLAG=V",
                   help="a train.py flag of the zoo runs (a recipe ablation: --zoo-flag=--warmup-peak=last), "
                        "repeatable")
    p.add_argument("--nanogpt-runs", help="where nanoGPT's runs are, if not in --out (an ablation's reference)")
    p.add_argument("--out", default="runs/nanogpt_compare")
    a = p.parse_args(argv)
    a.nanogpt = str(checkout(a.nanogpt))
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in a.seeds.split(",")]
    missing = [p for p in (Path(a.nanogpt_runs or out).resolve() / f"nanogpt_s{s}.json" for s in seeds)
               if a.only == "zoo" and not p.exists()]
    if missing:  # refused before zoo's runs: without nanoGPT's, they would end in no table
        raise SystemExit(f"no nanoGPT run at {missing[0]}: run the comparison without --only, or name its folder "
                         "with --nanogpt-runs")
    runs = []
    for seed in seeds:
        zoo_dir, nano_json = out / f"zoo_s{seed}", Path(a.nanogpt_runs or out).resolve() / f"nanogpt_s{seed}.json"
        if a.only != "nanogpt":
            run(zoo_command(a, seed, zoo_dir), out / f"zoo_s{seed}.log")
        if a.only != "zoo":
            run(nanogpt_command(a, seed, nano_json), out / f"nanogpt_s{seed}.log")
        if (zoo_dir / "summary.json").exists() and nano_json.exists():
            n = json.loads(nano_json.read_text())["summary"]
            runs.append({"seed": seed, "zoo": zoo_row(zoo_dir),
                         "nanogpt": {"best_val": n["best_val"], "best_step": n["best_step"],
                                     "time_to_best_s": n["time_to_best_s"], "wall_s": n["wall_s"]}})
    if runs:
        text = table(runs, a.eval_iters)
        (out / "table.md").write_text(text + "\n")
        (out / "runs.json").write_text(json.dumps({"args": vars(a), "runs": runs}, indent=1))
        print(text)


if __name__ == "__main__":
    main()
