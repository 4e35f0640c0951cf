"""zoo.audit on correct runs of all four models under mup and depth_mup with adam, sgd and muon (issue 18's
acceptance): widths 64 and 128 at depth 2, and for depth_mup also depths 2 and 4 at width 64; weight decay 0.1;
text models at sequence length 32. Writes models.md (the table) and models.json (every verdict and the failures,
if any) beside this script (docs/audit/, the page docs/audit.md).

    nice -n 19 python docs/audit/models.py
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import zoo.param
from zoo.audit import ZooRun, audit
from zoo.optim import OptimConfig

MODELS = {"mlp_resnet": {}, "mixer": {}, "vit": {}, "gpt": {"seq_len": 32}}
PARAMS, OPTIMIZERS = ("mup", "depth_mup"), ("adam", "sgd", "muon")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=Path, default=Path(__file__).resolve().parent,
                   help="where models.md and models.json go (default: beside this script)")
    out = p.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for model, opts in MODELS.items():
        for param in PARAMS:
            for opt in OPTIMIZERS:
                t0 = time.time()
                run = ZooRun(model, zoo.param.get(param), OptimConfig(opt, lr=1e-2, weight_decay=0.1), opts)
                result = audit(run, (64, 128), (2, 4) if param == "depth_mup" else (), depth=2)
                results[f"{model} {param} {opt}"] = {
                    "passed": result.passed, "failures": result.failures(),
                    "params": sum(len(a.params) for a in result.axes), "seconds": round(time.time() - t0, 1)}
                print(model, param, opt, results[f"{model} {param} {opt}"], flush=True)
    (out / "models.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = ["| model | param | " + " | ".join(OPTIMIZERS) + " |", "|---|---|" + "---|" * len(OPTIMIZERS)]
    for model in MODELS:
        for param in PARAMS:
            cells = []
            for opt in OPTIMIZERS:
                r = results[f"{model} {param} {opt}"]
                cells.append(("PASS" if r["passed"] else f"FAIL ({len(r['failures'])})") + f", {r['params']} checks")
            lines.append(f"| {model} | {param} | " + " | ".join(cells) + " |")
    (out / "models.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
