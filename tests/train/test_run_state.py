"""Runs that never lie and checkpoints that verify themselves (issue 9, items 1, 5, 6): a rerun with other settings
is refused and leaves the run as it was; --fork-from continues the full state; a corrupt checkpoint is reported
and the newest good one used. Final parameters are compared exactly with an uninterrupted run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from cli_utils import NOISE, SMALL, assert_same_params, final_params, metrics, one_clean_line, run_main_many, run_train

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("run_state")]
ARGS = [*SMALL, "--param", "mup", "--base-width", "16", "--steps", "40", "--ckpt-every", "10", "--keep", "4",
        "--log-every", "5"]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """An uninterrupted 40-step run (checkpoints 10, 20, 30, 40)."""
    run = tmp_path_factory.mktemp("whole") / "run"
    proc = run_train([*ARGS, "--run-dir", str(run)])
    assert proc.returncode == 0, proc.stderr
    return run


@pytest.fixture(scope="module")
def whole40(whole):
    """The parameters of the uninterrupted run."""
    return final_params(whole)


@pytest.fixture(scope="module")
def base30(whole, tmp_path_factory):
    """The same run as if killed after saving step 30 (checkpoints 10, 20, 30, and metrics rows past step 30 that a
    resume drops); tests copy it before changing it."""
    run = tmp_path_factory.mktemp("base30") / "run"
    shutil.copytree(whole, run)
    shutil.rmtree(run / "checkpoints" / "40")
    (run / "summary.json").unlink()
    return run


def _copy(src, tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return dst


def _listing(run):
    return sorted((str(p.relative_to(run)), p.stat().st_size) for p in run.rglob("*") if p.is_file())


def test_changed_settings_are_refused_then_the_same_settings_resume_exactly(base30, whole40, tmp_path):
    run = _copy(base30, tmp_path)
    before, config = _listing(run), (run / "config.json").read_bytes()
    proc = run_train([*ARGS, "--lr", "0.01", "--warmup", "2", "--run-dir", str(run)])
    line = one_clean_line(proc)
    assert "lr 0.001 -> 0.01" in line and "warmup 0 -> 2" in line and "--fork-from" in line, line
    assert _listing(run) == before and (run / "config.json").read_bytes() == config  # nothing rewritten
    resumed = run_train([*ARGS, "--run-dir", str(run)])
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed {run} from step 30" in resumed.stderr
    assert_same_params(final_params(run), whole40)
    steps = [r["step"] for r in metrics(run)]
    assert steps == sorted(set(steps)) == list(range(5, 45, 5))  # no row written twice


def test_fork_continues_the_full_state_under_new_settings(base30, whole40, tmp_path):
    """A fork with the same settings equals the uninterrupted run (params, moments, step, RNG and data position all
    carried); a fork with a new LR records it and its origin in its config and starts at the forked step; a fork
    with other data settings on the same data (an augmentation) continues too."""
    same, lower, augmented = tmp_path / "same", tmp_path / "lower", tmp_path / "augmented"
    (code, err), (lowered, lower_err), (aug_code, aug_err) = run_main_many([
        [*ARGS, "--fork-from", f"{base30}:20", "--run-dir", str(same)],
        [*ARGS, "--steps", "35", "--lr", "3e-4", "--fork-from", str(base30), "--run-dir", str(lower)],
        [*ARGS, "--steps", "31", "--augment", "crop_flip", "--fork-from", str(base30), "--run-dir", str(augmented)]])
    assert aug_code == 0 and f"forked {base30} at step 30" in aug_err, aug_err
    assert code == 0 and f"forked {base30} at step 20" in err, err
    assert_same_params(final_params(same), whole40)
    assert lowered == 0, lower_err
    config = json.loads((lower / "config.json").read_text())
    assert config["optim"]["lr"] == 3e-4 and config["loop"]["fork_from"] == str(base30)
    assert [r["step"] for r in metrics(lower)] == [35]  # forked at the source's newest step, 30


def _flip(run, step):
    """Flip 8 bytes in the middle of the largest array data file of checkpoint `step`."""
    data = max((p for p in (run / "checkpoints" / str(step) / "state").rglob("*") if p.is_file()),
               key=lambda p: p.stat().st_size)
    raw = bytearray(data.read_bytes())
    for i in range(len(raw) // 2, len(raw) // 2 + 8):
        raw[i] ^= 0xFF
    data.write_bytes(bytes(raw))


def test_bit_flip_falls_back_to_the_newest_good_checkpoint(base30, whole40, tmp_path):
    run = _copy(base30, tmp_path)
    _flip(run, 30)
    half_deleted = run / "checkpoints" / "trash" / "10" / "state"  # a keep-N deletion killed half way
    half_deleted.mkdir(parents=True)
    (half_deleted / "junk").write_bytes(b"x" * 100)
    proc = run_train([*ARGS, "--run-dir", str(run)])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    bad = next(line for line in lines if "checkpoints/30" in line)
    assert "fails its checksum" in bad or "cannot be read" in bad, bad
    assert f"resumed {run} from step 20" in proc.stderr
    assert (run / "corrupt" / "30").is_dir()  # moved aside, not deleted
    assert not (run / "checkpoints" / "trash").exists()
    assert not any(word in proc.stderr for word in NOISE), proc.stderr
    assert_same_params(final_params(run), whole40)


def test_no_readable_checkpoint_is_one_line_and_nothing_moves(base30, tmp_path):
    run = _copy(base30, tmp_path)
    for step in (10, 20, 30):
        _flip(run, step)
    before = _listing(run)
    line = one_clean_line(run_train([*ARGS, "--run-dir", str(run)]))
    assert "no checkpoint" in line and "nothing was deleted" in line, line
    assert _listing(run) == before


def test_diverging_run_stops_before_saving_and_says_how_to_go_on(tmp_path):
    """Adam at lr 1e6: the loss stays finite but runs far above its start (or the gradient norm overflows); the
    run stops with status 1, no saved checkpoint holds the diverged state, and the message names --fork-from."""
    run = tmp_path / "div"
    proc = run_train([*SMALL, "--steps", "40", "--ckpt-every", "1", "--lr", "1e6", "--run-dir", str(run)])
    line = one_clean_line(proc)
    assert proc.returncode == 1
    assert ("above 10x the first logged loss" in line or "gradient norm became" in line), line
    assert "--fork-from" in line or "new --run-dir" in line, line
    rows = metrics(run)
    first = rows[0]["loss"] if rows else None
    params = final_params(run) if (run / "checkpoints").exists() and any((run / "checkpoints").iterdir()) else {}
    assert all(np.isfinite(v).all() for v in params.values())
    assert all(r["loss"] <= 10 * first for r in rows)
    assert not (run / "summary.json").exists()
