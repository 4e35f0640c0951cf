"""`zoo.audit`: the rules a run really applies, measured (issue 18; design.md section 8b).

For every parameter, at two or more widths (and depths), under the run's real optax chain, mesh, gradient
accumulation and precision: the init's RMS and spectral norm, the forward multiplier (the variable and the power
with which the forward pass applies it), the first update's RMS and spectral norm (effective: times the
multiplier), the per-step weight-decay shrink, and Adam's epsilon against its second moment; and each forward
multiplier that sits on no parameter (residual-branch multipliers, attention scales, a tied readout's). Each is
fitted against size and compared with the law the plugin's stated rules give (zoo.audit.laws), one PASS/FAIL per
parameter or multiplier.

    from zoo.audit import ZooRun, audit
    result = audit(ZooRun("gpt", zoo.param.get("mup"), OptimConfig("muon", lr=1e-2)), widths=[64, 128, 256])
    result.passed, result.failures()

    probe.py     one size: init, a real step, a zero-gradient step, Adam's v, multiplier powers (one jitted program)
    measure.py   RMS, power-iteration spectral norms, shrink, multiplier power
    shapes.py    kinds and branch membership from shapes across sizes
    laws.py      theory's law for each quantity
    judge.py     slopes and verdicts
    sweep.py     the sizes of an audit, put together
    subjects.py  a zoo run at any size
    report.py    table and JSON
"""

from zoo.audit.subjects import AnyRun, ZooRun
from zoo.audit.sweep import Audit, audit

__all__ = ["AnyRun", "Audit", "ZooRun", "audit"]
