"""Where a run reports: metrics.jsonl in the run dir (TensorBoard too when tensorboardX is installed),
a progress bar with loss, throughput and ETA, and a PNG of the curves at the end."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

console = Console(stderr=True)


class Logger:
    def __init__(self, run_dir: Path, total: int, start: int, unit: str):
        self.path = run_dir / "metrics.jsonl"
        self.file = self.path.open("a")
        self.unit, self.last_time, self.last_step = unit, None, start
        self.tb = _tensorboard(run_dir)
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=console,
                                 transient=False)
        self.task = self.progress.add_task("train", total=total, completed=start, info="")
        self.progress.start()

    def write(self, step: int, metrics: dict[str, Any], split: str = "train") -> None:
        row = {"step": step, "split": split, "time": time.time(), **{k: float(v) for k, v in metrics.items()}}
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()
        if self.tb is not None:
            for k, v in metrics.items():
                self.tb.add_scalar(f"{split}/{k}", float(v), step)

    def train(self, step: int, metrics: dict[str, Any], examples_per_step: int) -> None:
        """Logs step `step`'s (already fetched) metrics and refreshes the bar."""
        now = time.perf_counter()
        rate = ""
        if self.last_time is not None and step > self.last_step:
            per_s = (step - self.last_step) * examples_per_step / (now - self.last_time)
            rate = f" {per_s:,.0f} {self.unit}/s"
        self.last_time, self.last_step = now, step
        self.write(step, metrics)
        self.progress.update(self.task, completed=step, info=f"loss {float(metrics['loss']):.4f}{rate}")

    def eval(self, step: int, metrics: dict[str, Any]) -> None:
        self.write(step, metrics, "eval")
        text = " ".join(f"{k} {float(v):.4f}" for k, v in metrics.items())
        self.progress.console.print(f"step {step} eval: {text}")

    def close(self) -> None:
        self.progress.stop()
        self.file.close()
        if self.tb is not None:
            self.tb.close()


def _tensorboard(run_dir: Path):
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(run_dir / "tb"))


def plot_curves(run_dir: Path) -> Path:
    """curves.png: train loss and every eval metric against step, from metrics.jsonl."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    train = [r for r in rows if r["split"] == "train"]
    evals = [r for r in rows if r["split"] == "eval"]
    keys = [k for k in (evals[0] if evals else {}) if k not in ("step", "split", "time")]
    fig, axes = plt.subplots(1, 1 + len(keys), figsize=(4.5 * (1 + len(keys)), 3.5), squeeze=False)
    axes[0, 0].plot([r["step"] for r in train], [r["loss"] for r in train], lw=0.8, label="train")
    if evals:
        axes[0, 0].plot([r["step"] for r in evals], [r["loss"] for r in evals], "o-", label="eval")
    axes[0, 0].set(xlabel="step", ylabel="loss", title="loss")
    axes[0, 0].legend()
    for ax, k in zip(axes[0, 1:], keys, strict=True):
        ax.plot([r["step"] for r in evals], [r[k] for r in evals], "o-")
        ax.set(xlabel="step", title=f"eval {k}")
    fig.tight_layout()
    out = run_dir / "curves.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
