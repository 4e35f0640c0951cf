"""A run dir that nothing can poison (issue 16, items 1-4, 15, 17): readers never touch a live run; the identity is
checked against the checkpoints' config when config.json is gone; the horizon is part of the identity; a refused
command writes nothing; a fork's bad step lists the saved ones; files follow the umask; a figure is written whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from cli_utils import (
    ROOT,
    SMALL,
    TINY_RUN,
    child_env,
    clean_error,
    run_main_many,
    run_mains,
    wait_for_rows,
)

from zoo.config import resolve
from zoo.errors import DiskFull
from zoo.files import save_figure
from zoo.train.loop import train

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("run_dir")]
TINY_GPT = ["--model", "gpt", "--width", "32", "--depth", "1", "--model-opt", "head_dim=16", "--batch-size", "4",
            "--seq-len", "16",
            "--data", "synthetic:text", "--eval-every", "100000", "--eval-batch-size", "64"]


# train.py whose every checkpoint stays in flight 1 s longer (its metadata is written 1 s late, in the async
# save's background commit): the live run still checkpoints every step while the readers work, a checkpoint in
# flight nearly all the time, but the loop, waiting for the last save before the next, does not spin a core
_PACED = """
import asyncio, sys
import orbax.checkpoint as ocp
write = ocp.JsonCheckpointHandler._save_fn
async def late(self, *args, **kwargs):
    await asyncio.sleep(1)
    await write(self, *args, **kwargs)
ocp.JsonCheckpointHandler._save_fn = late
from zoo.cli.train import main
main(sys.argv[1:])
"""


def test_readers_never_touch_a_live_run(tmp_path):
    """zoo.sample, zoo.export, --init-from and --fork-from read a run that checkpoints every step while it trains:
    each succeeds, the run keeps training and checkpointing (its in-flight checkpoints are not cleaned up under it),
    and it stops on SIGTERM with status 143 and no error. (The readers share one interpreter, each through its
    command's main: the live run is what must be another process.)"""
    run = tmp_path / "live"
    gpt = [*TINY_GPT, "--model-opt", "dropout=0"]  # dropout is not what this is about (its RNG doubles the compile)
    live = subprocess.Popen([sys.executable, "-c", _PACED, *gpt, "--steps", "100000", "--ckpt-every", "1", "--keep",
                             "100000", "--log-every", "1", "--run-dir", str(run)], cwd=ROOT, env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_rows(run, live, 3)
        sample = ("zoo.cli.sample", [str(run), "--prompt", "12", "--tokens", "5", "--temperature", "0"])
        readers = run_mains([
            sample, sample, ("zoo.cli.export", [str(run), "--out", str(tmp_path / "sp")]),
            ("zoo.cli.train", [*gpt, "--init-from", str(run), "--steps", "1", "--run-dir", str(tmp_path / "a")]),
            ("zoo.cli.train", [*gpt, "--fork-from", f"{run}:2", "--steps", "4", "--run-dir", str(tmp_path / "b")])])
        assert [code for code, _ in readers] == [0] * 5, readers
        assert f"forked {run} at step 2" in readers[-1][1]
        assert live.poll() is None
        newest = max(_steps(run))
        wait_for_rows(run, live, len((run / "metrics.jsonl").read_text().splitlines()) + 3)
        assert max(_steps(run)) > newest  # still checkpointing
    finally:
        live.send_signal(signal.SIGTERM)
        _, err = live.communicate(timeout=120)
    assert live.returncode == 143, err
    assert "cannot schedule new futures" not in err and "Traceback" not in err, err


def _steps(run) -> list[int]:
    return [int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit()]


@pytest.fixture(scope="module")
def mains(tmp_path_factory) -> dict:
    """Every train.py command of the tests below through its main, in one process, each on its own folders: a
    finished 6-step run (trained here) with its config.json lost, then rerun (`lost`: under other settings,
    `same`: the same command), then refused commands on it (`horizon`); refusals before a run dir exists and a run
    dir without checkpoints (`refused`, `started`); other programs' files (`foreign`); a run dir that cannot be
    written (`unwritable`). The folders and the files as they were before, by name."""
    from zoo.cli.train import config_from_args, parser

    root = tmp_path_factory.mktemp("mains")
    run = root / "run"
    args = [*SMALL, "--steps", "6", "--ckpt-every", "3", "--run-dir", str(run)]
    train(config_from_args(parser().parse_args(args)))
    stored = json.loads((run / "config.json").read_text())
    summary = (run / "summary.json").read_bytes()
    (run / "config.json").unlink()
    listing = sorted(p.name for p in run.iterdir())
    fork = str(root / "fork")
    argvs = {"lost": [*args[:-4], "--lr", "0.01", "--steps", "12", "--run-dir", str(run)], "same": args}
    horizon = [
        [*args[:-4], "--steps", "3", "--run-dir", str(run)],
        [*SMALL, "--steps", "3", "--fork-from", f"{run}:6", "--run-dir", fork],
        [*SMALL, "--steps", "6", "--fork-from", f"{run}", "--run-dir", fork],
        [*SMALL, "--steps", "9", "--fork-from", f"{run}:abc", "--run-dir", fork],
        [*SMALL, "--steps", "9", "--fork-from", f"{run}:4", "--run-dir", fork],
    ]

    new, unsaved = root / "new", root / "unsaved"
    unsaved.mkdir()
    started = [*SMALL, "--steps", "2", "--run-dir", str(unsaved)]
    other_lr = {**stored, "optim": {**stored["optim"], "lr": 0.5}, "loop": {**stored["loop"], "steps": 2}}
    (unsaved / "config.json").write_text(json.dumps(other_lr))  # the started command's but for its lr
    refused = [
        [*SMALL, "--steps", "2", "--model-opt", "activation=nope", "--run-dir", str(new)],
        [*SMALL, "--steps", "2", "--param", "depth_mup", "--param-opt", "alpha=nan", "--run-dir", str(new)],
        [*SMALL, "--steps", "2", "--mesh", "data=2", "--run-dir", str(new)],
        ["--model", "gpt", "--width", "64", "--depth", "1", "--data", "shakespeare", "--seq-len", "65536",
         "--batch-size", "64", "--run-dir", str(new)],
    ]
    argvs["started"] = started

    config, other = root / "project", root / "other"
    foreign = json.dumps({"name": "my project", "version": 3})
    for folder, name in ((config, "config.json"), (other, "summary.json")):  # nor a metrics.jsonl or curves.png
        folder.mkdir()
        (folder / name).write_text(foreign)
    argvs["config"], argvs["other"] = ([*SMALL, "--steps", "2", "--run-dir", str(f)] for f in (config, other))

    no_ckpts = root / "no_ckpts"
    no_ckpts.mkdir()
    (no_ckpts / "checkpoints").write_text("not a folder")
    folders = {name: root / name.replace(".", "_") for name in ("metrics.jsonl", "summary.json", "curves.png")}
    for name, folder in folders.items():
        (folder / name).mkdir(parents=True)  # found after the compile, or after training, naming a temporary file
    unwritable = [[*SMALL, "--steps", "2", "--run-dir", str(folder)] for folder in (no_ckpts, *folders.values())]

    out = run_main_many([*argvs.values(), *horizon, *refused, *unwritable])
    results = dict(zip(argvs, out, strict=False))
    out = out[len(argvs):]
    results["horizon"], out = out[:len(horizon)], out[len(horizon):]
    results["refused"], results["unwritable"] = out[:len(refused)], out[len(refused):]
    return {**results, "run": run, "stored": stored, "summary": summary, "listing": listing, "fork": fork,
            "new": new, "unsaved": unsaved, "project": config, "other_dir": other, "foreign": foreign,
            "root": root, "no_ckpts": no_ckpts, "folders": folders}


def test_lost_config_json_is_checked_against_the_checkpoints_and_rebuilt(mains):
    run = mains["run"]
    line = clean_error(*mains["lost"])
    assert "other settings" in line and "lr 0.001 -> 0.01" in line and "steps 6 -> 12" in line, line
    assert mains["same"][0] == 0, mains["same"]
    assert json.loads((run / "config.json").read_text()) == mains["stored"]  # rebuilt from the checkpoints' copy
    assert sorted(p.name for p in run.iterdir()) == sorted([*mains["listing"], "config.json"])


def test_the_horizon_is_part_of_the_identity_and_forks_must_train(mains):
    """A finished 6-step run rerun with --steps 3 is refused (summary.json untouched); a fork at or beyond the new
    run's last step is refused before its run dir exists; a fork's step that is not a number lists the saved ones.
    (The run is the one whose lost config.json the test above rebuilt, before these commands.)"""
    lines = [clean_error(code, err) for code, err in mains["horizon"]]
    assert "steps 6 -> 3" in lines[0], lines[0]
    assert "starts at step 6, but --steps is 3" in lines[1] and "starts at step 6, but --steps is 6" in lines[2]
    assert "'abc' is not a step" in lines[3] and "checkpoints at 6, 3" in lines[3], lines[3]
    assert "no checkpoint at step 4 (it has 6, 3)" in lines[4], lines[4]
    assert (mains["run"] / "summary.json").read_bytes() == mains["summary"] and not os.path.exists(mains["fork"])


def test_a_refused_command_writes_nothing_and_a_run_without_checkpoints_takes_new_settings(mains):
    """Every refusal below happens before the run dir exists; a run dir whose run never saved a checkpoint (its
    config.json is there) takes the corrected command, saying so in one line."""
    lines = [clean_error(code, err) for code, err in mains["refused"]]
    assert "unknown activation 'nope'" in lines[0], lines[0]
    assert "option alpha of 'depth_mup' must be a finite number, got 'nan'" in lines[1], lines[1]
    assert "must equal the 1 devices" in lines[2] and "GB of activations" in lines[3], lines
    assert not mains["new"].exists()
    code, err = mains["started"]
    unsaved = mains["unsaved"]
    assert code == 0, err
    assert f"{unsaved} has no checkpoint yet: starting it with these settings (lr 0.5 -> 0.001)" in err
    assert json.loads((unsaved / "config.json").read_text())["optim"]["lr"] == 0.001


def test_another_programs_config_json_is_neither_taken_over_nor_overwritten(mains):
    """A folder whose config.json names no model (another program's file), or which holds a run's other files without
    a run's config, is refused in one line, the files as they were; a zoo run's config.json, nested or flat, names
    its model, and a run writes it before anything else."""
    (code, err), (other, other_err) = mains["config"], mains["other"]
    config, summary, foreign = mains["project"], mains["other_dir"], mains["foreign"]
    assert code == 1 and "does not hold a zoo run's config" in clean_error(code, err), err
    assert (config / "config.json").read_text() == foreign and not (config / "checkpoints").exists()
    assert other == 1 and "another program's files would be overwritten" in clean_error(other, other_err), other_err
    assert (summary / "summary.json").read_text() == foreign and not (summary / "checkpoints").exists()


def test_files_follow_the_umask(tmp_path):
    """config.json, summary.json and a trimmed metrics.jsonl get 0666 less the umask (0640 under umask 027), as
    every other file a run writes (mkstemp alone would make them 0600)."""
    run = tmp_path / "run"
    # the run, then (its summary and last checkpoint removed) its rerun, in one process under umask 027
    code = ("import os, shutil, sys\nfrom pathlib import Path\nos.umask(0o027)\nfrom zoo.cli.train import main\n"
            "run = Path(sys.argv[-1])\nmain(sys.argv[1:])\n(run / 'summary.json').unlink()\n"
            "shutil.rmtree(run / 'checkpoints' / '4')  # the rerun resumes at step 2 and trims the rows after it\n"
            "print('=== rerun', file=sys.stderr, flush=True)\nmain(sys.argv[1:])\n")
    args = [*SMALL, "--steps", "4", "--ckpt-every", "2", "--log-every", "1", "--run-dir", str(run)]
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=child_env(), capture_output=True,
                          text=True, timeout=240)
    rerun = proc.stderr.partition("=== rerun")[2]
    assert proc.returncode == 0 and "metrics.jsonl rows after step 2" in rerun, proc.stderr
    for name in ("config.json", "summary.json", "metrics.jsonl"):
        assert (run / name).stat().st_mode & 0o777 == 0o640, name


def test_a_figure_is_written_whole_or_not_at_all(tmp_path):
    """save_figure (every plot zoo writes: curves, sweeps, coordinate checks, papers) replaces its file in one rename:
    a save that fails midway (a full disk) leaves the previous picture and no temporary file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = tmp_path / "plots" / "curves.png"
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    save_figure(fig, path)
    before = path.read_bytes()
    assert before.startswith(b"\x89PNG")
    fig, _ = plt.subplots()

    def half_then_full(f, **_):
        f.write(b"\x89PNG half a picture")
        raise OSError(28, "No space left on device")

    fig.savefig = half_then_full
    with pytest.raises(DiskFull, match=f"writing {path} "):  # one line naming the picture, not 'writing .'
        save_figure(fig, path)
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == ["curves.png"]
    (tmp_path / "sweep.png").mkdir()  # a folder where the file goes: named itself, not the temporary file
    with pytest.raises(IsADirectoryError) as e:
        save_figure(fig, tmp_path / "sweep.png")
    assert e.value.filename == str(tmp_path / "sweep.png") and sorted(p.name for p in tmp_path.iterdir()) == [
        "plots", "sweep.png"]


def test_damaged_metrics_rows_are_dropped_and_a_run_dir_it_cannot_write_is_refused(mains, tmp_path):
    """A metrics.jsonl row that is not UTF-8 is skipped like a torn one (the resume's trim used to stop on it with a
    decode error naming no file); a run dir whose checkpoints/ is a file, or whose metrics.jsonl, summary.json or
    curves.png is a folder, is refused before anything compiles, and left as it was."""
    from zoo.train.logger import read_metrics, trim_metrics

    (tmp_path / "metrics.jsonl").write_bytes(b'{"step": 1}\n\xff\xfe junk\n{"step": 3}\n{"step": 4, "lo')
    assert read_metrics(tmp_path) == [{"step": 1}, {"step": 3}]
    assert trim_metrics(tmp_path, 2) == 1 and read_metrics(tmp_path) == [{"step": 1}]
    run = mains["no_ckpts"]
    (code, err), *results = mains["unwritable"]
    assert f"{run / 'checkpoints'} is not a directory" in clean_error(code, err)
    assert (run / "checkpoints").read_text() == "not a folder" and "compiling" not in err
    for (name, run), (code, err) in zip(mains["folders"].items(), results, strict=True):
        assert f"{run / name} is a directory, so the run could not write it" in clean_error(code, err)
        assert "compiling" not in err


def test_a_run_refused_after_taking_its_dir_leaves_no_folders_behind(tmp_path):
    """`--run-dir a/b/run` for a run refused once it held its dir (here --init-from a run with no checkpoint yet;
    also another model's run, a Ctrl-C during the compile) removed run but left a and a/b behind, empty."""
    (tmp_path / "source" / "checkpoints").mkdir(parents=True)
    cfg = resolve({**TINY_RUN, "steps": 2, "init_from": str(tmp_path / "source"),
                   "run_dir": str(tmp_path / "a" / "b" / "run")})
    with pytest.raises(FileNotFoundError, match="no checkpoint yet"):
        train(cfg)
    assert [p.name for p in tmp_path.iterdir()] == ["source"]


def test_a_config_json_of_another_run_is_refused_before_its_checkpoints_are_read(tmp_path):
    """A run dir whose config.json came from another run (another model): sampling or exporting it named the other
    run's data set ('model mlp_resnet needs image data; synthetic is a text set'), and resuming it called its
    checkpoints unreadable and moved them to corrupt/. Its checkpoints record their config: the two are compared."""
    import json

    import jax.numpy as jnp

    from zoo.config import RunConfig
    from zoo.train.checkpoint import Checkpoints
    from zoo.train.load import check_same_run, load_run
    from zoo.train.run import Run

    run = tmp_path / "run"
    gpt = RunConfig.from_flat({"model": "gpt", "width": 16, "depth": 1, "steps": 2, "run_dir": str(run)})
    with Checkpoints(run) as ckpts:
        ckpts.save(2, {"step": jnp.int32(2)}, {"step": 2, "config": gpt.to_json()})
    (run / "config.json").write_text(json.dumps(gpt.to_json()))
    check_same_run(run)  # its own config.json: taken
    mlp = gpt.replace(model="mlp_resnet", width=32, depth=2)
    (run / "config.json").write_text(json.dumps(mlp.to_json()))
    for read in (lambda: load_run(run), lambda: Run.open(mlp)):
        with pytest.raises(ValueError, match=r'is not the config its checkpoints were saved under \(model "gpt" -> '
                                             r'"mlp_resnet"; width 16 -> 32; depth 1 -> 2\)'):
            read()
    assert (run / "checkpoints" / "2").is_dir() and not (run / "corrupt").exists()  # nothing moved


def test_metrics_lines_that_parse_but_are_no_rows_are_skipped(tmp_path):
    """A damaged metrics.jsonl line that is still JSON (7, null, a list, a step "x", a row without its split or
    loss) was kept: a resume stopped on it with 'unexpected AttributeError: int object has no attribute get'."""
    from zoo.train.logger import plot_curves, read_metrics, trim_metrics

    good = [{"step": 5, "split": "train", "loss": 2.0}, {"step": 10, "split": "eval", "loss": 1.5}]
    junk = ["7", "null", "[1, 2]", '{"step": "x", "split": "train"}', '{"step": 7}', '{"step": 8, "split": "train"}']
    lines = [json.dumps(good[0]), *junk, json.dumps(good[1]), json.dumps({"step": 15, "split": "train", "loss": 1.0})]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert trim_metrics(tmp_path, 10) == 1
    assert read_metrics(tmp_path) == [good[0], {"step": 7}, {"step": 8, "split": "train"}, good[1]]
    assert plot_curves(tmp_path).stat().st_size > 0


@pytest.mark.parametrize("damaged", [b"[1]", b"\xff\xfe{", b'{"steps": 10, "be'])
def test_a_damaged_summary_is_a_run_not_yet_finished(tmp_path, damaged):
    """summary.json that parses to no object ([1]) stopped the rerun of a finished run with 'unexpected
    AttributeError: list object has no attribute get', and one that is not UTF-8 with a decode error; a torn one
    was already read as no summary (the rerun evaluates the last checkpoint and writes it again)."""
    from zoo.config import RunConfig
    from zoo.train.run import Run

    run = Run(tmp_path, RunConfig().replace(steps=10), None, [10])
    (tmp_path / "summary.json").write_bytes(damaged)
    assert run.finished_summary() is None
    (tmp_path / "summary.json").write_text('{"steps": 10}')
    assert run.finished_summary() == {"steps": 10}
