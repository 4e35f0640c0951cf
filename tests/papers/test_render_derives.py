"""`python -m zoo.papers render` derives everything a claim stores from its raw numbers: the fits, the checks and the
verdict, written back into results.json (issue 41)."""

from __future__ import annotations

import json

import zoo.papers as papers

SETTING = {"width": 8, "depth": 10, "in_dim": 4, "seeds": 1, "batch": 1, "probes": 1, "cases": [0]}


def record(profile: list[float], verdict: str) -> dict:
    """dhg-apjn's results.json as a run before this fix wrote it: the measured profile J^{0,l} (l = 0..10) beside the
    exponent fitted from it, a flat infinite-width profile, and the verdict and checks of a flat measured one."""
    row = {"label": "ReLU", "activation": "relu", "pre_ln": False, "mu": 0.0, "sigma_w": 1.4142, "apjn": profile,
           "stderr": [0.0] * len(profile), "infinite_width": [1.0] * len(profile), "paper_exponent": 0.0,
           "exponent": 0.0, "theory_exponent": 0.0}
    return {"claim": "dhg-apjn", "quick": True, "command": "python -m zoo.papers run dhg-apjn --quick",
            "verdict": verdict, "checks": [{"claim": "ReLU", "rule": "", "measured": "measured +0.000, theory +0.000",
                                            "passed": verdict == "reproduced", "why_not": ""}],
            "numbers": {"setting": SETTING, "rows": [row]}}


def test_render_rewrites_the_verdict_from_the_stored_curve(tmp_path):
    """render recomputed the verdict for the page but kept results.json's own, and the check read the stored fitted
    exponent: with the curve edited to J ~ l^-1 the figure drew it while results.json and the page still said
    'reproduced' from the exponent 0 stored beside it. Now the fit, the checks and the verdict come from the curve,
    in results.json as on the page; and a stored verdict that is not the numbers' is replaced."""
    claim = papers.get("dhg-apjn")
    folder = tmp_path / claim.name
    folder.mkdir()
    results = folder / "results.json"
    results.write_text(json.dumps(record([1.0] * 11, "not reproduced")))
    papers.render(claim, tmp_path, papers.PAPERS)
    assert json.loads(results.read_text())["verdict"] == "reproduced"  # the stale verdict replaced
    results.write_text(json.dumps(record([1.0, *(1.0 / l for l in range(1, 11))], "reproduced")))
    papers.render(claim, tmp_path, papers.PAPERS)
    stored = json.loads(results.read_text())
    assert stored["verdict"] == "not reproduced"
    assert [c["passed"] for c in stored["checks"]] == [False]
    assert stored["checks"][0]["measured"] == "measured -1.000, theory +0.000"
    assert "**Verdict: not reproduced**" in (folder / "README.md").read_text()
