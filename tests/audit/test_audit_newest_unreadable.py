"""`zoo.audit RUN` when the run's newest checkpoint cannot be read (issue 41, item 14): it audited an older one
without a word and printed PASS as if of the run's newest. Now each unreadable checkpoint is said, and the verdict
names the checkpoint audited. (The measurement itself, which reads nothing of the run dir's checkpoints, is left
out: an audit that finds every rule kept.)"""

from __future__ import annotations

import shutil

import pytest
from cli_utils import saved_run

from zoo.cli import audit


def test_the_audit_of_an_older_checkpoint_says_so(tmp_path, capsys, monkeypatch):
    import zoo.audit

    monkeypatch.setattr(zoo.audit, "audit", lambda run, widths, depths, **kw: zoo.audit.Audit({}, [], kw["tol"]))
    run = saved_run(tmp_path / "run", steps=(2, 4))
    for data in (run / "checkpoints" / "4" / "state").iterdir():  # the newest checkpoint's arrays are gone
        if data.is_dir():
            shutil.rmtree(data)
    with pytest.raises(SystemExit) as done:
        audit.main([str(run), "--json", str(tmp_path / "audit.json")])
    assert done.value.code == 0
    out = capsys.readouterr().out
    verdict = out.strip().splitlines()[-1]
    assert "not the run's newest: 1 newer cannot be read" in verdict and "checkpoint 2" in verdict, verdict
    assert f"{run / 'checkpoints' / '4'} cannot be read" in out, out
