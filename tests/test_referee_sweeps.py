"""An outside referee's probes of sweeps, transfers and exports at settings the other tests do not use: each test
failed before the fix its docstring names."""

from __future__ import annotations

import pytest
from cli_utils import one_line_error

TINY = ["--model", "mlp_resnet", "--param", "mup", "--data", "synthetic", "--steps", "2",
        "--lrs", "1e-3"]


@pytest.mark.parametrize("tool", ["sweep", "transfer"])
def test_a_batch_beyond_the_training_set_is_refused_before_out_is_written(tmp_path, capsys, tool):
    """--batch-size 100000 on the 4096 synthetic examples: the sweep wrote OUT/sweep.json (a transfer OUT/mup/proxy)
    and then failed in its first batch; now the line comes before OUT is created."""
    import importlib

    main = importlib.import_module(f"zoo.cli.{tool}").main
    sizes = ["--widths", "16", "--depths", "2"] if tool == "sweep" else ["--width", "32", "--proxy-width", "16",
                                                                        "--depth", "2"]
    out = tmp_path / "out"
    line = one_line_error(main, [*TINY, *sizes, "--batch-size", "100000", "--out", str(out)], capsys)
    assert "batch size 100000 must be between 1 and the 4096 examples of split 'train'" in line, line
    assert not out.exists()


@pytest.mark.slow
def test_the_target_trains_at_the_proxys_own_learning_rate(tmp_path, capsys):
    """--lrs 1e-3: the target trained, and OUT/mup/target.json held, 2^round(log2 1e-3, 6) = 1.0000002e-3, another
    float32 than the proxy's 1e-3 (2 ulps off). Now the transferred LR is the proxy member's own, also in the check
    grid (one member at it, not two) and in transfer.json."""
    import json

    from zoo.cli import transfer

    out = tmp_path / "t"
    transfer.main([*TINY, "--width", "32", "--proxy-width", "16", "--depth", "2", "--batch-size", "8",
                   "--compare", "none", "--check-target", "--out", str(out)])
    capsys.readouterr()
    target = [json.loads(line) for line in (out / "mup" / "target" / "results.jsonl").read_text().splitlines()]
    assert len(target) == 5 and sum(r["lr"] == 1e-3 for r in target) == 1, [r["lr"] for r in target]
    assert json.loads((out / "mup" / "target.json").read_text())["optim"]["lr"] == 1e-3
    assert json.loads((out / "transfer.json").read_text())["arms"][0]["transferred_lr"] == 1e-3


GOOD = {"width": 16, "depth": 2, "lr": 0.001, "log2_lr": -9.965784, "seed": 0, "train_loss": 1.0, "eval_loss": 1.0,
        "eval_accuracy": 0.5, "diverged": False}


@pytest.mark.parametrize("change", [{"width": "32"}, {"depth": 2.5}, {"width": True}, {"seed": "0"},
                                    {"lr": True}, {"width": 0}])
def test_a_record_with_a_size_or_seed_of_another_type_is_one_line(change):
    """A results.jsonl record with width "32" (edited by hand, another program) beside records of width 16 stopped
    --report-only with "unexpected TypeError: '<' not supported between instances of 'str' and 'int'"; a
    depth 2.5 or a seed "0" was drawn as a size or averaged as a seed of its own."""
    from zoo.sweeps import report

    report.summarize([GOOD])
    with pytest.raises(ValueError, match="a record in results.jsonl has no valid (width|depth|seed|lr)"):
        report.summarize([GOOD, {**GOOD, "seed": 1, **change}])


def test_report_only_names_members_missing_and_lines_it_could_not_read(tmp_path, capsys):
    """A results.jsonl with a line cut mid-file (a copy of a torn file, an edit) and a member lost: --report-only
    averaged the LR over the seeds left and printed the table as if the grid were whole, without a word. Now a line
    names the members a size lacks against the grid the sizes trained, and one counts the unreadable lines; both
    are in summary.json."""
    import json

    from zoo.cli import sweep
    from zoo.sweeps import results

    out = tmp_path / "s"
    out.mkdir()
    (out / results.SETTINGS).write_text(json.dumps({"model": "mlp_resnet", "param": "mup", "steps": 2}))
    recs = [{**GOOD, "width": w, "lr": 2.0**x, "log2_lr": float(x), "seed": s, "train_loss": 2.0 + 0.1 * x * x}
            for w in (16, 32) for x in (-2, -1, 0) for s in (0, 1)]
    lines = [json.dumps(r) for r in recs]
    lines[3] = lines[3][:30]  # width 16, log2 LR -1, seed 1: torn
    del lines[8]  # width 32, log2 LR -1, seed 0: lost
    (out / results.RESULTS).write_text("\n".join(lines) + "\n")
    sweep.main(["--out", str(out), "--report-only"])
    text = capsys.readouterr().out
    assert "warning: 2 member(s) of the grid missing (width 16 depth 2 log2 LR -1 seed 1, width 32 depth 2 " \
           "log2 LR -1 seed 0)" in text, text
    assert "warning: 1 line(s) of results.jsonl are no member record" in text, text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unreadable_lines"] == 1 and summary["missing_members"] == [
        {"width": 16, "depth": 2, "log2_lr": -1.0, "seed": 1}, {"width": 32, "depth": 2, "log2_lr": -1.0, "seed": 0}]
    (out / results.RESULTS).write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    sweep.main(["--out", str(out), "--report-only"])
    assert "warning" not in capsys.readouterr().out
    assert json.loads((out / "summary.json").read_text())["missing_members"] == []


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


@pytest.mark.parametrize("held", ["config.json", "checkpoints"])
def test_a_sweep_into_a_run_dir_is_refused_and_the_run_kept(tmp_path, capsys, held):
    """zoo.sweep --out RUN_DIR (a train.py run; one whose config.json was lost) trained and then replaced the run's
    summary.json (its best and final eval) with the sweep's report; now one line before anything is written, and
    the run dir as it was."""
    from zoo.cli import sweep

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}") if held == "config.json" else (run / held).mkdir()
    (run / "summary.json").write_text('{"best_eval": {"loss": 1.5}}')
    line = one_line_error(sweep.main, [*TINY, "--widths", "16", "--depths", "2", "--batch-size", "8",
                                       "--out", str(run)], capsys)
    assert f"--out {run} holds a run ({held}), whose summary.json a sweep's report would replace" in line, line
    assert sorted(p.name for p in run.iterdir()) == sorted([held, "summary.json"])
    assert (run / "summary.json").read_text() == '{"best_eval": {"loss": 1.5}}'


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


def test_a_score_lost_to_divergence_says_so():
    """Two widths that diverged at every LR: the caption read 'transfer score: n/a (fewer than two sizes trained)',
    when both had trained; now it names the sizes that diverged (one size alone keeps its own reason)."""
    from zoo.sweeps import report

    gone = [{**GOOD, "width": w, "lr": lr, "log2_lr": x, "diverged": True}
            for w in (16, 32) for lr, x in ((0.5, -1.0), (1.0, 0.0))]
    assert report.table(report.summarize(gone)).caption == "transfer score: n/a (2 of 2 sizes diverged at every LR)"
    one = report.summarize(gone[:2])
    assert report.table(one).caption == "transfer score: n/a (one size trained)"
    kept = report.summarize([*gone, {**GOOD, "width": 64}, {**GOOD, "width": 64, "lr": 0.5, "log2_lr": -1.0}])
    assert report.table(kept).caption == "transfer score: n/a (2 of 3 sizes diverged at every LR)"


def test_an_empty_compare_is_refused_not_taken_for_none(tmp_path, capsys):
    """--compare '' (an unset shell variable) skipped the comparison silently, as --compare none does; now it is an
    unknown parametrization, before anything trains."""
    from zoo.cli import transfer

    line = one_line_error(transfer.main, [*TINY, "--width", "32", "--proxy-width", "16", "--depth", "2",
                                          "--compare", "", "--out", str(tmp_path / "t")], capsys)
    assert "unknown parametrization ''" in line, line
    assert not (tmp_path / "t").exists()


def test_the_target_loss_is_read_at_the_transferred_lr_not_a_check_lr_beside_it():
    """--check-target 1.9531e-3 beside a transferred 2^-9 = 1.953125e-3: two members (other float32s, other rounded
    log2 LRs), but Arm.transferred took the first point within np.isclose's 1e-5 (relative to |log2 LR|) of it, the
    check LR's, so the table's 'target loss at it' was the check member's (here 1.0 instead of 2.0)."""
    import math

    from zoo.sweeps import report
    from zoo.sweeps.grid import lr_key
    from zoo.sweeps.transfer import Arm

    def rec(width, lr, loss):
        return {**GOOD, "width": width, "lr": lr, "log2_lr": lr_key(lr), "train_loss": loss}

    proxy = report.summarize([rec(16, 2.0**-9, 1.5), rec(16, 2.0**-8, 1.7)])
    target = report.summarize([rec(32, 1.9531e-3, 1.0), rec(32, 2.0**-9, 2.0)])
    assert math.isclose(target.curves[0].log2_lr[0], -9.0, rel_tol=1e-5)  # np.isclose's match, not the same member
    arm = Arm("mup", {}, proxy, [-9.0], proxy.curves[0].best_log2_lr, target, [2.0], checked=True)
    assert arm.transferred == 1 and arm.target_loss == 2.0


def test_learning_rates_of_one_results_key_are_one_member():
    """--lrs 1e-3,1.0000003e-3: two float32s (both trained) of one rounded log2 LR, the key results are read back by,
    so the second member's record was dropped on reading and the report showed one point for two members."""
    from zoo.sweeps.grid import lr_key, parse_lrs

    assert lr_key(1e-3) == lr_key(1.0000003e-3)
    assert parse_lrs("1.0000003e-3,1e-3,3e-3") == [1e-3, 3e-3]
    assert parse_lrs("2^-6:2^-4:0.5") == pytest.approx([2.0**-6, 2.0**-5.5, 2.0**-5, 2.0**-4.5, 2.0**-4])


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


def test_a_sweep_given_an_lr_twice_trains_it_once(tmp_path):
    """SweepSpec(lrs=[2^-7, 2^-9, 2^-7]) (the library; the CLI's parse_lrs dedups): the repeated LR was a member
    trained twice (3 members, 'members': 3 in each record) and read back once. Now the spec keeps the distinct LRs,
    sorted; a TransferSpec too."""
    from zoo.config import RunConfig
    from zoo.sweeps.runner import SweepSpec, run_sweep
    from zoo.sweeps.transfer import TransferSpec

    run = RunConfig.from_flat(dict(model="mlp_resnet", param="mup", data="synthetic", steps=2, batch_size=8))
    spec = SweepSpec(run=run, lrs=[2.0**-7, 2.0**-9, 2.0**-7], out=tmp_path / "s", widths=[16], depths=[2])
    assert spec.lrs == [2.0**-9, 2.0**-7]
    records = run_sweep(spec, echo=lambda _: None)
    assert [(r["lr"], r["members"]) for r in records] == [(2.0**-9, 2), (2.0**-7, 2)]
    t = TransferSpec(run=run, lrs=[1e-3, 1e-3], proxy=(16, 2), target=(32, 2), out=tmp_path, check=[2e-3, 1e-3, 2e-3])
    assert (t.lrs, t.check) == ([1e-3], [1e-3, 2e-3])


@pytest.mark.parametrize("tool", ["sweep", "transfer"])
def test_a_compile_cache_that_cannot_be_made_names_the_flag(tmp_path, capsys, tool):
    """--compile-cache FILE and --compile-cache FILE/sub: 'error: File exists: FILE' and 'error: Not a directory:
    FILE/sub', naming no flag; now the line names --compile-cache, before --out is made."""
    import importlib

    main = importlib.import_module(f"zoo.cli.{tool}").main
    (tmp_path / "afile").write_text("x")
    sizes = ["--widths", "16", "--depths", "2"] if tool == "sweep" else ["--width", "32", "--proxy-width", "16",
                                                                        "--depth", "2"]
    argv = [a for a in TINY if a not in ("--compile-cache", "off")] + sizes
    for cache, why in (("afile", f"{tmp_path / 'afile'} is a file, not a folder"), ("afile/sub", "Not a directory")):
        line = one_line_error(main, [*argv, "--compile-cache", str(tmp_path / cache), "--out", str(tmp_path / "o")],
                              capsys)
        assert f"--compile-cache {tmp_path / cache} cannot be written: {why}" in line, line
    assert not (tmp_path / "o").exists()


def test_the_transfer_score_of_a_third_step_grid_is_a_whole_number_of_steps():
    """--lrs 2^-9:2^-7:0.333...: the grid step came from the rounded keys (-9, -8.666667, ...: 0.333333), so a best LR
    moving from 2^-9 to 2^-8 scored 1 / 0.333333 = 3.000003 grid steps in summary.json (a closed-form check of 3
    fails). Now the score and the transfer's miss come from the members' own LRs: 3.0, and a half-step grid's 5.0."""
    from zoo.sweeps import report
    from zoo.sweeps.grid import lr_key, parse_lrs
    from zoo.sweeps.transfer import Arm

    def grid(text, best):
        return [{**GOOD, "width": w, "lr": lr, "log2_lr": lr_key(lr), "train_loss": 1.0 + (lr_key(lr) - b) ** 2}
                for w, b in best.items() for lr in parse_lrs(text)]

    third = report.summarize(grid("2^-9:2^-7:0.3333333333333333", {64: -9.0, 128: -8.0}))
    assert [c.best_log2_lr for c in third.curves] == [-9.0, -8.0] and third.transfer_score == 3.0
    assert report.summarize(grid("2^-12:2^-6:0.5", {64: -10.0, 128: -9.0, 256: -7.5})).transfer_score == 5.0
    proxy = report.summarize(grid("2^-9:2^-7:0.3333333333333333", {64: -8.0}))
    target = report.summarize(grid("2^-10:2^-7:0.3333333333333333", {128: -9.0}))
    assert Arm("mup", {}, proxy, [-8.0], -8.0, target, [1.0], checked=True).miss == 3.0


@pytest.mark.parametrize("text", ["1e-4:1e-2:1e-3", "0.0001:0.01:0.5", "1E-4:4:1"])
def test_a_range_written_in_learning_rates_is_refused(text):
    """A range's bare bounds are log2 exponents, so --lrs 1e-4:1e-2:1e-3 (LRs meant) swept 10 LRs from 2^0.0001 to
    2^0.009, all about 1.0 (every Adam member diverged, the report 'all diverged'). Bounds in scientific notation or
    both between 0 and 1 are now refused; exponents as the README writes them still read."""
    from zoo.sweeps.grid import parse_lrs

    with pytest.raises(ValueError, match="reads as log2 exponents .* give LRs as a comma list"):
        parse_lrs(text)
    assert parse_lrs("-12:-4:2") == [2.0**k for k in (-12, -10, -8, -6, -4)]
    assert parse_lrs("-0.5:0.5:0.5") == pytest.approx([2.0**-0.5, 1.0, 2.0**0.5])


def test_a_sweep_refused_for_its_base_width_says_the_values_and_the_default(tmp_path):
    """A sweep of widths 16, 32 rerun with widths 32, 64 (to extend it) was refused as 'other settings (base_width)':
    the base width defaults to the smallest width swept, which the command never named. Now the line gives both
    values and the flag that keeps the base."""
    import json

    from zoo.sweeps import results

    settings = {"param": "mup", "base_width": 16, "steps": 6}
    results.check_settings(tmp_path, settings)
    results.append(tmp_path, [{"width": 16, "depth": 2, "lr": 0.5, "seed": 0}])
    with pytest.raises(ValueError) as e:
        results.check_settings(tmp_path, {**settings, "base_width": 32})
    assert "other settings (base_width 16 there, 32 here) (the base width and depth default to the smallest swept: " \
           "give --base-width/--base-depth)" in str(e.value)
    with pytest.raises(ValueError, match='other settings \\(param "mup" there, "sp" here, steps 6 there, 7 here\\);'):
        results.check_settings(tmp_path, {**settings, "param": "sp", "steps": 7})
    assert json.loads((tmp_path / results.SETTINGS).read_text()) == settings


def test_a_refused_export_leaves_no_folders_made_for_out(tmp_path, capsys):
    """zoo.export MISSING --out NEW/a/b: refused in one line (the run is no run dir), but NEW/a was left behind,
    made by the writability check before the run was read; now the folders it made are removed again."""
    from zoo.cli.export import main

    (tmp_path / "kept").mkdir()
    line = one_line_error(main, [str(tmp_path / "nowhere"), "--out", str(tmp_path / "new" / "a" / "b")], capsys)
    assert "is not a directory" in line, line
    one_line_error(main, [str(tmp_path / "nowhere"), "--out", str(tmp_path / "kept" / "a" / "b")], capsys)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kept"]


def test_a_one_lr_sweep_has_no_transfer_score():
    """--lrs 1e-3 over widths 16 and 32: each size's best is the one LR, and the report gave 'transfer score: 0 grid
    steps', a perfect transfer that measured nothing. Now n/a, saying why; two LRs score as before."""
    from zoo.sweeps import report

    one = report.summarize([{**GOOD, "width": w} for w in (16, 32)])
    assert one.transfer_score is None
    assert report.table(one).caption == "transfer score: n/a (one LR swept: it is every size's best)"
    two = report.summarize([{**GOOD, "width": w, "lr": lr, "log2_lr": x, "train_loss": loss}
                            for w in (16, 32) for lr, x, loss in ((0.5, -1.0, 1.0), (1.0, 0.0, 2.0))])
    assert two.transfer_score == 0.0


@pytest.mark.parametrize("tool", ["sweep", "transfer"])
def test_a_model_option_the_forward_pass_refuses_is_refused_before_out_is_written(tmp_path, capsys, tool):
    """--model-opt activation=nope: train.py refuses it before its run dir exists (its forward pass is traced on an
    abstract batch first), but a sweep wrote OUT/sweep.json (a transfer OUT/mup/proxy/) and failed in its first
    compile. Now each shape's forward pass is traced before OUT is written."""
    import importlib

    main = importlib.import_module(f"zoo.cli.{tool}").main
    sizes = ["--widths", "16", "--depths", "2"] if tool == "sweep" else ["--width", "32", "--proxy-width", "16",
                                                                        "--depth", "2"]
    out = tmp_path / "out"
    line = one_line_error(main, [*TINY, *sizes, "--batch-size", "8", "--model-opt", "activation=nope",
                                 "--out", str(out)], capsys)
    assert "unknown activation 'nope'" in line, line
    assert not out.exists()


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
