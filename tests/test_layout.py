"""The tests mirror the package: every package of zoo/ has a folder of tests of the same name under tests/."""

from __future__ import annotations

from cli_utils import ROOT


def test_every_package_has_its_test_folder():
    packages = {p.parent.name for p in (ROOT / "zoo").glob("*/__init__.py")}
    tested = {p.parent.name for p in (ROOT / "tests").glob("*/test_*.py")}
    assert packages, "no package found under zoo/"
    assert not packages - tested, f"zoo/ packages without a tests/ folder: {sorted(packages - tested)}"
