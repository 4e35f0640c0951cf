"""zoo.papers: every claim runs end to end in its --quick form and writes a figure, a results.json and a page whose
verdict and measured numbers are the ones recomputed from the JSON's numbers (never written by hand)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_utils import child_env, clean_error

import zoo.papers as papers
from zoo.cli.papers import main
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
    assert f"**Verdict: {verdict(checks)}**" in page
    assert record["command"] == f"python -m zoo.papers run {name} --quick --out {out}"
    for c in checks:  # the page states the numbers the JSON holds
        assert _cell(c.measured) in page and _cell(c.rule) in page
    assert _cell(claim.result(record["numbers"])) in page
    assert f"[{name}]({name}/README.md)" in (out / "README.md").read_text()


def test_command_line_lists_and_renders(out, capsys):
    main(["list"])
    listed = capsys.readouterr().out
    assert all(name in listed for name in papers.CLAIMS)
    name = "lecture-hanin-nica"
    if not (out / name / "results.json").exists():  # run alone, or its quick test ran on another worker
        papers.run(name, quick=True, out=out)
    (out / name / "figure.png").unlink()
    main(["render", name, "--out", str(out)])
    assert (out / name / "figure.png").exists() and capsys.readouterr().out.strip() == str(out / name)


@pytest.mark.parametrize("argv, status, message", [
    (["run", "nope"], 2, "invalid choice: 'nope'"),
    (["run"], 2, "the following arguments are required: NAME"),
    (["run", "dhg-apjn", "--quick", "--steps", "3"], 2, "unrecognized arguments: --steps 3"),
    (["--processes", "2", "run", "dhg-apjn"], 2, "--processes is an option of a command: put it after the command"),
    (["run", "dhg-apjn", "--quick", "--out", "{file}"], 1, "is a file, not a folder"),
    (["run", "dhg-apjn", "--quick", "--out", "{file}/sub"], 1, "cannot write under the output root"),
    (["render", "yaida-family", "--out", "{empty}"], 1, "results.json is missing"),
])
def test_bad_input_is_one_line_before_any_experiment(argv, status, message, tmp_path, capsys):
    """A bad NAME, flag or output root is one line and a non-zero status, and a bad root is refused before the
    experiment runs (the claim's folder is never created)."""
    (tmp_path / "file").write_text("keep")
    argv = [a.format(file=tmp_path / "file", empty=tmp_path / "empty") for a in argv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == status and message in clean_error(e.value.code, capsys.readouterr().err)
    assert (tmp_path / "file").read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize("blocker, message", [("dhg-apjn", "dhg-apjn is a file, where the claim's folder goes"),
                                              ("README.md/", "README.md is a folder, where the claim writes a file")])
def test_a_claim_folder_or_index_in_the_way_is_refused_before_the_experiment(blocker, message, tmp_path, capsys):
    """A file where the claim's folder goes, or a folder where the index goes, is refused before the claim runs
    (it used to run the experiment, then fail to write it)."""
    if blocker.endswith("/"):
        (tmp_path / blocker).mkdir()
    else:
        (tmp_path / blocker).write_text("keep")
    with pytest.raises(SystemExit) as e:
        main(["run", "dhg-apjn", "--quick", "--out", str(tmp_path)])
    err = capsys.readouterr()
    assert e.value.code == 1 and message in clean_error(1, err.err) and "exponent" not in err.out + err.err


@pytest.mark.parametrize("command", ["run", "render"])
@pytest.mark.parametrize("where, readme, what", [
    ("", "# my notes\n", "the index of zoo.papers's claims"),
    ("", "# Scaling policies, shown\n\n| claim |\n", "the index of zoo.papers's claims"),
    ("dhg-apjn/", "# my notes on dhg-apjn\n", "dhg-apjn's page")])
def test_a_readme_that_is_not_this_shelfs_is_kept(command, where, readme, what, tmp_path, capsys):
    """The index OUT/README.md and the claim's page OUT/NAME/README.md replaced whatever README.md was there: a
    user's own file, or the policies' index where the papers were written into the same root. Each is refused in one
    line and kept; the shelf's own index and page are rewritten as before (test_quick_claim_writes_a_page...)."""
    path = tmp_path / where / "README.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(readme)
    with pytest.raises(SystemExit) as e:
        main([command, "dhg-apjn", *(["--quick"] if command == "run" else []), "--out", str(tmp_path)])
    err = capsys.readouterr()
    assert e.value.code == 1 and f"README.md is not {what}, which would replace it" in clean_error(1, err.err)
    assert path.read_text() == readme and sorted(p.name for p in path.parent.iterdir()) == ["README.md"]


def test_module_entry_point_is_the_command_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "zoo.papers", "run", "nope"], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "invalid choice: 'nope'" in clean_error(proc.returncode, proc.stderr)


@pytest.mark.parametrize("text, message", [
    ("{garbage", "is not JSON"), ('{"a": 1}', "is not a claim's results"),
    ('{"numbers": {"x": 1}, "command": 5}', "it needs 'numbers' and a 'command' string"),
    (None, "results.json is a directory, not a claim's results"),  # said 'results.json is missing'
    ('{"numbers": {"x": 1}, "command": "c"}', "does not hold this version's numbers of yaida-family")])
def test_render_of_results_that_are_not_the_claims_is_one_line(text, message, tmp_path, capsys):
    """A results.json that is not JSON, not a claim's record, or another version's numbers: one line naming it, and
    the index lists such a claim as stale."""
    folder = tmp_path / "yaida-family"
    folder.mkdir()
    if text is None:
        (folder / "results.json").mkdir()
    else:
        (folder / "results.json").write_text(text)
    with pytest.raises(SystemExit) as e:
        main(["render", "yaida-family", "--out", str(tmp_path)])
    assert message in clean_error(e.value.code, capsys.readouterr().err)
    assert ("**stale: rerun it**" in papers.page.index(tmp_path, papers.PAPERS)) == (text is not None)


def test_a_quick_run_never_lands_beside_the_full_runs(tmp_path, monkeypatch, capsys):
    """Without --out a full run writes docs/papers/NAME/, a quick one runs/papers-quick/NAME/ (a quick run into the
    default used to replace the committed full run's outputs)."""
    monkeypatch.chdir(tmp_path)
    main(["run", "dhg-apjn", "--quick"])
    assert capsys.readouterr().out.strip().endswith(str(Path("runs") / "papers-quick" / "dhg-apjn"))
    record = json.loads((tmp_path / "runs" / "papers-quick" / "dhg-apjn" / "results.json").read_text())
    assert record["command"] == "python -m zoo.papers run dhg-apjn --quick"  # the default root is not named
    assert not (tmp_path / "docs").exists()


def test_a_quick_run_into_a_full_runs_folder_is_refused(tmp_path, capsys):
    """`run NAME --quick --out DIR` over DIR/NAME/ of a full run replaced its results, figure and page with the tiny
    run's (and the index's verdict with the tiny run's), exit 0. It is refused in one line now, the full run kept;
    a quick run over a quick one is rewritten, and its page says it is one."""
    main(["run", "dhg-apjn", "--quick", "--out", str(tmp_path)])
    page = (tmp_path / "dhg-apjn" / "README.md").read_text()
    assert "*A `--quick` run: the tiny version of the setting" in page
    path = tmp_path / "dhg-apjn" / "results.json"
    full = path.read_text().replace('"quick": true', '"quick": false')
    path.write_text(full)
    with pytest.raises(SystemExit) as e:
        main(["run", "dhg-apjn", "--quick", "--out", str(tmp_path)])
    assert e.value.code == 1 and f"{tmp_path / 'dhg-apjn'} holds dhg-apjn's full run, which a --quick run would " \
        "replace: give another --out" in clean_error(1, capsys.readouterr().err)
    assert path.read_text() == full


def test_render_of_numbers_only_the_plot_cannot_read_is_one_line(tmp_path):
    """papers render: numbers that pass the checks but not the plot (a profile edited into a string) were an
    unexpected TypeError with a traceback file; now the line that stale numbers get, and no temporary figure."""
    import json

    from zoo.papers import page

    class Claim:
        name = "stub"

        def checks(self, numbers):
            return []

        def plot(self, numbers, path):
            path.write_bytes(b"half a png")
            raise TypeError("len() of unsized object")

    (tmp_path / "stub").mkdir()
    (tmp_path / "stub" / "results.json").write_text(json.dumps({"numbers": {"apjn": "x"}, "command": "c"}))
    with pytest.raises(ValueError, match="does not hold this version's numbers of stub .*rerun the claim"):
        page.render(Claim(), tmp_path, papers.PAPERS)
    assert sorted(p.name for p in (tmp_path / "stub").iterdir()) == ["results.json"]
