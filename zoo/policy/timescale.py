"""AdamW's weight decay as an EMA timescale (Wang & Aitchison, ICML 2025): tau = B / (lr wd D), in epochs of D, held
fixed across scales, so wd' = wd (B/B0) (lr/lr') (D0/D). D counts the examples of each run's budget, B T (`data`
budget: one pass, as in LLM pretraining, tau a fixed fraction of the run: wd ~ 1/T at a fixed LR, nanochat's
D_ref/D), or of the training set (`data` dataset: epochs over a fixed set, as Wang & Aitchison's image runs; the
sizes come with the change, and a change without them, as every command's but zoo.transfer's, trains both on one set:
D0 = D). The batch rules (LR, betas, epsilon, warmup) are the SDE rules' (zoo.policy.sde), so with D fixed this is
`sde`: a batch change at a fixed number of examples gives the same target under both.

Under muP the per-parameter LR falls with fan-in, and the timescale's wd grows with it (Wang & Aitchison): zoo's
chain adds the decay after the LR multiplier, so that factor is realised once, per parameter (zoo.policy.base); this
policy only moves the global wd.
"""

from __future__ import annotations

import dataclasses

from zoo.policy.base import Change
from zoo.policy.sde import SDE

DATA = ("budget", "dataset")


@dataclasses.dataclass(frozen=True)
class Timescale(SDE):
    name = "timescale"

    data: str = "budget"  # what D counts: each run's budget B T, or the training set (epochs)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.data not in DATA:
            raise ValueError(f"policy timescale: data must be {' or '.join(DATA)}, got {self.data!r}")

    def examples_ratio(self, change: Change) -> tuple[float, str]:
        if self.data == "budget":
            return change.kappa * change.rho, "epochs of the budget B T (fractions of the run)"
        if change.proxy_data is None or change.data is None:  # zoo.sweep's, zoo.fit's, zoo.audit's: one --data
            return 1.0, "examples (the proxy's training set is the target's: D0 = D)"
        return change.data / change.proxy_data, "epochs of the training set"

    def proxy_examples(self, change: Change) -> float:
        if self.data == "budget":
            return float(change.proxy_batch * change.proxy_steps)
        return float(change.proxy_data or 1)
