"""Bad input: one clear line naming what is wrong, a non-zero exit, no traceback, nothing on disk lost (issues 3, 9).

Commands run through `zoo.cli.train.main`, many in one subprocess (run_main_many): those that fail before training,
and the reruns of a small run on disk (damaged, from an older zoo, under other settings)."""

from __future__ import annotations

import json
import re

import pytest
from cli_utils import ROOT, SMALL, clean_error, one_line_error, run_main_many, saved_run

from zoo.train.lock import RunLock

TINY_GPT = ["--model", "gpt", "--width", "64", "--depth", "1", "--batch-size", "4", "--seq-len", "16"]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A finished 4-step run of SMALL as train.py leaves it for its readers (config.json, checkpoints at 2 and 4,
    summary.json), made in this process: every use below is refused before a step is trained or compiled."""
    run = saved_run(tmp_path_factory.mktemp("small") / "run", (2, 4), [*SMALL, "--ckpt-every", "2"])
    (run / "summary.json").write_text(json.dumps({"steps": 4}))
    RunLock(run).release()  # its .lock, empty, as a run that exited leaves it
    return run


def _cases(tmp, small_run):
    tmp.mkdir(exist_ok=True)
    (tmp / "typo.yaml").write_text("width: abc\n")
    (tmp / "list.yaml").write_text("- 1\n- 2\n")
    (tmp / "afile").write_text("not a directory")
    (tmp / "intkey.yaml").write_text("model_opt: {1: 2}\n")
    (tmp / "both.yaml").write_text("steps: 10\nepochs: 2\n")
    (tmp / "twice.yaml").write_text("lr: 0.1\noptim: {lr: 0.2}\n")
    (tmp / "repeated.yaml").write_text("width: 32\nwidth: 64\n")
    (tmp / "repeated.json").write_text('{"optim": {"lr": 0.1, "lr": 0.2}}')
    (tmp / "cfgdir" / "config.json").mkdir(parents=True)
    r = str(tmp / "r")
    return [
        (["--config", str(tmp)], "is a directory, not a YAML or JSON file"),
        (["--config", str(tmp / "intkey.yaml")], "model_opt has the key 1; option names are strings"),
        (["--config", str(tmp / "both.yaml")], "--steps and --epochs exclude each other (both in the config file)"),
        (["--config", str(tmp / "typo.yaml"), "--config", str(tmp / "both.yaml")], "--config given twice ("),
        (["--epochs", "1"], "--steps and --epochs exclude each other"),
        (["--steps", str(2**31)], "--steps must be at most 2^31 - 1"),
        (["--warmup", str(10**23)], "--warmup must be at most 2^31 - 1"),
        (["--model", "resnet50"], "unknown model 'resnet50'"),
        (["--param", "mupp"], "unknown parametrization 'mupp'"),
        (["--param", "depth_mup", "--param-opt", "beta=1"], "has no option 'beta'; its options (--param-opt K=V)"),
        (["--param-opt", "init_mult=1", "--param-opt", "init-mult=2"],
         "--param-opt init_mult given twice (init_mult=1 and init_mult=2): give it once"),
        (["--model-opt", "activation=relu", "--model-opt", "activation=tanh"],
         "--model-opt activation given twice (activation=relu and activation=tanh): give it once"),
        (["--model-opt", "activation=nope", "--print-config"], "unknown activation 'nope'; choose from relu"),
        (["--param-opt", "freeze=bogus", "--print-config"], "freeze: unknown kind bogus; kinds are input"),
        (["--data", "mnist-ish"], "mnist-ish"),
        (["--data", "imagefolder:/nonexistent/dir"], "/nonexistent/dir"),
        (["--config", "/nonexistent.yaml"], "/nonexistent.yaml"),
        (["--config", str(tmp / "typo.yaml")], "width must be an integer, got 'abc'"),
        (["--config", str(tmp / "list.yaml")], "must hold a mapping"),
        (["--width", "0"], "--width must be positive, got 0"),
        (["--seed", "-1"], "--seed must be in [0, 2^32), got -1"),
        (["--seed", str(2**32)], "--seed must be in [0, 2^32)"),  # PRNGKey(2^32) is PRNGKey(0): seed 0's init
        (["--run-dir", ""], "--run-dir must not be empty"),
        (["--depth", "2", "--model-opt", "depth=3"], "model option depth=3 contradicts --depth (depth = 2)"),
        (["--model", "mixer", "--model-opt", "patch=0"], "model option patch must be at least 1, got 0"),
        ([*TINY_GPT, "--data", "shakespeare", "--model-opt", "dropout=1.5"], "dropout must be in [0, 1), got 1.5"),
        ([*TINY_GPT, "--data", "shakespeare", "--model-opt", "seq_len=32"], "seq_len=32 contradicts the data"),
        (["--param", "critical", "--param-opt", "sigma_w=-1"], "option sigma_w of 'critical' must be > 0"),
        (["--lr", "nan"], "argument --lr: must be a finite number, got 'nan'"),
        (["--lr", "1e400"], "argument --lr: must be a finite number, got '1e400'"),  # as typed, not its inf
        (["--lr", "0"], "--lr must be positive, got 0.0"),
        (["--warmup", "-1"], "--warmup must be >= 0, got -1"),
        (["--b1", "1"], "--b1 must be in [0, 1), got 1.0"),
        (["--b2", "-0.5"], "--b2 must be in [0, 1), got -0.5"),
        (["--b1", "0.9999999999999999"], "--b1 must be in [0, 1) as a float32, which JAX computes it in: "
         "0.9999999999999999 rounds to 1.0"),
        (["--eps", "1e-50"], "--eps 1e-50 is below float32's smallest normal number 1.18e-38"),
        (["--lr", "1e39"], "--lr 1e+39 is beyond float32's largest number 3.4e+38"),
        (["--eps", "0"], "--eps must be positive, got 0.0"),
        (["--optimizer", "sgd", "--b1", "0.5"], "--b1 is read only by --optimizer adam / adamw / muon / lion; "
         "--optimizer sgd does not read it: leave it out"),
        (["--momentum", "0.5"], "--momentum is read only by --optimizer momentum; --optimizer adam does not read it"),
        (["--min-lr-ratio", "0.1"], "--schedule constant does not read it"),
        (["--seq-len", "64"], "--seq-len is the context length of text data, but synthetic is a set of images"),
        (["--grad-accum", "3"], "not divisible by --grad-accum 3"),
        (["--mesh", "data=3"], "must equal the 1 devices"),
        (["--mesh", "pipeline=2"], "unknown axis 'pipeline'"),
        (["--mesh", "data=1,data=1"], "axis data is given twice"),
        (["--workers", "2"], "--workers 2 decode streamed batches, but synthetic is held in memory"),
        (["--stream", "true", "--workers", str(2**30)], "CPU cores this process may use (each worker is a process"),
        (["--byte-level"], "--byte-level tokenizes raw text (text:FILE, shakespeare, a tfds text set), but synthetic "
         "is not text"),
        (["--data", "synthetic:teacher", "--augment", "crop_flip"],
         "synthetic:teacher is a set of examples of shape (16,)"),
        ([*TINY_GPT, "--data", "shakespeare", "--augment", "mixup"], "--augment mixup augments images (height, "
         "width, channels), but shakespeare is a text set"),
        (["--augment", "crop,blur"], "--augment crop,blur has no op 'blur'"),
        (["--run-dir", str(tmp / "cfgdir")], "config.json is a directory, not a run's config"),
        (["--run-dir", str(tmp / "bad\udcffname")], "--run-dir must be UTF-8 text"),  # argv bytes b"bad\xffname"
        (["--config", str(tmp / "twice.yaml")], "lr is given twice, as lr and as optim.lr; give it once"),
        (["--config", str(tmp / "repeated.yaml")], "repeated.yaml: width is given twice in one mapping; give it once"),
        (["--config", str(tmp / "repeated.json")], "repeated.json: lr is given twice in one mapping; give it once"),
        (["--run-dir", str(tmp / "afile")], "is a file"),
        (["--run-dir", str(tmp / "afile" / "sub")], "cannot create --run-dir"),
        (["--model", "gpt", "--data", "synthetic"], "model gpt needs text data; synthetic is an image set"),
        (["--model", "vit", "--data", "shakespeare"], "model vit needs image data; shakespeare is a text set"),
        (["--model", "vit", "--data", "synthetic:teacher"], "needs images of shape (height, width, channels)"),
        (["--model", "vit", "--width", "40", "--data", "synthetic"], "scale_heads=false"),
        ([*TINY_GPT, "--data", "shakespeare", "--seq-len", "65536", "--batch-size", "64"],
         "GB of activations per device"),
        ([*TINY_GPT, "--data", "shakespeare", "--init-from", str(small_run)], "(it is a run of mlp_resnet, this one "
         "of gpt)"),
        ([*SMALL, "--width", "128", "--depth", "3", "--init-from", str(small_run)], "(it is a mlp_resnet of width 32, "
         "depth 2, and this one of width 128, depth 3)"),
        ([*SMALL, "--init-from", f"{small_run}:2"], f"--init-from {small_run}:2: --init-from takes a run dir and reads "
         "its newest good checkpoint, not RUN:STEP; to start from step 2, export it"),
    ], r


def test_bad_input_is_one_line(rerun):
    """Every case exits non-zero with its key words in the last stderr line and no traceback; the activation
    check refuses a 65536-token context before anything is compiled."""
    for (args, expect), (code, err) in zip(rerun["cases"], rerun["bad"], strict=True):
        line = clean_error(code, err)
        assert expect in line, (args, line)
        if "--seq-len" in args:
            assert "compiling" not in err
    assert rerun["small_run"].exists()


def test_flag_type_errors_and_help_defaults(capsys):
    """argparse's own checks (a non-number) and --help, which shows each flag's real default."""
    from zoo.cli.train import main

    assert "argument --width: must be an integer, got 'abc'" in one_line_error(main, ["--width", "abc"], capsys)
    # a negative number in scientific notation is the flag's value (argparse took it for a flag: "expected one
    # argument"), refused by the flag's own check
    assert "--lr must be positive, got -0.001" in one_line_error(main, ["--lr", "-1e-3"], capsys)
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "(default: None)" not in text
    flat = " ".join(text.split())
    for expect in ("--lr LR peak learning rate", "(default: 0.001; vit 0.002)", "(default: 128; gpt 64, vit 512)",
                   "(default: f32)", "(default: adam; gpt adamw, vit adamw)", "(default: the model's; mixer 128)"):
        assert expect in flat, expect


def test_example_config_file_runs(rerun):
    """configs/run.yaml, the example the README names, is a valid config (2 steps at a shrunk size)."""
    assert (ROOT / "configs" / "run.yaml").is_file()
    code, err = rerun["example"]
    assert code == 0, err


@pytest.fixture(scope="module")
def rerun(small_run, tmp_path_factory) -> dict:
    """Every train.py command of this module through its main, in one process: the bad inputs (`bad`, in the order
    of `cases`), configs/run.yaml (`example`), and small_run rerun: a copy whose every checkpoint is garbage, a copy
    whose checkpoints predate Dense kernels stored (out, in), and the run itself under another width. (exit status,
    stderr) and each copy's files before, by name."""
    import shutil

    root = tmp_path_factory.mktemp("rerun")
    cases, run_dir = _cases(root / "inputs", small_run)
    bad = [[*SMALL, "--steps", "2", *([] if "--run-dir" in args else ["--run-dir", f"{run_dir}{i}"]), *args]
           for i, (args, _) in enumerate(cases)]  # --run-dir is given once
    example = ["--config", str(ROOT / "configs" / "run.yaml"), "--steps", "2", "--width", "32", "--depth", "2",
               "--data", "synthetic", "--eval-every", "2", "--run-dir", str(root / "example")]
    corrupt, in_out = root / "corrupt", root / "in_out"
    for run in (corrupt, in_out):
        shutil.copytree(small_run, run)
        (run / "summary.json").unlink()  # not finished: the rerun must read a checkpoint
    for f in (corrupt / "checkpoints").rglob("*"):
        if f.is_file() and f.stat().st_size > 0 and "state" in str(f):
            f.write_bytes(b"garbage")
    metas = [f for f in (in_out / "checkpoints").rglob("metadata") if f.parent.name == "meta"]
    assert metas
    for f in metas:
        meta = json.loads(f.read_text())
        assert meta.pop("kernels") == "out_in"
        f.write_text(json.dumps(meta))
    before = {"corrupt": sorted(str(p) for p in (corrupt / "checkpoints").rglob("*")),
              "in_out": sorted(str(p) for p in in_out.rglob("*"))}
    runs = {"corrupt": [*SMALL, "--steps", "4", "--ckpt-every", "2", "--run-dir", str(corrupt)],
            "in_out": [*SMALL, "--steps", "4", "--ckpt-every", "2", "--run-dir", str(in_out)],
            "wider": [*SMALL, "--steps", "4", "--run-dir", str(small_run), "--width", "64"]}
    *out, example = run_main_many([*bad, *runs.values(), example])
    return {"corrupt_dir": corrupt, "in_out_dir": in_out, "before": before, "cases": cases, "small_run": small_run,
            "bad": out[:len(bad)], "example": example, **dict(zip(runs, out[len(bad):], strict=True))}


def test_corrupt_checkpoints_are_reported_and_kept(rerun):
    """Every checkpoint unreadable: one line, exit 1, every file still there."""
    line = clean_error(*rerun["corrupt"])
    assert "no checkpoint" in line and "can be read" in line
    assert sorted(str(p) for p in (rerun["corrupt_dir"] / "checkpoints").rglob("*")) == rerun["before"]["corrupt"]


def test_checkpoint_with_in_out_kernels_is_one_line_and_kept(rerun):
    """A checkpoint from before Dense kernels were stored (out, in) (no "kernels" in its metadata): one line naming
    the layout, exit 1, nothing moved to corrupt/ (its hidden kernels are square: it would load, transposed)."""
    line = clean_error(*rerun["in_out"])
    assert "holds Dense kernels in_out" in line and "train it again" in line
    assert sorted(str(p) for p in rerun["in_out_dir"].rglob("*")) == rerun["before"]["in_out"]


def test_different_run_in_same_dir_is_refused(rerun):
    line = clean_error(*rerun["wider"])
    assert "holds a run with other settings (width 32 -> 64)" in line


@pytest.mark.parametrize("command", ["audit", "coord_check", "criticality", "papers", "sweep", "train", "transfer"])
def test_help_states_each_default_once(command):
    """Every command's --help: no flag's help shows "(default: None)" or "[]", a Python "False" where the flag
    takes true|false, nor two defaults (a help text's own "(default: the model's)" and argparse's appended one)."""
    import importlib

    text = importlib.import_module(f"zoo.cli.{command}").parser().format_help()
    flat = " ".join(text.split())
    for empty in ("(default: None)", "(default: [])", "(default: False)", "(default: True)"):
        assert empty not in flat, (command, empty)
    for flag_help in re.split(r"\s(?=--?[a-z])", flat):
        assert flag_help.count("(default:") <= 1, (command, flag_help)
