"""Every command zoo documents or can run: `python -m zoo.X --help` (and `python train.py --help`) prints its usage
and exits 0, run as `python -m` runs it (runpy, as __main__). The set is the union of the `python -m zoo...` commands
that README.md and docs/ show and the modules zoo makes runnable (a package's __main__.py, a module's
`if __name__ == "__main__"`); a documented command that is not runnable fails."""

from __future__ import annotations

import re
import runpy
import warnings

import pytest
from cli_utils import ROOT


def runnable() -> set[str]:
    found = {".".join(p.relative_to(ROOT).parent.parts) for p in (ROOT / "zoo").rglob("__main__.py")}
    for path in (ROOT / "zoo").rglob("*.py"):
        if path.name not in ("__main__.py", "__init__.py") and 'if __name__ == "__main__"' in path.read_text():
            found.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found


def documented() -> set[str]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {m for page in pages for m in re.findall(r"python -m (zoo(?:\.\w+)+)", page.read_text())}


def test_every_documented_command_is_runnable():
    assert documented() - runnable() == set()
    assert {"zoo.sample", "zoo.data.prepare", "zoo.sweep", "zoo.transfer", "zoo.coord_check", "zoo.criticality",
            "zoo.audit", "zoo.papers", "zoo.export"} <= runnable()


@pytest.mark.parametrize("module", sorted(runnable() | documented()) + ["train.py"])
def test_help_runs(module, capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", [module, "--help"])
    with pytest.raises(SystemExit) as stop, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module was imported before (by other tests)
        if module == "train.py":
            runpy.run_path(str(ROOT / module), run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    out = capsys.readouterr().out
    assert stop.value.code == 0 and out.startswith("usage: " + ("train.py" if module == "train.py" else
                                                                   f"python -m {module}")), out[:200]
