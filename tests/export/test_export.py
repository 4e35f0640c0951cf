"""`python -m zoo.export`: a run with every multiplier folded into its weights (SP form), as orbax + safetensors +
a config that builds the same architecture under `--param sp` at base width = width and base depth = depth."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from cli_utils import exported_model

from zoo.cli.export import main as export_main
from zoo.config import RunConfig
from zoo.diagnostics.inputs import random_inputs
from zoo.export import export
from zoo.train.checkpoint import Checkpoints
from zoo.train.load import read_params
from zoo.train.setup import setup
from zoo.train.step import run_once_options

MODELS = {
    "mlp_resnet": dict(data="synthetic", model_opt={"bias": True, "pre_ln": True}),
    "mixer": dict(data="synthetic", model_opt={"patch": 8, "token_dim": 8}),
    "vit": dict(data="synthetic", model_opt={"patch": 8, "head_dim": 16}),
    # tied embeddings (exported untied) and a fixed head count (the head dim grows with width)
    "gpt": dict(data="synthetic:text", seq_len=16, model_opt={"head_dim": 16, "tie_embeddings": True,
                                                               "scale_heads": False}),
}


def make_run(run_dir: Path, model: str, param: str = "depth_mup", **overrides):
    """A run directory as train.py leaves it (config.json, checkpoints/1) at 2x the base width (16 -> 32) and 2x
    the base depth (1 -> 2), its parameters moved off their init (biases and gains too) by a fixed perturbation."""
    cfg = RunConfig.from_flat(dict(model=model, param=param, width=32, base_width=16, depth=2, base_depth=1,
                                   batch_size=8, steps=1, run_dir=str(run_dir), **{**MODELS[model], **overrides}))
    run = setup(cfg)
    key = jax.random.PRNGKey(cfg.loop.seed)
    state = jax.jit(run.program.init).lower(key).compile(compiler_options=run_once_options())(key)  # as train.py inits
    rng = np.random.default_rng(1)
    state["params"] = jax.tree.map(lambda w: np.asarray(w) + 0.05 * rng.standard_normal(w.shape, np.float32),
                                   state["params"])
    ckpts = Checkpoints(run_dir)
    ckpts.save(1, state, {"step": 1, "config": cfg.to_json(), "plugin": run.plugin.spec()})
    ckpts.wait()
    ckpts.close()
    (run_dir / "config.json").write_text(json.dumps(cfg.to_json()))
    return run, state


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory) -> Path:
    """make_run's MLP-ResNet run dir, shared by the tests that only export it (an export reads a run, never writes
    it)."""
    run = tmp_path_factory.mktemp("mlp") / "run"
    make_run(run, "mlp_resnet")
    return run


@pytest.mark.long
@pytest.mark.parametrize("model", sorted(MODELS))
def test_exported_sp_network_has_the_runs_logits(tmp_path, model):
    """depth_mup at 2x base width and depth: the exported SP-form network (built from its config.json under sp,
    base sizes = sizes, params read back from its checkpoint) gives the run's logits to rtol 1e-5 (f32, normwise);
    model.safetensors holds the same arrays; a tied GPT embedding comes back untied."""
    run, state = make_run(tmp_path / "run", model)
    out = tmp_path / "out"
    export(tmp_path / "run", out, echo=lambda _: None)
    cfg, sp_logits, params, loaded, meta = exported_model(out)
    m = cfg.model
    assert (cfg.param.name, m.base_width, m.base_depth, m.width, m.depth) == ("sp", 32, 2, 32, 2)
    assert meta["exported_from"]["param"] == "depth_mup" and meta["step"] == 1
    x = random_inputs(run.model_cfg, 4, jax.random.key(3))
    both = jax.jit(lambda state, params, x: (run.program.model(state)(x)[0], sp_logits(params, x)))
    compiled = both.lower(state, params, x).compile(compiler_options=run_once_options())
    want, got = map(np.asarray, compiled(state, params, x))
    assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want), np.linalg.norm(got - want)
    from safetensors.numpy import load_file

    tensors = load_file(str(out / "model.safetensors"))
    assert set(tensors) == set(loaded) and all(np.array_equal(tensors[k], loaded[k]) for k in loaded)
    modes = {name: (out / name).stat().st_mode & 0o777 for name in ("model.safetensors", "config.json")}
    assert modes["model.safetensors"] == modes["config.json"], modes  # the weights were written 0600
    if model == "gpt":
        assert cfg.model.options["tie_embeddings"] is False and "head/kernel" in loaded


@pytest.mark.slow
def test_finetune_from_the_export_under_sp(mlp_run, tmp_path, capsys):
    """`train.py --config DIR/config.json --init-from DIR` trains the export under sp: every parameter is loaded
    (none re-initialised), and two steps of training keep the loss finite and move the parameters."""
    from zoo.train.loop import train

    export(mlp_run, tmp_path / "out", echo=lambda _: None)
    cfg = RunConfig.from_json(json.loads((tmp_path / "out" / "config.json").read_text()))
    cfg = cfg.replace(init_from=str(tmp_path / "out"), run_dir=str(tmp_path / "ft"), steps=2, eval_every=2,
                      eval_batch_size=256)
    summary = train(cfg)
    assert "re-initialised" not in capsys.readouterr().out
    assert np.isfinite(summary["final_eval"]["loss"])
    start, end = read_params(tmp_path / "out")[0], read_params(tmp_path / "ft")[0]
    assert set(start) == set(end) and any(not np.array_equal(start[k], end[k]) for k in start)


@pytest.mark.slow
def test_finetuning_an_export_under_another_head_split_is_refused(tmp_path):
    """An export of a ViT of heads of 16 finetuned with --model-opt head_dim=8: its q, k and v loaded into twice as
    many heads of half the size, another network, and the multipliers were checked against this run's own SP form
    (whose attention scale followed the new head dim): accepted silently. Now checked against the model the export
    was made from, and refused in one line; the same head split loads."""
    from zoo.train.loop import train

    make_run(tmp_path / "run", "vit")
    export(tmp_path / "run", tmp_path / "out", echo=lambda _: None)
    cfg = RunConfig.from_json(json.loads((tmp_path / "out" / "config.json").read_text()))
    cfg = cfg.replace(init_from=str(tmp_path / "out"), steps=1, eval_every=1, eval_batch_size=64)
    other = cfg.replace(model_opt={**cfg.model.options, "head_dim": 8}, run_dir=str(tmp_path / "other"))
    with pytest.raises(ValueError, match="its multiplier .* under this run's settings \\(another --param, "
                                         "--param-opt, base size or --model-opt\\)"):
        train(other)
    assert np.isfinite(train(cfg.replace(run_dir=str(tmp_path / "same")))["final_eval"]["loss"])


@pytest.mark.slow
def test_bad_exports_are_one_line(tmp_path, capsys):
    """A missing run, a missing --step, an occupied --out, a critical run (its skip multiplier mu scales the
    residual stream) and a gelu MLP-ResNet under depth_mup (its branch multiplier acts after a non-homogeneous phi)
    are refused in one line with exit status 1, and nothing is written."""
    cases = [(["nowhere", "--out", str(tmp_path / "a")], "no run dir at nowhere: it does not exist")]
    make_run(tmp_path / "crit", "mlp_resnet", param="critical", model_opt={"bias": True})
    cases.append(([str(tmp_path / "crit"), "--out", str(tmp_path / "b")], "skip multiplier mu = 0"))
    make_run(tmp_path / "gelu", "mlp_resnet", model_opt={"activation": "gelu"})
    cases.append(([str(tmp_path / "gelu"), "--out", str(tmp_path / "c")], "not homogeneous"))
    cases.append(([str(tmp_path / "gelu"), "--out", str(tmp_path / "e"), "--step", "7"],
                  "no checkpoint at step 7 (it has 1)"))
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep.txt").write_text("mine")
    cases.append(([str(tmp_path / "gelu"), "--out", str(tmp_path / "d")], "exists and is not an empty directory"))
    for argv, needle in cases:
        with pytest.raises(SystemExit) as code:
            export_main(argv)
        err = capsys.readouterr().err.strip()
        assert code.value.code == 1 and needle in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crit", "d", "gelu"]
    assert (tmp_path / "d" / "keep.txt").read_text() == "mine"


@pytest.mark.slow
def test_an_export_to_a_link_to_an_empty_folder_lands_in_that_folder(mlp_run, tmp_path):
    """--out LINK, a symbolic link to an empty folder: the export loaded, folded and checked the run, then failed in
    'error: Not a directory: LINK' (os.rmdir of a link); now it is written into the folder the link names."""
    import json

    from zoo.export import export

    run, folder, link = mlp_run, tmp_path / "folder", tmp_path / "link"
    folder.mkdir()
    link.symlink_to(folder)
    cfg = export(run, link, echo=lambda _: None)
    assert link.is_symlink() and json.loads((folder / "config.json").read_text()) == cfg
    assert (folder / "model.safetensors").is_file()


@pytest.mark.slow
def test_an_export_removes_the_temporary_folder_a_killed_export_left(mlp_run, tmp_path):
    """A SIGKILLed export left its half-written temporary folder beside --out, and no later export removed it (each
    cleaned only its own pid's). Now an export to OUT removes those of processes that are gone, and keeps a live
    one's (pid 1)."""
    from zoo.export import export
    from zoo.files import temporary

    stale, live = temporary(tmp_path / "out", 999999999), temporary(tmp_path / "out", 1)
    for folder in (stale, live):
        (folder / "checkpoints").mkdir(parents=True)
    export(mlp_run, tmp_path / "out", echo=lambda _: None)
    assert not stale.exists() and live.exists() and (tmp_path / "out" / "config.json").is_file()


@pytest.fixture(scope="module")
def zero_run(tmp_path_factory) -> Path:
    """A tiny run whose logits are 0: muP's zero_init with the output frozen (TP VI's depth runs freeze it)."""
    from zoo.config import resolve
    from zoo.train.loop import train

    run = tmp_path_factory.mktemp("zero") / "run"
    train(resolve({"model": "mlp_resnet", "width": 8, "depth": 1, "data": "synthetic:teacher", "batch_size": 8,
                   "eval_batch_size": 16, "steps": 2, "param": "mup",
                   "param_opt": {"zero_init": True, "freeze": "output"}, "run_dir": str(run)}))
    return run


SIGTERMED = """
import os, signal, sys
from zoo.data import prepare
from zoo.config import resolve
from zoo.errors import Stopped
from zoo.export import export, sp_form
from zoo.train import loop

def terminated(real):
    def call(*args):
        out = real(*args)  # its files half-written
        os.kill(os.getpid(), signal.SIGTERM)
        return out
    return call

tmp = sys.argv[1]
prepare.encode_to = terminated(prepare.encode_to)
sp_form.save_safetensors = terminated(sp_form.save_safetensors)
loop.restore_or_init = terminated(loop.restore_or_init)  # before the compile
run = resolve({"model": "mlp_resnet", "width": 8, "depth": 1, "data": "synthetic:teacher", "batch_size": 8,
               "steps": 2, "run_dir": tmp + "/new/run"})
for write, args in ((prepare.prepare, ("text", tmp + "/a.txt", tmp + "/new/tokens", "char")),
                    (export, (sys.argv[2], tmp + "/new/export")), (loop.train, (run,))):
    try:
        write(*args)
    except Stopped as stop:  # the boundary says its line and exits 128 + its signal
        print(stop.signum, stop.line)
"""


def test_a_run_whose_logits_are_zero_exports(zero_run, tmp_path, monkeypatch):
    """A run under zero_init with its output frozen has logits 0: the fold keeps them 0 exactly, but the check
    divided by their norm, 0 / 0 = nan, and refused the export ('differ from the run's by nan'). An --out that is
    a file is named as one (it read 'not an empty directory'). The check's products run at full float32 precision
    (a GPU's default, TF32, put a mup run's two forms 2.4e-4 apart, past the check's 1e-4)."""
    from zoo.export import export, sp_form

    run = zero_run
    lines: list[str] = []
    precisions = []
    compare = sp_form.relative_error
    monkeypatch.setattr(sp_form, "relative_error",
                        lambda *a: precisions.append(jax.config.jax_default_matmul_precision) or compare(*a))
    export(run, tmp_path / "sp", echo=lines.append)
    assert "logits agree to 0 (relative, f32)" in lines[0] and (tmp_path / "sp" / "model.safetensors").is_file()
    assert precisions == ["highest"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="file is a file, not a directory"):
        export(run, tmp_path / "file")


def test_sigterm_during_a_prepare_an_export_or_a_compile_leaves_nothing_half_written(zero_run, tmp_path):
    """SIGTERM (a job scheduler's stop) during a prepare, an export or a run's compile ended the process at once,
    as Python does by default: the prepare's --out stayed behind with a half-written all.bin.partial (and the
    folders made for it), the export's temporary folder beside --out, the run dir made for a run that never
    trained (its .lock and an empty checkpoints/). All now stop as after Ctrl-C, cleaning up; the boundary says
    one line and exits 143 (128 + SIGTERM)."""
    import subprocess
    import sys

    from cli_utils import ROOT, child_env

    (tmp_path / "a.txt").write_text("hello world this is a tiny corpus\n" * 50)
    proc = subprocess.run([sys.executable, "-c", SIGTERMED, str(tmp_path), str(zero_run)], cwd=ROOT, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    from zoo.train.loop import OUTSIDE_STEPS

    said = proc.stdout.splitlines()[-3:]
    assert proc.returncode == 0 and said == ["15 stopped by SIGTERM; nothing half-written was left"] * 2 + [
        f"15 {OUTSIDE_STEPS}"], proc.stdout + proc.stderr
    assert not (tmp_path / "new").exists()


def test_the_exported_config_names_no_mesh():
    """The export's config.json kept the run's --mesh (fsdp=4,tensor=2 on 8 devices), so the finetune command it
    printed was refused on any other device count ('... = 8 must equal the 1 devices present'). The mesh is the
    devices', not the model's: the exported config has none, and a finetune spreads its batch over what it has."""
    import types

    from zoo.export.sp_form import sp_form

    cfg = RunConfig.from_flat({"model": "mlp_resnet", "mesh": "fsdp=4,tensor=2", "run_dir": "runs/a"})
    exported = sp_form(cfg, types.SimpleNamespace(width=32, depth=2))
    assert (exported.loop.mesh, exported.loop.run_dir, exported.param.name) == (None, None, "sp")


def test_the_safetensors_file_is_the_same_bytes_each_time(tmp_path):
    """safetensors' writer keeps the header's metadata in a hash map of random order (two orders in 20 saves, in one
    process as across processes), so two exports of one checkpoint differed in their bytes; the metadata is written
    in sorted order, and reads back whole with the arrays."""
    from safetensors import safe_open

    from zoo.export.sp_form import save_safetensors

    params = {"block": {"kernel": np.arange(6.0, dtype=np.float32).reshape(2, 3)}, "bias": np.zeros(5, np.float16)}
    cfg = RunConfig.from_flat({"model": "mlp_resnet"})
    blobs = set()
    for k in range(20):
        save_safetensors(tmp_path / f"{k}.safetensors", params, cfg)
        blobs.add((tmp_path / f"{k}.safetensors").read_bytes())
    assert len(blobs) == 1
    with safe_open(str(tmp_path / "0.safetensors"), "np") as f:
        meta = f.metadata()
        assert meta["format"] == "zoo SP form" and json.loads(meta["config"]) == cfg.to_json()
        assert np.array_equal(f.get_tensor("block/kernel"), params["block"]["kernel"])
        assert f.get_tensor("bias").dtype == np.float16
