"""LR sweeps: every LR x seed of a shape as one program, shapes one after another, a transfer report.

    spec = SweepSpec(run=resolve({"model": "mlp_resnet", "param": "depth_mup", "steps": 300}),
                     lrs=parse_lrs("2^-12:2^-4:1"), depths=[4, 16, 64], out=Path("sweeps/depth"))
    summary = report.summarize(run_sweep(spec))
"""

from zoo.sweeps import report
from zoo.sweeps.engine import MemberTrainer
from zoo.sweeps.grid import parse_ints, parse_lrs
from zoo.sweeps.runner import SweepSpec, run_sweep

__all__ = ["MemberTrainer", "SweepSpec", "parse_ints", "parse_lrs", "report", "run_sweep"]
