"""Where a run reports: metrics.jsonl in the run dir (TensorBoard too when tensorboardX is installed), progress
for a person (a bar on a terminal) or a log file (plain lines, never hard-wrapped: every --log-every steps and at
least every 30 s, with loss, throughput and ETA), and a PNG of the curves at the end. Only process 0 writes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from zoo.errors import naming_full_disk
from zoo.files import open_regular, read_regular, save_figure, write_atomic

console = Console(stderr=True, soft_wrap=True)  # soft wrap: a long path stays one line in a log file
HEARTBEAT_S = 30.0


def fmt(x: float) -> str:
    """A metric in at most 7 characters' worth of precision (4 significant digits), huge values included."""
    return f"{x:.4g}"


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}h{rest // 60:02d}m" if h else f"{rest // 60}m{rest % 60:02d}s"


class Logger:
    """What the loop reports to: metrics.jsonl and TensorBoard (MetricsLog), the progress (ProgressView), and
    `say`. Process 0 only (`enabled`)."""

    def __init__(self, run_dir: Path, total: int, start: int, unit: str, examples_per_step: int,
                 say: Callable[[str], None], enabled: bool = True):
        self.say, self.per_step = say, examples_per_step
        self.earlier_evals = eval_rows(run_dir, start)  # a resumed run's, which its summary's best still counts
        self.log = MetricsLog(run_dir) if enabled else None
        self.view = ProgressView(total, start, unit, examples_per_step, say) if enabled else None

    def tick(self, step: int, metrics: dict[str, Any]) -> None:
        """Every step's fetched metrics: the bar's first update, and a heartbeat line in a log file."""
        if self.view is not None:
            self.view.tick(step, metrics)

    def train(self, step: int, metrics: dict[str, Any]) -> None:
        """A logged step: a metrics.jsonl row, the bar, and a plain line in a log file."""
        if self.log is not None:
            self.log.write(step, metrics, "train")
            self.view.show(step, metrics, line=True)

    def paused(self, seconds: float) -> None:
        """Time spent outside the train steps (evals, checkpoints): left out of the next rate shown."""
        if self.view is not None and self.view.last is not None:
            step, t = self.view.last
            self.view.last = (step, t + seconds)

    def eval(self, step: int, metrics: dict[str, Any]) -> None:
        if self.log is not None:
            self.log.write(step, metrics, "eval")
        self.say(f"step {step} eval: " + " ".join(f"{k} {fmt(float(v))}" for k, v in metrics.items()))

    def close(self) -> None:
        for part in (self.view, self.log):
            if part is not None:
                part.close()


class MetricsLog:
    """Rows of metrics.jsonl (one JSON object per line: step, split, time, the metrics), and TensorBoard scalars
    when tensorboardX is installed."""

    def __init__(self, run_dir: Path):
        self.file = open_regular(run_dir / "metrics.jsonl", "a")
        self.tb = _tensorboard(run_dir)

    def write(self, step: int, metrics: dict[str, Any], split: str) -> None:
        row = {"step": step, "split": split, "time": time.time(), **{k: float(v) for k, v in metrics.items()}}
        with naming_full_disk(self.file.name):
            self.file.write(json.dumps(row) + "\n")
            self.file.flush()
        if self.tb is not None:
            for k, v in metrics.items():
                self.tb.add_scalar(f"{split}/{k}", float(v), step)

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()


class ProgressView:
    """A bar on a terminal; in a log file, plain lines (loss, throughput, ETA) at each logged step and a heartbeat
    at least every HEARTBEAT_S."""

    def __init__(self, total: int, start: int, unit: str, examples_per_step: int, say: Callable[[str], None]):
        self.total, self.unit, self.per_step, self.say = total, unit, examples_per_step, say
        self.start = (start, time.perf_counter())
        self.last: tuple[int, float] | None = None  # (step, time) of the last rate shown
        self.last_line = time.perf_counter()
        self.bar = None
        if console.is_terminal:
            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=console)
            self.task = self.bar.add_task("train", total=total, completed=start, info="")
            self.bar.start()

    def tick(self, step: int, metrics: dict[str, Any]) -> None:
        if self.last is None:
            self.show(step, metrics, line=False)
        if time.perf_counter() - self.last_line >= HEARTBEAT_S:
            self.line(step, "running")

    def show(self, step: int, metrics: dict[str, Any], line: bool) -> None:
        now, rate = time.perf_counter(), ""
        if self.last is not None and step > self.last[0]:
            rate = f"{(step - self.last[0]) * self.per_step / (now - self.last[1]):,.0f} {self.unit}/s"
        self.last = (step, now)
        info = f"loss {fmt(metrics['loss'])}" + (f"  {rate}" if rate else "")
        if self.bar is not None:
            self.bar.update(self.task, completed=step, info=info)
        if line:
            self.line(step, info)

    def line(self, step: int, info: str) -> None:
        """A plain progress line (log files only; a terminal has the bar)."""
        if self.bar is not None:
            return
        start, t0 = self.start
        done = step - start
        eta = f"  ETA {duration((time.perf_counter() - t0) / done * (self.total - step))}" if done > 0 else ""
        self.say(f"step {step}/{self.total}  {info}{eta}")
        self.last_line = time.perf_counter()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _tensorboard(run_dir: Path):
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(run_dir / "tb"))


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of metrics.jsonl (a torn last line, from a kill mid-write, or a damaged one is skipped)."""
    rows = []
    for line in _lines(run_dir / "metrics.jsonl"):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if _is_row(row):
            rows.append(row)
    return rows


def _is_row(row: Any) -> bool:
    """An object with an integer step, as MetricsLog writes every row. A damaged line that still parses (7, null, a
    list, a step "x") was kept, and the resume stopped on it with 'unexpected AttributeError'."""
    return isinstance(row, dict) and type(row.get("step")) is int


def eval_rows(run_dir: Path, until: int) -> list[dict[str, Any]]:
    """The eval rows of metrics.jsonl up to step `until`: a resumed run's evals before the step it resumes from."""
    return [r for r in read_metrics(run_dir) if r.get("split") == "eval" and r.get("step", until + 1) <= until]


def _lines(path: Path) -> list[str]:
    """The lines of a text file, bytes that are not UTF-8 replaced (they make a row that is skipped)."""
    return read_regular(path).decode(errors="replace").splitlines() if path.exists() else []


def trim_metrics(run_dir: Path, step: int) -> int:
    """Drop the rows after `step` (written before a kill, after the checkpoint a resume starts from); atomic.
    Returns how many were dropped."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return 0
    rows = read_metrics(run_dir)
    keep = [r for r in rows if r.get("step", 0) <= step]
    if len(keep) == len(_lines(path)):
        return 0
    write_atomic(path, "".join(json.dumps(r) + "\n" for r in keep))
    return len(rows) - len(keep)


def plot_curves(run_dir: Path) -> Path:
    """curves.png: train loss and every eval metric against step, from metrics.jsonl (an eval row may hold some of
    the metrics: a diagnostic hook logs its own)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    train = [r for r in rows if r.get("split") == "train" and "loss" in r]
    evals = [r for r in rows if r.get("split") == "eval"]
    keys = list(dict.fromkeys(k for r in evals for k in r if k not in ("step", "split", "time", "loss")))

    def curve(k: str) -> tuple[list, list]:
        return [r["step"] for r in evals if k in r], [r[k] for r in evals if k in r]

    fig, axes = plt.subplots(1, 1 + len(keys), figsize=(4.5 * (1 + len(keys)), 3.5), squeeze=False)
    axes[0, 0].plot([r["step"] for r in train], [r["loss"] for r in train], lw=0.8, label="train")
    if any("loss" in r for r in evals):
        axes[0, 0].plot(*curve("loss"), "o-", label="eval")
    axes[0, 0].set(xlabel="step", ylabel="loss", title="loss")
    axes[0, 0].legend()
    for ax, k in zip(axes[0, 1:], keys, strict=True):
        ax.plot(*curve(k), "o-")
        ax.set(xlabel="step", title=f"eval {k}")
    fig.tight_layout()
    return save_figure(fig, run_dir / "curves.png", dpi=110)
