"""`python -m zoo.export` refuses in one line, before the run is read and leaving no folder behind, what it cannot
write: an --out under a file or inside the run dir, a run whose config is no JSON, a branch multiplier whose sign
cannot fold into the weights."""

from __future__ import annotations

import pytest
from cli_utils import TINY_RUN, one_line_error


def test_export_under_a_file_is_refused_before_the_work(tmp_path, capsys):
    """--out under a file: the export loaded, folded and checked the run, then failed naming its temporary folder
    ('Not a directory: .../.sub.tmp-PID'); now one line naming --out and the file, before the run is read."""
    from zoo.cli.export import main

    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "no-run-read"), "--out", str(tmp_path / "afile" / "sub")])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and err.count("\n") == 1, err
    assert f"--out {tmp_path / 'afile' / 'sub'} cannot be written: {tmp_path / 'afile'} is a file, not a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_bad_run_config_names_no_flag_of_train_alone(tmp_path, capsys):
    """zoo.export (and zoo.sample, --fork-from) of a folder whose config.json is not JSON said 'use another
    --run-dir', a flag only train.py has; the line now says 'use another run dir'."""
    from zoo.cli.export import main

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{not json")
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "run"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and "is not valid JSON; use another run dir" in err and "--run-dir" not in err, err


@pytest.mark.parametrize("inside", ["exp", "checkpoints/9"])
def test_an_export_inside_its_run_dir_is_refused(tmp_path, capsys, inside):
    """zoo.export RUN --out RUN/exp wrote into the run dir (readers never write there), and --out RUN/checkpoints/9
    became the run's newest 'checkpoint' (a folder of config.json and model.safetensors). Now one line, before the
    run is read, and nothing written."""
    from zoo.cli.export import main

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    line = one_line_error(main, [str(run), "--out", str(run / inside)], capsys)
    assert f"--out {run / inside} is inside the run dir {run}, which an export only reads" in line, line
    assert [p.name for p in run.rglob("*")] == ["checkpoints"]


def test_a_refused_export_leaves_no_folders_made_for_out(tmp_path, capsys):
    """zoo.export MISSING --out NEW/a/b: refused in one line (the run is no run dir), but NEW/a was left behind,
    made by the writability check before the run was read; now the folders it made are removed again."""
    from zoo.cli.export import main

    (tmp_path / "kept").mkdir()
    line = one_line_error(main, [str(tmp_path / "nowhere"), "--out", str(tmp_path / "new" / "a" / "b")], capsys)
    assert "does not exist" in line, line
    one_line_error(main, [str(tmp_path / "nowhere"), "--out", str(tmp_path / "kept" / "a" / "b")], capsys)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kept"]


@pytest.mark.parametrize("activation, branch_mult, why", [
    ("relu", -1.0, "which is homogeneous for positive factors only: a multiplier <= 0 cannot move into W"),
    ("abs", -1.0, "which is homogeneous for positive factors only"), ("gelu", 2.0, "which is not homogeneous"),
    ("relu", 2.0, None), ("identity", -1.0, None)])
def test_a_negative_branch_multiplier_is_refused_for_its_sign(activation, branch_mult, why):
    """depth_mup --param-opt branch_mult=-1 on a relu MLP-ResNet: the export refused it saying relu 'is not
    positively homogeneous', which it is; the sign is what cannot fold (relu(-u) != -relu(u)). Identity folds any
    multiplier (the export's logits then equal the run's: tests/export/test_export.py's check)."""
    from flax import nnx

    import zoo.models
    import zoo.param
    from zoo.export.fold import folded_params

    cfg = zoo.models.config("mlp_resnet", width=16, depth=2, base_width=16, base_depth=1, in_shape=(8,),
                            num_classes=3, activation=activation)
    model = zoo.models.create("mlp_resnet", cfg, zoo.param.get("depth_mup", branch_mult=branch_mult), nnx.Rngs(0))
    if why is None:
        assert "stack/blocks/w1/kernel" in folded_params(model)
        return
    with pytest.raises(ValueError, match=f"branch multiplier \\({branch_mult * 2**-0.5:.4g}\\) acts after "
                                         f"{activation}\\(W x \\+ b\\), {why}"):
        folded_params(model)


def test_a_stop_swallowed_during_a_whole_export_does_not_fail_it(tmp_path, capsys, monkeypatch):
    """A SIGTERM that a library swallowed where it landed is raised when the command ends (zoo.errors.stop_received):
    after a whole export, in place, that said 'stopped by SIGTERM' with exit 143, and the same command then refused
    the --out it had filled."""
    import signal

    import zoo.errors
    import zoo.export.sp_form as sp_form
    from zoo.cli.export import main
    from zoo.config import resolve
    from zoo.train.loop import train

    run = tmp_path / "run"
    train(resolve({**TINY_RUN, "steps": 2, "run_dir": str(run)}))
    original = sp_form.save_safetensors

    def swallowed(*args, **kwargs):
        zoo.errors._received.append(zoo.errors.Stopped(signal.SIGTERM, "stopped by SIGTERM"))
        return original(*args, **kwargs)

    def leave(status):  # the boundary's os._exit, which would end the test process
        raise SystemExit(status)

    monkeypatch.setattr(sp_form, "save_safetensors", swallowed)
    monkeypatch.setattr("zoo.cli.boundary._exit", leave)
    main([str(run), "--out", str(tmp_path / "whole")])
    assert (tmp_path / "whole" / "model.safetensors").exists() and zoo.errors.stop_received() is None


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_stop_while_orbax_writes_the_export_leaves_nothing(tmp_path, monkeypatch, signum):
    """A SIGTERM while orbax's threads wrote the export's checkpoint raised at once: the clean-up removed the
    temporary folder while they still wrote into it, and a half-written .OUT.tmp folder stayed beside --out (4 of 6
    tries) under 'nothing half-written was left'. Now the write ends, is undone, and the stop is raised; an empty
    --out given stays as it was."""
    import os
    import signal

    import zoo.export.sp_form as sp_form
    from zoo.config import resolve
    from zoo.errors import Stopped
    from zoo.train.loop import train

    run = tmp_path / "run"
    train(resolve({**TINY_RUN, "steps": 2, "run_dir": str(run)}))

    class Interrupted(sp_form.Checkpoints):
        def save(self, *args, **kwargs):
            super().save(*args, **kwargs)  # orbax's threads now write
            os.kill(os.getpid(), getattr(signal, signum))

    monkeypatch.setattr(sp_form, "Checkpoints", Interrupted)
    (tmp_path / "out").mkdir()
    with pytest.raises(Stopped if signum == "SIGTERM" else KeyboardInterrupt):
        sp_form.export(run, tmp_path / "out", echo=lambda _: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "run"] and not any((tmp_path / "out").iterdir())


def test_a_stop_once_the_export_is_whole_stops_nothing(tmp_path):
    """A SIGTERM as the export said it was written: it printed 'exported step ...' and then 'stopped by SIGTERM;
    nothing half-written was left' with exit 143, the whole export left in place (and a rerun refused its --out).
    A stop that comes once the export is whole now stops nothing: one outcome, the export."""
    import os
    import signal

    import zoo.export.sp_form as sp_form
    from zoo.config import resolve
    from zoo.train.loop import train

    run = tmp_path / "run"
    train(resolve({**TINY_RUN, "steps": 2, "run_dir": str(run)}))
    said = []
    sp_form.export(run, tmp_path / "out", echo=lambda line: said.append(line) or os.kill(os.getpid(), signal.SIGTERM))
    assert said[-1].startswith("exported step 2") and (tmp_path / "out" / "model.safetensors").is_file()


@pytest.mark.parametrize("given", [False, True])
def test_an_export_that_another_export_beats_to_out_is_one_line(tmp_path, capsys, monkeypatch, given):
    """Two exports into one --out at once: both found it empty, and the one that ended second said the OS's
    'Directory not empty: OUT'. Now zoo's own line; the winner's export is untouched, and no temporary folder is
    left."""
    import os

    import zoo.export.sp_form as sp_form
    from zoo.cli.export import main
    from zoo.config import resolve
    from zoo.train.loop import train

    run, out = tmp_path / "run", tmp_path / "out"
    train(resolve({**TINY_RUN, "steps": 2, "run_dir": str(run)}))
    if given:
        out.mkdir()  # an empty folder given as --out
    original = os.replace

    def beaten(src, dst):  # the other export's rename lands first
        out.mkdir(exist_ok=True)
        (out / "model.safetensors").write_text("the winner's")
        return original(src, dst)

    monkeypatch.setattr(sp_form.os, "replace", beaten)
    capsys.readouterr()  # the run's own lines
    line = one_line_error(main, [str(run), "--out", str(out)], capsys)
    assert f"--out {out} was filled while this export was written (by another export into it)" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "run"]
    assert [p.name for p in out.iterdir()] == ["model.safetensors"]
