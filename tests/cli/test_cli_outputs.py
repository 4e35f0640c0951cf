"""What a command prints and where it writes, whatever the environment: result tables whole at any $COLUMNS, --help
and the JAX-free commands under a JAX_PLATFORMS that cannot start, a full or closed stdout, an unset JAX_PLATFORMS
not blamed for XLA_FLAGS, --out and --run-dir given once, negative LR grids as values, and each diagnostic's output
in a folder of its own (outside probe CK)."""

from __future__ import annotations

import io
import subprocess
import sys
from shlex import quote

import pytest
from cli_utils import ROOT, child_env, one_line_error
from rich.table import Table

from zoo.cli import coord_check, criticality, sweep, train
from zoo.cli.tables import console_for
from zoo.sweeps.grid import parse_lrs


def test_a_table_prints_whole_at_any_width(monkeypatch):
    """rich fits a table to $COLUMNS by shrinking its cells ('2.42…' at 40 columns, every cell empty at 10): the
    console of a result table is at least as wide as the table."""
    table = Table(title="a sweep")
    for name in ("width", "best log2 LR", "best train loss"):
        table.add_column(name)
    table.add_row("16", "-9.96578 (grid edge)", "2.4248")
    for columns in ("10", "40", "300"):
        monkeypatch.setenv("COLUMNS", columns)
        console = console_for(table)
        console.file = io.StringIO()
        console.print(table)
        text = console.file.getvalue()
        assert "-9.96578 (grid edge)" in text and "2.4248" in text and "best train loss" in text, (columns, text)
        assert console.width >= int(columns)


def child(args: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    kw = {"capture_output": True, **kw}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=child_env(env), text=True, timeout=120, **kw)


@pytest.mark.slow
def test_help_and_the_jax_free_commands_run_under_a_backend_that_cannot_start(tmp_path):
    """A CPU login node under a cluster's JAX_PLATFORMS=cuda: --help printed the backend's error in every command
    but train.py, and zoo.data.prepare, which computes nothing with JAX, could not run."""
    gpu = {"JAX_PLATFORMS": "cuda"}
    shown = child(["-m", "zoo.sweep", "--help"], gpu)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: python -m zoo.sweep"), shown.stderr
    (tmp_path / "corpus.txt").write_text("hello world\n" * 50)
    made = child(["-m", "zoo.data.prepare", "text", str(tmp_path / "corpus.txt"), "--out", str(tmp_path / "tok"),
                  "--tokenizer", "char"], gpu)
    assert made.returncode == 0 and (tmp_path / "tok" / "meta.json").is_file(), made.stderr
    refused = child(["-m", "zoo.sweep", "--out", str(tmp_path / "s"), "--data", "synthetic"], gpu)
    assert refused.returncode == 1 and "JAX_PLATFORMS=cuda asks for a backend" in refused.stderr


@pytest.mark.slow
def test_a_full_or_closed_stdout_and_bad_xla_flags_are_one_line(tmp_path):
    """stdout to /dev/full was 'no space left on the device writing .' with the working folder's free space; a closed
    stdout an 'unexpected AttributeError'; XLA_FLAGS with no devices blamed JAX_PLATFORMS=None, which was unset."""
    with open("/dev/full", "w") as full:
        proc = child([str(ROOT / "train.py"), "--print-config"], {}, stdout=full, stderr=subprocess.PIPE,
                     capture_output=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: No space left on device writing the output (stdout, sent to a file or " \
                                  "device that is full)"
    command = f"{quote(sys.executable)} {quote(str(ROOT / 'train.py'))} --print-config >&-"
    closed = subprocess.run(["bash", "-c", command], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                            timeout=120)
    assert closed.returncode == 1 and closed.stderr.startswith("error: stdout is closed (>&-)"), closed.stderr
    run = tmp_path / "trained"  # a run prints to stderr only: it trains with stdout closed, as it did before
    command = (f"{quote(sys.executable)} {quote(str(ROOT / 'train.py'))} --data synthetic --width 8 --depth 1 "
               f"--batch-size 8 --steps 2 --run-dir {quote(str(run))} >&-")
    trained = subprocess.run(["bash", "-c", command], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                             timeout=300)
    assert trained.returncode == 0 and (run / "summary.json").is_file(), trained.stderr
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=0"}
    none = child([str(ROOT / "train.py"), "--data", "synthetic", "--run-dir", str(tmp_path / "r")],
                 {**env, "JAX_PLATFORMS": ""})
    assert none.returncode == 1 and "JAX_PLATFORMS" not in none.stderr, none.stderr
    assert "JAX could not start a backend" in none.stderr and "device_count=0" in none.stderr
    assert not (tmp_path / "r").exists()


def test_where_the_output_goes_is_given_once(capsys):
    """A copied command's second --out or --run-dir was taken silently; other settings still take the last."""
    line = one_line_error(sweep.main, ["--out", "a", "--out", "b", "--report-only"], capsys)
    assert "--out given twice (a and b): give it once" in line
    line = one_line_error(train.main, ["--run-dir", "a", "--run-dir", "b", "--print-config"], capsys)
    assert "--run-dir given twice (a and b): give it once" in line
    line = one_line_error(criticality.main, ["--out", "runs/criticality", "--out", "b"], capsys)  # the default first
    assert "--out given twice (runs/criticality and b): give it once" in line


def test_a_missing_init_from_says_it_does_not_exist(tmp_path, capsys):
    """It said 'no checkpoints/ folder there (is it a run dir?)' of a path that is not there at all."""
    line = one_line_error(train.main, ["--data", "synthetic", "--width", "8", "--depth", "1", "--steps", "1",
                                       "--init-from", str(tmp_path / "nowhere"), "--run-dir", str(tmp_path / "r")],
                          capsys)
    assert line == f"error: --init-from {tmp_path / 'nowhere'}: no run dir there (it does not exist)"
    assert not (tmp_path / "r").exists()


def test_a_grid_of_negative_exponents_is_a_value():
    """`--lrs -12:-4:4` was read as a flag ('expected one argument'); only --lrs=-12:-4:4 worked. A word that starts
    with a dash and a letter is still a flag."""
    args = sweep.parser().parse_args(["--out", "s", "--lrs", "-12:-4:4"])
    assert parse_lrs(args.lrs) == pytest.approx([2.0**-12, 2.0**-8, 2.0**-4])
    with pytest.raises(SystemExit):
        sweep.parser().parse_args(["--out", "s", "--lrs", "-x"])
    assert sweep.parser().parse_args(["--out", "s", "--lrs", "-inf"]).lrs == "-inf"  # parse_lrs then names it


def test_a_diagnostic_writes_into_no_other_commands_folder(tmp_path, capsys):
    """coord_check and criticality wrote their figures beside a sweep's or a run's files, and a sweep into a
    coordinate check's folder: each is refused in one line, before anything is measured."""
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.json").write_text("{}")
    (tmp_path / "cc").mkdir()
    (tmp_path / "cc" / "coord_check_width.json").write_text("{}")
    line = one_line_error(coord_check.main, ["--widths", "8,16", "--out", str(tmp_path / "sweep")], capsys)
    assert line.endswith("holds a sweep (sweep.json); give the coord check a folder of its own"), line
    line = one_line_error(criticality.main, ["--width", "8", "--depth", "2", "--out", str(tmp_path / "cc")], capsys)
    assert "holds a coord check (coord_check_width.json); give the criticality report a folder of its own" in line
    line = one_line_error(sweep.main, ["--out", str(tmp_path / "cc"), "--lrs", "1e-3", "--data", "synthetic"], capsys)
    assert "holds a coord check (coord_check_width.json); give the sweep a folder of its own" in line
    line = one_line_error(criticality.main, ["--grid", "sigma_w=1:2:2", "--find", "sigma_w=1:2", "--out",
                                             str(tmp_path / "c")], capsys)
    assert line == "error: --grid maps chi over two options and --find bisects one: give one of them"


def test_a_law_folder_is_named_as_a_folder(tmp_path):
    """--policy-opt law=DIR (the fit's --out, not its law.json) said 'no law file DIR'."""
    from zoo.fit.lawfile import read_law

    with pytest.raises(IsADirectoryError, match=f"{tmp_path} is a folder, not a law file: give the law.json in it"):
        read_law(tmp_path)
