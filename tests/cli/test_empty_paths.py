"""An empty path (an unset shell variable) is a bad command line for every command, never the current folder:
one line naming the argument, exit status 2, nothing written. So is a path that is not UTF-8."""

from __future__ import annotations

import importlib

import pytest
from cli_utils import one_line_error

from zoo.cli import train as train_cli


@pytest.mark.parametrize("argv, argument", [
    (["zoo.sweep", "--out", "", "--lrs", "1e-3"], "--out"), (["zoo.transfer", "--out", " ", "--lrs", "1e-3"], "--out"),
    (["zoo.export", "RUN", "--out", ""], "--out"), (["zoo.export", "", "--out", "OUT"], "run_dir"),
    (["zoo.sample", ""], "run_dir"), (["zoo.papers", "run", "dhg-apjn", "--quick", "--out", ""], "--out"),
    (["zoo.data.prepare", "text", "", "--out", "OUT"], "source"),
    (["zoo.sweep", "--out", "OUT", "--lrs", "1e-3", "--compile-cache", ""], "--compile-cache"),
    (["zoo.export", "RUN", "--out", "x\udcff"], "--out"), (["zoo.coord_check", "--out", ""], "--out"),
    (["zoo.audit", "--json", ""], "--json"), (["zoo.audit", ""], "run_dir"),
    (["zoo.criticality", "--width", "8", "--depth", "2", "--seeds", "1", "--out", ""], "--out"),
    (["train", "--config", "", "--steps", "1"], "--config")])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(argv, argument, capsys, tmp_path, monkeypatch):
    """An empty --out or run dir used to write a sweep, a transfer, a claim, a coordinate check's record or
    criticality.json into whatever folder the shell was in (coord_check's --out and the audit's --json took '' as
    that folder), prepare tokenized that folder, `zoo.audit ""` audited the default model instead of the run (PASS
    for a run it never looked at), and `train.py --config ""` trained with no config file. A path that is not UTF-8
    is refused too: orbax cannot write it (the export failed after its work with an unexpected error)."""
    monkeypatch.chdir(tmp_path)
    main = importlib.import_module(f"zoo.cli.{argv[0].split('.')[-1]}").main
    with pytest.raises(SystemExit) as stop:
        main(argv[1:])
    out = capsys.readouterr()
    lines = [line for line in out.err.splitlines() if line.strip()]
    needle = "must be UTF-8 text" if "\udcff" in argv[-1] else "must not be empty"
    assert stop.value.code == 2 and len(lines) == 1 and lines[0].startswith(f"error: argument {argument}: {needle}")
    assert not out.out and not any(tmp_path.iterdir())


def test_a_fork_from_a_step_alone_is_refused(tmp_path, capsys, monkeypatch):
    """`--fork-from :3` (an unset run dir before a step) looked for the run in the current folder: one line, and
    nothing written."""
    monkeypatch.chdir(tmp_path)
    tiny = ["--width", "8", "--depth", "1", "--data", "synthetic:teacher", "--batch-size", "8", "--steps", "5"]
    line = one_line_error(train_cli.main, [*tiny, "--fork-from", ":3", "--run-dir", "fork"], capsys)
    assert line == "error: --fork-from :3 names no run dir before its step; give RUN_DIR:3"
    assert list(tmp_path.iterdir()) == []


def test_a_utf8_path_read_in_an_ascii_locale_is_called_so(tmp_path):
    """`LC_ALL=POSIX PYTHONUTF8=0 train.py --run-dir runs/ü`: Python decodes the argument's UTF-8 bytes as ASCII, with
    surrogate escapes, and the line said it 'must be UTF-8 text', which it is. It names the locale and the fix; bytes
    that are no UTF-8 are still called so."""
    import subprocess
    import sys

    from cli_utils import ROOT, child_env

    env = {**child_env(), "LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    for name, why in (b"runs/\xc3\xbc", b"is UTF-8, but this Python reads its arguments as ascii (the locale's): run "
                      b"it with PYTHONUTF8=1"), (b"runs/\xff", b"must be UTF-8 text"):
        proc = subprocess.run([sys.executable, "train.py", "--run-dir", tmp_path.as_posix().encode() + b"/" + name,
                               "--print-config"], cwd=ROOT, env=env, capture_output=True, timeout=120)
        assert proc.returncode == 1 and proc.stderr.count(b"\n") == 1, proc.stderr
        assert proc.stderr.startswith(b"error: --run-dir " + why), proc.stderr
    (tmp_path / "\u00fc").mkdir()  # a relative run dir below it: orbax failed at the first save, the training lost
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--model", "mlp_resnet", "--width", "8", "--depth",
                           "1", "--data", "synthetic", "--batch-size", "8", "--steps", "2", "--run-dir", "r"],
                          cwd=tmp_path / "\u00fc", env=env, capture_output=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.startswith(b"error: --run-dir r: its full path is UTF-8, but this "
                                                           b"Python reads its arguments as ascii"), proc.stderr
    assert not (tmp_path / "\u00fc" / "r").exists()
