"""The committed pages of both shelves (docs/papers, docs/policies) say what their stored numbers say: each
results.json's checks and verdict, and its README, are what `render` derives from its numbers today (a check added
or reworded since a page was rendered left its results.json stale)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from zoo.papers import PAPERS, page
from zoo.papers.claim import verdict
from zoo.policy.pages import SHELF as POLICIES

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = [(DOCS / "papers", name, claim) for name, claim in PAPERS.claims().items()] + \
        [(DOCS / "policies", name, claim) for name, claim in POLICIES.claims().items()]


@pytest.mark.parametrize("root,name,claim", PAGES, ids=[name for _, name, _ in PAGES])
def test_a_committed_page_is_what_its_numbers_render_to(root, name, claim):
    record = page.read(root / name)
    checks = claim.checks(record["numbers"])
    assert record["checks"] == [dataclasses.asdict(c) for c in checks], f"render {name}: its results.json is stale"
    assert record["verdict"] == verdict(checks)
    text = page.page(claim, record["numbers"], checks, record["command"], record.get("quick") is True)
    assert (root / name / "README.md").read_text() == text, f"render {name}: its README is stale"
