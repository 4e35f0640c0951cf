"""An outside referee's probes of sweeps, transfers and exports at settings the other tests do not use: each test
failed before the fix its docstring names."""

from __future__ import annotations

import pytest
from cli_utils import one_line_error


@pytest.mark.parametrize("activation, branch_mult, why", [
    ("relu", -1.0, "which is homogeneous for positive factors only: a multiplier <= 0 cannot move into W"),
    ("abs", -1.0, "which is homogeneous for positive factors only"), ("gelu", 2.0, "which is not homogeneous"),
    ("relu", 2.0, None), ("identity", -1.0, None)])
def test_a_negative_branch_multiplier_is_refused_for_its_sign(activation, branch_mult, why):
    """depth_mup --param-opt branch_mult=-1 on a relu MLP-ResNet: the export refused it saying relu 'is not
    positively homogeneous', which it is; the sign is what cannot fold (relu(-u) != -relu(u)). Identity folds any
    multiplier (the export's logits then equal the run's: tests/test_export.py's check)."""
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


@pytest.mark.slow
def test_an_export_to_a_link_to_an_empty_folder_lands_in_that_folder(tmp_path):
    """--out LINK, a symbolic link to an empty folder: the export loaded, folded and checked the run, then failed in
    'error: Not a directory: LINK' (os.rmdir of a link); now it is written into the folder the link names."""
    import json

    from test_export import make_run

    from zoo.export import export

    run, folder, link = tmp_path / "run", tmp_path / "folder", tmp_path / "link"
    make_run(run, "mlp_resnet")
    folder.mkdir()
    link.symlink_to(folder)
    cfg = export(run, link, echo=lambda _: None)
    assert link.is_symlink() and json.loads((folder / "config.json").read_text()) == cfg
    assert (folder / "model.safetensors").is_file()


def test_a_refused_export_leaves_no_folders_made_for_out(tmp_path, capsys):
    """zoo.export MISSING --out NEW/a/b: refused in one line (the run is no run dir), but NEW/a was left behind,
    made by the writability check before the run was read; now the folders it made are removed again."""
    from zoo.cli.export import main

    (tmp_path / "kept").mkdir()
    line = one_line_error(main, [str(tmp_path / "nowhere"), "--out", str(tmp_path / "new" / "a" / "b")], capsys)
    assert "is not a directory" in line, line
    one_line_error(main, [str(tmp_path / "nowhere"), "--out", str(tmp_path / "kept" / "a" / "b")], capsys)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kept"]


@pytest.mark.slow
def test_an_export_removes_the_temporary_folder_a_killed_export_left(tmp_path):
    """A SIGKILLed export left its half-written `.OUT.tmp-PID` beside --out, and no later export removed it (each
    cleans only its own pid's). Now an export to OUT removes those of processes that are gone, and keeps a live
    one's (pid 1)."""
    from test_export import make_run

    from zoo.export import export

    make_run(tmp_path / "run", "mlp_resnet")
    stale, live = tmp_path / ".out.tmp-999999999", tmp_path / ".out.tmp-1"
    for folder in (stale, live):
        (folder / "checkpoints").mkdir(parents=True)
    export(tmp_path / "run", tmp_path / "out", echo=lambda _: None)
    assert not stale.exists() and live.exists() and (tmp_path / "out" / "config.json").is_file()
