"""`zoo.audit RUN` on other devices than the run's (zoo.audit.rundir): a run's own mesh that the devices here cannot
form was refused as a --mesh the user never gave, and --mesh was refused with a run dir, so a multi-host run could
not be audited on one host. Now the line names the run's mesh, and --mesh measures under one these devices form
(the audit's numbers do not depend on the mesh: tests/audit/test_audit.py). The measurement itself is left out."""

from __future__ import annotations

import pytest
from cli_utils import TINY, saved_run

from zoo.cli import audit


def test_a_run_on_a_mesh_the_devices_here_cannot_form(tmp_path, capsys, monkeypatch):
    import zoo.audit

    measured = []

    def measure(run, widths, depths, **kw):
        measured.append(run.mesh)
        return zoo.audit.Audit({}, [], kw["tol"])

    monkeypatch.setattr(zoo.audit, "audit", measure)
    run = saved_run(tmp_path / "run", steps=(2,), argv=[*TINY, "--mesh", "fsdp=2"])
    report = tmp_path / "audit.json"
    with pytest.raises(SystemExit) as refused:
        audit.main([str(run), "--json", str(report)])
    err = capsys.readouterr().err.strip().splitlines()
    assert refused.value.code == 2 and len(err) == 1, err  # 2: an error, not the 1 of a FAIL
    assert err[0].startswith(f"error: {run} ran on the mesh fsdp=2, which the 1 device(s) here cannot form"), err
    assert "give --mesh for these" in err[0] and "--mesh fsdp=2" not in err[0] and not report.exists() and not measured
    with pytest.raises(SystemExit) as done:
        audit.main([str(run), "--mesh", "data=1", "--json", str(report)])
    assert done.value.code == 0 and measured == ["data=1"] and report.is_file()
    with pytest.raises(SystemExit) as bad:
        audit.main([str(run), "--mesh", "data=3", "--json", str(report)])
    assert bad.value.code == 2 and "--mesh data=3: data x fsdp x tensor = 3 must equal the 1 devices present" in \
        capsys.readouterr().err
