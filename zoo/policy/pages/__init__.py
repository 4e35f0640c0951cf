"""The scaling policies shown at a scale a 2-core CPU runs (issue 42): a page each in docs/policies/, with its
command, figure and a verdict computed from its numbers (zoo.papers.page renders them as it renders the papers').

    python -m zoo.policy list
    python -m zoo.policy run sde-batch [--quick] [--out docs/policies]
"""

from __future__ import annotations

from pathlib import Path

from zoo.papers.claim import Claim
from zoo.papers.page import Shelf
from zoo.policy.pages import fit_width, horizon, sde_batch, timescale_wd

MODULES = (sde_batch, timescale_wd, horizon, fit_width)
CLAIMS: dict[str, Claim] = {m.CLAIM.name: m.CLAIM for m in MODULES}
SHELF = Shelf("zoo.policy", "Scaling policies, shown",
              "Each page below tests one scaling policy (zoo.policy) or zoo.fit on sweeps this repository's 2-core CPU "
              "runs in under 30 minutes; the verdict is computed from the run's numbers (`results.json`), and where a "
              "rule fails at this scale the page says so and why.", lambda: CLAIMS, Path("docs") / "policies",
              Path("runs") / "policies-quick")
