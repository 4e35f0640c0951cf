"""zoo.papers: every claim runs end to end in its --quick form and writes a figure, a results.json and a page whose
verdict and measured numbers are the ones recomputed from the JSON's numbers (never written by hand)."""

from __future__ import annotations

import json

import pytest

import zoo.papers as papers
from zoo.papers.__main__ import main
from zoo.papers.claim import verdict
from zoo.papers.page import _cell


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("papers")


@pytest.mark.parametrize("name", list(papers.CLAIMS))
def test_quick_claim_writes_a_page_whose_verdict_is_recomputed_from_its_numbers(name, out):
    folder = papers.run(name, quick=True, out=out)
    assert (folder / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = json.loads((folder / "results.json").read_text())
    claim = papers.get(name)
    checks = claim.checks(record["numbers"])  # from the JSON alone
    assert checks and record["verdict"] == verdict(checks)
    assert [c["passed"] for c in record["checks"]] == [c.passed for c in checks]
    page = (folder / "README.md").read_text()
    assert f"**Verdict: {verdict(checks)}**" in page and record["command"] == f"python -m zoo.papers run {name} --quick"
    for c in checks:  # the page states the numbers the JSON holds
        assert _cell(c.measured) in page and _cell(c.rule) in page
    assert _cell(claim.result(record["numbers"])) in page
    assert f"[{name}]({name}/README.md)" in (out / "README.md").read_text()


def test_command_line_lists_renders_and_refuses_in_one_line(out, capsys):
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in papers.CLAIMS)
    assert main(["run", "nope", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: unknown claim 'nope'; choose from {', '.join(papers.CLAIMS)}"]
    assert main(["render", "yaida-family", "--out", str(out / "empty")]) == 2
    assert "results.json is missing" in capsys.readouterr().err
    name = next(n for n in papers.CLAIMS if (out / n / "results.json").exists())
    (out / name / "figure.png").unlink()
    assert main(["render", name, "--out", str(out)]) == 0 and (out / name / "figure.png").exists()
