"""`python -m zoo.sweep` and `python -m zoo.transfer` refuse what cannot run in one line before --out is written: a
batch beyond the training set, a model option the forward pass refuses, a compile cache that cannot be made, an
--out that holds a train.py run, an empty --compare, seed counts beyond any sweep, a proxy flag without a --policy."""

from __future__ import annotations

import pytest
from cli_utils import one_line_error

TINY = ["--model", "mlp_resnet", "--param", "mup", "--data", "synthetic", "--steps", "2", "--lrs", "1e-3"]


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


@pytest.mark.parametrize("tool", ["sweep", "transfer"])
def test_a_compile_cache_that_cannot_be_made_names_the_flag(tmp_path, capsys, tool):
    """--compile-cache FILE and --compile-cache FILE/sub: 'error: File exists: FILE' and 'error: Not a directory:
    FILE/sub', naming no flag; now the line names --compile-cache, before --out is made."""
    import importlib

    main = importlib.import_module(f"zoo.cli.{tool}").main
    (tmp_path / "afile").write_text("x")
    sizes = ["--widths", "16", "--depths", "2"] if tool == "sweep" else ["--width", "32", "--proxy-width", "16",
                                                                        "--depth", "2"]
    argv = TINY + sizes
    for cache, why in (("afile", f"{tmp_path / 'afile'} is a file, not a folder"), ("afile/sub", "Not a directory")):
        line = one_line_error(main, [*argv, "--compile-cache", str(tmp_path / cache), "--out", str(tmp_path / "o")],
                              capsys)
        assert f"--compile-cache {tmp_path / cache} cannot be written: {why}" in line, line
    assert not (tmp_path / "o").exists()


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


@pytest.mark.parametrize("held, kind", [("transfer.json", "transfer"), ("law.json", "fit")])
def test_a_sweep_into_a_transfer_or_a_fit_is_refused(tmp_path, capsys, held, kind):
    """zoo.sweep --out TRANSFER wrote its sweep.json there, and the transfer then refused its own folder as holding a
    sweep (it could not be rerun or resumed); now one line, and nothing written."""
    from zoo.cli import sweep

    out = tmp_path / "out"
    out.mkdir()
    (out / held).write_text("{}")
    line = one_line_error(sweep.main, [*TINY, "--widths", "16", "--depths", "2", "--batch-size", "8",
                                       "--out", str(out)], capsys)
    assert line == f"error: --out {out} holds a {kind} ({held}); give the sweep a folder of its own", line
    assert [p.name for p in out.iterdir()] == [held]


def test_an_empty_compare_is_refused_not_taken_for_none(tmp_path, capsys):
    """--compare '' (an unset shell variable) skipped the comparison silently, as --compare none does; now it is an
    unknown parametrization, before anything trains."""
    from zoo.cli import transfer

    line = one_line_error(transfer.main, [*TINY, "--width", "32", "--proxy-width", "16", "--depth", "2",
                                          "--compare", "", "--out", str(tmp_path / "t")], capsys)
    assert "unknown parametrization ''" in line, line
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("tool, flag", [("sweep", "--seeds"), ("transfer", "--target-seeds")])
def test_seed_counts_beyond_any_sweep_are_one_line(tmp_path, capsys, tool, flag):
    """--target-seeds 2147483648 passed the int32 check (seeds 0 .. 2^31 - 1) and the process was SIGKILLed for
    memory building 2^31 members after the proxy sweep, with no line; --seeds 10^8 spent 80 s building members
    before an unexpected MemoryError. Now one line, before anything trains."""
    import importlib

    main = importlib.import_module(f"zoo.cli.{tool}").main
    sizes = ["--widths", "16"] if tool == "sweep" else ["--width", "32", "--proxy-width", "16"]
    with pytest.raises(SystemExit) as stop:
        main(["--out", str(tmp_path / "out"), "--lrs", "1e-3", "--depth", "2", "--steps", "2", "--data", "synthetic",
              *sizes, flag, str(2**31)])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and f"{flag} 2147483648 is more than 1024 seeds per learning rate" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["--proxy-batch-size", "--proxy-steps", "--proxy-tokens"])
def test_a_proxy_flag_without_a_policy_is_refused(tmp_path, capsys, flag):
    """The proxy's batch and horizon are where a --policy maps from; a sweep without one ignored them silently (a
    transfer's proxy trains at them, and takes them without a policy)."""
    from zoo.cli.sweep import main

    out = tmp_path / "out"
    line = one_line_error(main, [*TINY, "--widths", "16", "--depths", "2", flag, "512", "--out", str(out)], capsys)
    assert f"{flag} is the proxy a --policy maps from, and there is no --policy" in line, line
    assert not out.exists()


def test_a_rerun_on_other_examples_of_its_data_is_refused(tmp_path, monkeypatch, capsys):
    """A sweep of a relative text:FILE rerun from another folder, whose file has the same characters and size:
    its next width trained on the other text beside the first width's members, silently. DIR/data.json keeps the
    train split's digest, and a rerun on other examples is one line; on its own data it goes on."""
    from zoo.cli.sweep import main

    text = "a quick brown fox jumps over the lazy dog\n" * 30
    for folder, corpus in (("a", text), ("b", text[::-1])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "t.txt").write_text(corpus)
    args = ["--model", "gpt", "--model-opt", "head_dim=16", "--depths", "1", "--steps", "2", "--batch-size", "4",
            "--seq-len", "16", "--lrs", "1e-3", "--data", "text:t.txt", "--out", str(tmp_path / "s")]
    monkeypatch.chdir(tmp_path / "a")
    main([*args, "--widths", "32"])
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(SystemExit):
        main([*args, "--widths", "32,48"])
    assert "--data text:t.txt is not the data" in capsys.readouterr().err
    assert len((tmp_path / "s" / "results.jsonl").read_text().splitlines()) == 1
    monkeypatch.chdir(tmp_path / "a")
    main([*args, "--widths", "32,48"])
    assert len((tmp_path / "s" / "results.jsonl").read_text().splitlines()) == 2


def test_report_only_waits_for_no_sweep_training_in_its_folder(tmp_path, capsys):
    """--report-only took no lock: it wrote summary.json and sweep.png into a folder whose sweep was training its
    next width (a report of two widths of three, which a late write could leave behind). It is refused in one line
    while another process holds the folder, and writes nothing."""
    import json

    from zoo.cli import sweep
    from zoo.sweeps import results
    from zoo.train.lock import RunLock

    member = {"depth": 2, "eval_loss": 1.0, "eval_accuracy": 0.5, "diverged": False}
    out = tmp_path / "s"
    out.mkdir()
    (out / results.SETTINGS).write_text(json.dumps({"model": "mlp_resnet", "param": "mup", "steps": 2}))
    recs = [{**member, "width": 16, "lr": 2.0**x, "log2_lr": float(x), "seed": 0, "train_loss": 2.0 + 0.1 * x * x}
            for x in (-2, -1, 0)]
    (out / results.RESULTS).write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    with RunLock(out, what="sweep", flag="--out"):  # a sweep training (flock: another open file excludes it too)
        with pytest.raises(SystemExit):
            sweep.main(["--out", str(out), "--report-only"])
        assert "is in use by another sweep" in capsys.readouterr().err
        assert not (out / "summary.json").exists()
    sweep.main(["--out", str(out), "--report-only"])
    assert (out / "summary.json").exists()
