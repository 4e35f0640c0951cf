"""--init-from and --fork-from load another run's weights only where they mean the same network: a run or an export
under other multipliers is refused in one line naming the multiplier and the way out, and an export (SP form) given
where a run dir goes is named as one, with the finetune command quoted for the shell."""

from __future__ import annotations

import json
import shlex

import pytest
from cli_utils import SMALL, TINY, clean_error, one_line_error, run_main_many, saved_run

from zoo.cli import train as train_cli


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict:
    """Two finished 2-step runs (sp; mup at base width 16) and their exports, then every run of the tests below in
    one train.py process: (exit status, stderr) by name, with the paths they used."""
    from zoo.cli.export import main as export_main
    from zoo.export import export

    root = tmp_path_factory.mktemp("init-from")
    sp, mup = root / "sp", root / "mup"
    trained = run_main_many([[*SMALL, "--steps", "2", "--run-dir", str(sp)],
                             [*SMALL, "--steps", "2", "--param", "mup", "--base-width", "16", "--run-dir", str(mup)]])
    assert [code for code, _ in trained] == [0, 0], trained
    mup_export, sp_export = root / "mup-export", root / "sp-export"
    export(mup, mup_export, echo=lambda _: None)
    export_main([str(sp), "--out", str(sp_export)])
    before = sorted(p.name for p in sp_export.rglob("*"))
    at_sizes = ["--base-width", "32", "--base-depth", "2"]
    runs = {
        # sp's weights under other multipliers, and under the same ones at another base width
        "init_mup": [*SMALL, "--steps", "4", "--param", "mup", "--init-from", str(sp), "--run-dir", str(root / "r0")],
        "fork_mup": [*SMALL, "--steps", "4", "--param", "mup", "--fork-from", str(sp), "--run-dir", str(root / "r1")],
        "init_base16": [*SMALL, "--steps", "4", "--base-width", "16", "--init-from", str(sp), "--run-dir",
                        str(root / "r2")],
        # mup's export: under mup at base width 16, under sp and mup at base sizes = sizes
        "export_mup16": [*SMALL, "--steps", "2", "--init-from", str(mup_export), "--param", "mup", "--base-width",
                         "16", "--run-dir", str(root / "e0")],
        "export_sp": [*SMALL, "--steps", "2", "--init-from", str(mup_export), "--param", "sp", *at_sizes, "--run-dir",
                      str(root / "e1")],
        "export_mup_at_sizes": [*SMALL, "--steps", "2", "--init-from", str(mup_export), "--param", "mup", *at_sizes,
                                "--run-dir", str(root / "e2")],
        # sp's export given where a run dir goes: resumed in, forked
        "resume_export": [*SMALL, "--steps", "2", "--run-dir", str(sp_export)],
        "fork_export": [*SMALL, "--steps", "4", "--fork-from", str(sp_export), "--run-dir", str(root / "f")],
        # another model, with too few steps besides: the model is named, not the steps
        "fork_mixer": [*SMALL, "--model", "mixer", "--steps", "1", "--fork-from", str(sp), "--run-dir",
                       str(root / "m")],
        "fork_wider": [*SMALL, "--width", "48", "--steps", "1", "--fork-from", str(sp), "--run-dir", str(root / "w")]}
    results = dict(zip(runs, run_main_many(list(runs.values())), strict=True))
    return {"root": root, "sp": sp, "mup_export": mup_export, "sp_export": sp_export, "before": before, **results}


@pytest.mark.slow
def test_weights_under_other_multipliers_are_refused(refused):
    """--init-from or --fork-from a run of another parametrization loaded its raw weights under this run's
    multipliers, another network, silently (an sp run under mup: eval loss 2.3 -> 7.2); now one line naming the
    multiplier, and the export route. The same parametrization under another base width (sp: the same multipliers)
    still loads."""
    src, root = refused["sp"], refused["root"]
    same, err_same = refused["init_base16"]
    assert same == 0, err_same
    for flag, (code, err) in (("--init-from", refused["init_mup"]), ("--fork-from", refused["fork_mup"])):
        line = clean_error(code, err)
        assert f"{flag} {src}: its multiplier head/mult is 1 there and" in line, line
        assert "python -m zoo.export" in line, line
    assert not (root / "r0").exists() and not (root / "r1").exists()  # a refused run leaves no run dir


def test_a_gpts_tied_readout_multiplier_is_compared(tmp_path):
    """The GPT's tied readout multiplier (`readout_mult`, at the model's top level, acting on the token table) was
    skipped: it is in no module, so no loaded parameter was 'under' it, and an sp run's weights loaded under mup
    (readout 1 -> 1/m, nothing else differing with a fixed head dim) computed another network: eval loss 3.4 -> 6.8."""
    gpt = ["--model", "gpt", "--width", "32", "--depth", "1", "--model-opt", "head_dim=16", "--seq-len", "16",
           "--batch-size", "4", "--data", "shakespeare", "--eval-every", "1000", "--log-every", "1000"]
    src = tmp_path / "sp"
    under_mup = [*gpt, "--steps", "3", "--param", "mup"]
    (made, err), init, fork, (other_vocab, err_vocab) = run_main_many([
        [*gpt, "--steps", "2", "--run-dir", str(src)],
        [*under_mup, "--init-from", str(src), "--run-dir", str(tmp_path / "a")],
        [*under_mup, "--fork-from", str(src), "--run-dir", str(tmp_path / "b")],
        # bytes, not characters: the token table is re-initialised, so its readout multiplier meets no loaded weight
        [*under_mup, "--byte-level", "--init-from", str(src), "--run-dir", str(tmp_path / "c")]])
    assert made == 0 and other_vocab == 0, err + err_vocab
    assert "re-initialised by the plugin: wte/table" in err_vocab, err_vocab
    for flag, (code, err) in (("--init-from", init), ("--fork-from", fork)):
        line = clean_error(code, err)
        assert f"{flag} {src}: its multiplier readout_mult is 1 there and 12 under this run's settings" in line, line


@pytest.mark.slow
def test_an_export_finetuned_under_other_multipliers_is_refused(refused):
    """zoo.export's SP form saves no multipliers (they are folded into the weights), so --init-from it under a
    plugin whose multipliers differ at this run's base sizes (mup at base width 16 for width 32: a readout x 1/2)
    loaded it silently into another network. Its multipliers are now those of sp at base sizes = sizes; the run the
    export names (sp, base sizes = sizes), and mup at base sizes = sizes (every plugin is SP there), still load."""
    out = refused["mup_export"]
    line = clean_error(*refused["export_mup16"])
    assert f"--init-from {out}: its multiplier head/mult is 1 there and 0.5 under this run's settings" in line, line
    assert "finetune it under --param sp with --base-width and --base-depth equal to its sizes" in line, line
    (sp, err_sp), (mup_at_base, err_mup) = refused["export_sp"], refused["export_mup_at_sizes"]
    assert sp == 0 and mup_at_base == 0, err_sp + err_mup
    assert not (refused["root"] / "e0").exists()


@pytest.mark.slow
def test_an_export_is_not_taken_for_a_run_dir(refused, tmp_path):
    """An export (SP form: parameters only) given where a run dir goes: train.py resuming in it called its checkpoint
    unreadable ('move them away or use another --run-dir') after compiling, zoo.export of it and --fork-from were
    unexpected KeyErrors ('rest'); now one line each with the finetune command, and nothing written into it."""
    from zoo.cli.export import main as export_main

    out = refused["sp_export"]
    for code, err in (refused["resume_export"], refused["fork_export"]):
        assert f"{out} is an export in SP form" in clean_error(code, err) and "--init-from" in err, err
    with pytest.raises(SystemExit) as stop:
        export_main([str(out), "--out", str(tmp_path / "again")])
    assert stop.value.code == 1
    assert sorted(p.name for p in out.rglob("*")) == refused["before"] and not (refused["root"] / "f").exists()


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


@pytest.mark.parametrize("flag", ["--fork-from", "--init-from"])
def test_a_run_dir_inside_the_run_it_reads_is_refused(tmp_path, capsys, flag):
    """Readers never write to a run dir: an export into it was refused, a fork or finetune trained into RUN/sub."""
    source = saved_run(tmp_path / "src")
    before = sorted(p.relative_to(source) for p in source.rglob("*"))
    inside = source / "sub"
    line = one_line_error(train_cli.main, [*TINY, flag, str(source), "--steps", "6", "--run-dir", str(inside)],
                          capsys)
    assert f"--run-dir {inside} is inside the run dir {source}, which {flag} only reads" in line
    assert sorted(p.relative_to(source) for p in source.rglob("*")) == before


@pytest.mark.parametrize("flag", ["--fork-from", "--init-from"])
def test_a_finetune_or_fork_without_a_run_dir_trains_in_the_default_one(tmp_path, monkeypatch, flag):
    """docs/export.md's `train.py --config EXPORT/config.json --init-from EXPORT` has no --run-dir: the check that
    it lies outside the source read the unset run dir and failed with 'unexpected TypeError'. Its summary.json names
    the run dir it trained in (it said "None"), and so does the fork's line."""
    source = tmp_path / "src"
    train_cli.main([*TINY, "--steps", "2", "--run-dir", str(source)])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    train_cli.main([*TINY, "--steps", "3", flag, str(source)])
    (run,) = (work / "runs").iterdir()
    assert json.loads((run / "summary.json").read_text())["run_dir"] == str(run.relative_to(work))


def test_a_fork_of_another_model_names_the_model(refused):
    """A fork of another model with --steps at or before the fork's step: the model is what is wrong first (the steps
    were named, and fixing them only led to the model's refusal)."""
    code, err = refused["fork_mixer"]
    assert code == 1 and clean_error(code, err) == (
        f"error: --fork-from {refused['sp']} is a run of mlp_resnet at width 32, depth 2, and this run's model is "
        "mixer at width 32, depth 2; a fork keeps the architecture (give --model mlp_resnet --width 32 --depth 2), or "
        "use --init-from to start another model from its parameters"), err
    assert not (refused["root"] / "m").exists()
    code, err = refused["fork_wider"]  # the same model at another width: the width, then the steps
    assert code == 1 and "is a run of mlp_resnet at width 32, depth 2, and this run's model is mlp_resnet at width " \
        "48, depth 2" in clean_error(code, err), err
