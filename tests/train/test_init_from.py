"""--init-from and --fork-from load another run's weights only where they mean the same network: a run or an export
under other multipliers is refused in one line naming the multiplier and the way out, and an export (SP form) given
where a run dir goes is named as one, with the finetune command quoted for the shell."""

from __future__ import annotations

import shlex

import pytest


@pytest.mark.slow
def test_weights_under_other_multipliers_are_refused(tmp_path):
    """--init-from or --fork-from a run of another parametrization loaded its raw weights under this run's
    multipliers, another network, silently (an sp run under mup: eval loss 2.3 -> 7.2); now one line naming the
    multiplier, and the export route. The same parametrization under another base width (sp: the same multipliers)
    still loads."""
    from cli_utils import SMALL, clean_error, run_main_many

    src, runs = tmp_path / "sp", [tmp_path / f"r{i}" for i in range(3)]
    (trained, _), (init, err_init), (fork, err_fork), (same, err_same) = run_main_many([
        [*SMALL, "--steps", "2", "--run-dir", str(src)],
        [*SMALL, "--steps", "4", "--param", "mup", "--init-from", str(src), "--run-dir", str(runs[0])],
        [*SMALL, "--steps", "4", "--param", "mup", "--fork-from", str(src), "--run-dir", str(runs[1])],
        [*SMALL, "--steps", "4", "--base-width", "16", "--init-from", str(src), "--run-dir", str(runs[2])]])
    assert trained == 0 and same == 0, err_same
    for flag, code, err in (("--init-from", init, err_init), ("--fork-from", fork, err_fork)):
        line = clean_error(code, err)
        assert f"{flag} {src}: its multiplier head/mult is 1 there and" in line, line
        assert "python -m zoo.export" in line, line
    assert not runs[0].exists() and not runs[1].exists()  # a refused run leaves no run dir


@pytest.mark.slow
def test_an_export_finetuned_under_other_multipliers_is_refused(tmp_path):
    """zoo.export's SP form saves no multipliers (they are folded into the weights), so --init-from it under a
    plugin whose multipliers differ at this run's base sizes (mup at base width 16 for width 32: a readout x 1/2)
    loaded it silently into another network. Its multipliers are now those of sp at base sizes = sizes; the run the
    export names (sp, base sizes = sizes), and mup at base sizes = sizes (every plugin is SP there), still load."""
    from cli_utils import SMALL, clean_error, run_main_many

    from zoo.export import export

    src, out = tmp_path / "mup", tmp_path / "export"
    assert run_main_many([[*SMALL, "--steps", "2", "--param", "mup", "--base-width", "16", "--run-dir", str(src)]]
                         )[0][0] == 0
    export(src, out, echo=lambda _: None)
    base, at_sizes = ["--steps", "2", "--init-from", str(out)], ["--base-width", "32", "--base-depth", "2"]
    (refused, err), (sp, err_sp), (mup_at_base, err_mup) = run_main_many([
        [*SMALL, *base, "--param", "mup", "--base-width", "16", "--run-dir", str(tmp_path / "r0")],
        [*SMALL, *base, "--param", "sp", *at_sizes, "--run-dir", str(tmp_path / "r1")],
        [*SMALL, *base, "--param", "mup", *at_sizes, "--run-dir", str(tmp_path / "r2")]])
    line = clean_error(refused, err)
    assert f"--init-from {out}: its multiplier head/mult is 1 there and 0.5 under this run's settings" in line, line
    assert "finetune it under --param sp with --base-width and --base-depth equal to its sizes" in line, line
    assert sp == 0 and mup_at_base == 0, err_sp + err_mup
    assert not (tmp_path / "r0").exists()


@pytest.mark.slow
def test_an_export_is_not_taken_for_a_run_dir(tmp_path):
    """An export (SP form: parameters only) given where a run dir goes: train.py resuming in it called its checkpoint
    unreadable ('move them away or use another --run-dir') after compiling, zoo.export of it and --fork-from were
    unexpected KeyErrors ('rest'); now one line each with the finetune command, and nothing written into it."""
    from cli_utils import SMALL, clean_error, run_main_many

    from zoo.cli.export import main as export_main

    run, out = tmp_path / "run", tmp_path / "exported"
    (code, err), = run_main_many([[*SMALL, "--steps", "2", "--run-dir", str(run)]])
    assert code == 0, err
    export_main([str(run), "--out", str(out)])
    before = sorted(p.name for p in out.rglob("*"))
    results = run_main_many([[*SMALL, "--steps", "2", "--run-dir", str(out)],
                             [*SMALL, "--steps", "4", "--fork-from", str(out), "--run-dir", str(tmp_path / "f")]])
    for code, err in results:
        assert f"{out} is an export in SP form" in clean_error(code, err) and "--init-from" in err, err
    with pytest.raises(SystemExit) as stop:
        export_main([str(out), "--out", str(tmp_path / "again")])
    assert stop.value.code == 1
    assert sorted(p.name for p in out.rglob("*")) == before and not (tmp_path / "f").exists()


def test_the_commands_zoo_suggests_quote_their_paths(tmp_path):
    """The commands zoo prints for the user to run (finetune an export, fork a run, use a token directory) put
    paths in unquoted: with a space ('my export') the shell split them, and the command named other paths."""
    from zoo.train.load import check_not_export

    export = tmp_path / "my export"
    export.mkdir()
    (export / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError) as refused:
        check_not_export(export)
    command = shlex.split(str(refused.value).split("finetune it in a new run dir: ")[1])
    assert command[2:] == ["--config", str(export / "config.json"), "--init-from", str(export)], command
