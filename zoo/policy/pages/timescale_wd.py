"""The best AdamW weight decay across horizons, with and without the `timescale` policy (Wang & Aitchison, ICML
2025): the EMA timescale tau = B / (lr wd D), D the run's B T examples, held fixed, so at a fixed LR and batch
wd' = wd T0 / T.

One zoo.sweep dir per (horizon, wd), each over a few LRs (the (lr, wd) grid): zoo.fit takes each horizon's best wd
(the loss profiled over the LRs) with its interval, raw (`none`) and in the proxy's units under `timescale` (the wd
divided by the policy's factor T0 / T), and fits it against the horizon.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo.config import resolve
from zoo.papers import page
from zoo.papers.claim import Check, Claim, Numbers
from zoo.policy.pages import common
from zoo.sweeps.runner import load_data

NAME = "timescale-wd"
FULL = {"model": "mlp_resnet", "data": "synthetic:teacher", "width": 64, "depth": 2, "batch_size": 64,
        "horizons": [256, 512, 1024, 2048], "log2_lrs": [-9.0, -7.0, 1.0], "log2_wds": [-7.0, 2.0, 1.0], "seeds": 2,
        "metric": "eval_loss"}
QUICK = {"model": "mlp_resnet", "data": "synthetic:teacher", "width": 8, "depth": 1, "batch_size": 8,
         "horizons": [2, 4, 8], "log2_lrs": [-6.0, -5.0, 1.0], "log2_wds": [-2.0, 0.0, 1.0], "seeds": 1,
         "metric": "eval_loss"}
ARMS = ("none", "timescale")
RULE = -1.0  # the timescale rule's exponent of the best wd in T at a fixed LR and batch
RISE = 0.03  # the decay's harm: where the loss first rises this fraction above its minimum
ONSET_TOL = 0.25  # |onset exponent - RULE| allowed


def run(quick: bool) -> Numbers:
    s = QUICK if quick else FULL
    base = resolve({"model": s["model"], "data": s["data"], "width": s["width"], "depth": s["depth"],
                    "optimizer": "adamw", "schedule": "cosine", "batch_size": s["batch_size"],
                    "steps": s["horizons"][0]})
    data = load_data(base)
    lrs = common.log2_grid(*s["log2_lrs"])
    with common.work_dir(NAME, quick) as work:
        dirs = [common.sweep(base.replace(steps=t, weight_decay=2.0**w), lrs, work / f"t{t}_wd{w:g}", data,
                             s["seeds"]) for t in s["horizons"] for w in common.log2_grid(*s["log2_wds"])]
        boot = 200 if quick else 1000
        return {"setting": s, **{arm: common.fit(dirs, s["metric"], arm, boot=boot) for arm in ARMS}}


def helps(n: Numbers) -> tuple[bool, str]:
    """Whether, at every horizon, the loss at the best wd is below the smallest wd's by more than 2 seed standard
    deviations (wd has an optimum to transfer), and the numbers."""
    ok, parts = True, []
    for s in n["none"]["sizes"]:
        part = s["wd"]
        loss = [float("inf") if v is None else v for v in part["loss"]]
        i = loss.index(min(loss))
        gain, noise = loss[0] - loss[i], 2 * max(part["seed_std"][0], part["seed_std"][i])
        ok = ok and 0 < i < len(loss) - 1 and gain > noise
        parts.append(f"T={s['size']['steps']}: best log2 wd {part['x'][i]:g}, gain {gain:.4f} vs noise {noise:.4f}")
    return ok, "; ".join(parts)


def onsets(n: Numbers) -> dict[int, float | None]:
    """Horizon -> the log2 wd where the (raw) loss first rises RISE above its minimum, past the minimum, linear in
    log2 wd between grid points (None where it never does): the wd whose EMA timescale begins to hurt. The timescale
    rule (the curves collapse in tau) moves it as 1/T."""
    out = {}
    for s in n["none"]["sizes"]:
        x, y = s["wd"]["x"], [float("inf") if v is None else v for v in s["wd"]["loss"]]
        i = y.index(min(y))
        level = y[i] * (1 + RISE)
        j = next((k for k in range(i + 1, len(y)) if y[k] >= level), None)
        out[s["size"]["steps"]] = None if j is None else x[j - 1] + (x[j] - x[j - 1]) * (level - y[j - 1]) / (
            y[j] - y[j - 1])
    return out


def onset_exponent(n: Numbers) -> float | None:
    """The least-squares slope of the onset's log2 wd against log2 T (None where an onset is missing)."""
    found = onsets(n)
    if any(v is None for v in found.values()) or len(found) < 2:
        return None
    return float(np.polyfit(np.log2(list(found)), list(found.values()), 1)[0])


def onset_text(n: Numbers) -> str:
    e = onset_exponent(n)
    found = ", ".join(f"T={t}: " + ("-" if v is None else f"{v:.2f}") for t, v in onsets(n).items())
    return f"onset log2 wd {found}; exponent {'n/a' if e is None else f'{e:+.2f}'}"


def checks(n: Numbers) -> list[Check]:
    step = n["setting"]["log2_wds"][2]
    useful, text = helps(n)
    raw = common.exponent(n["none"], "weight_decay", "steps")
    kept = common.spread(n["timescale"], "weight_decay", "steps")
    best = {arm: ", ".join(f"T={t}: " + ("-" if o is None else f"{o['optimum']:.2f}")
                           for t, o in common.optima(n[arm], "weight_decay", "steps").items()) for arm in ARMS}
    return [
        Check("weight decay has an optimum to transfer at this scale",
              "at every horizon the grid's best wd (the loss profiled over the LRs) is inside the grid and its loss "
              "is below the smallest wd's by more than 2 seed standard deviations", text, useful,
              "weight decay only slows learning here: the best wd is the smallest swept, an EMA timescale longer "
              "than the run; the timescale rule needs a regime where forgetting old updates helps (many epochs, "
              "overfitting, scale-invariant layers), which this task does not reach"),
        Check("without a policy the best wd falls as 1/T (the timescale rule at a fixed LR and batch)",
              f"the raw best log2 wd's horizon exponent: its 95% interval holds {RULE:g}",
              f"none: {best['none']}; exponent {common.interval_text(raw)}",
              raw is not None and raw[1] <= RULE <= raw[2], "the raw optimum does not follow 1/T, or was not located"),
        Check("the decay's harm moves with the horizon as the timescale does",
              f"the log2 wd where the loss first rises {RISE:.0%} above its minimum has a horizon exponent within "
              f"{ONSET_TOL} of {RULE:g} (the loss curves collapse in the timescale's units)",
              onset_text(n),
              onset_exponent(n) is not None and abs(onset_exponent(n) - RULE) <= ONSET_TOL,
              f"the onset falls with the horizon as T^{onset_exponent(n) or 0:+.2f}, far slower than the rule's 1/T: "
              "the decay's harm follows the decay per step (lr wd) against the gradient's pull more than the EMA's "
              "forgetting over the run, so the curves spread out in the timescale's units (the middle panel) instead "
              "of collapsing"),
        Check("under timescale the best wd (in the proxy's units) stays put across horizons",
              f"fitted best log2 wd located inside the grid at every horizon, max - min <= 1 grid step ({step:g})",
              f"timescale: {best['timescale']}; spread {'n/a' if kept is None else f'{kept:.2f}'}",
              kept is not None and kept <= step, "the optimum moved more than a grid step, or was not located"),
    ]


def plot(n: Numbers, path: Path) -> None:
    s = n["setting"]
    fig, axes = page.figure(3, 1, size=(5.2, 4.0))
    common.curves_panel(axes[0][0], n["none"], "weight_decay", "steps", f"none: {s['metric']} against raw wd",
                        "log2 weight decay")
    common.curves_panel(axes[0][1], n["timescale"], "weight_decay", "steps", "timescale: wd T / T0 (tau kept)",
                        f"log2 weight decay in the proxy's units (T0 = {s['horizons'][0]})")
    common.optima_panel(axes[0][2], {"none (raw)": n["none"], "timescale (proxy units)": n["timescale"]},
                        "weight_decay", "steps", "best log2 wd vs horizon")
    fig.suptitle(f"{s['model']} (width {s['width']}, depth {s['depth']}) on {s['data']}, AdamW, cosine, batch "
                 f"{s['batch_size']}", fontsize=10)
    page.save(fig, path)


def setting(n: Numbers) -> str:
    s = n["setting"]
    return (f"{s['model']} width {s['width']} depth {s['depth']}, SP, AdamW (cosine to 0) on {s['data']}, batch "
            f"{s['batch_size']}; horizons {', '.join(map(str, s['horizons']))} steps; wd grid "
            f"2^{s['log2_wds'][0]:g}..2^{s['log2_wds'][1]:g} (log2 step {s['log2_wds'][2]:g}) times LR grid "
            f"2^{s['log2_lrs'][0]:g}..2^{s['log2_lrs'][1]:g}, {s['seeds']} seeds; loss: {s['metric']} at the end")


def result(n: Numbers) -> str:
    return "; ".join(f"{arm}: best log2 wd " + ", ".join(
        f"T={t}: " + ("-" if o is None else f"{o['optimum']:.2f} [{o['lo']:.2f}, {o['hi']:.2f}]")
        for t, o in common.optima(n[arm], "weight_decay", "steps").items()) + ", horizon exponent "
        f"{common.interval_text(common.exponent(n[arm], 'weight_decay', 'steps'))}"
        + (f" ({n[arm]['error']})" if "error" in n[arm] else "") for arm in ARMS)


CLAIM = Claim(
    name=NAME,
    title="AdamW's weight decay as an EMA timescale: the best wd across horizons, with and without `timescale`",
    source="Wang & Aitchison, How to set AdamW's weight decay as you scale model and dataset size (ICML 2025)",
    paper_setting="ResNets and ViTs on image sets, and LLM pretraining, over model and dataset sizes and epochs",
    paper_result="the best EMA timescale tau_epoch = B / (lr wd D) is about constant across scales, so the best wd "
                 "falls as 1/D at a fixed LR and batch (and, under muP, grows with fan-in)",
    scale="a width-64 residual MLP on a 16-dimensional synthetic teacher task (deterministic labels), horizons 256 to "
          "2048 steps (1 to 8 epochs of 16,384 examples), so the (lr, wd) grid at four horizons fits the 2-core CPU",
    run=run, checks=checks, plot=plot, setting=setting, result=result)
