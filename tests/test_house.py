"""The house (issue 19): the loop imports nothing above it; the config is typed parts with one schema for flags,
files and --help; hooks share one schedule; registries open to outside packages (entry points, module:Object)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from cli_utils import ROOT, SMALL, child_env

from zoo.config import FLAT, PARTS, RunConfig, read_file, resolve
from zoo.train.hooks import due


def test_the_loop_imports_nothing_above_it():
    """`import zoo.train.loop` (and the rest of zoo.train) loads no diagnostics, no command line."""
    code = ("import sys, zoo.train.loop, zoo.train.load, zoo.train.hooks\n"
            "print([m for m in sys.modules if m.startswith(('zoo.diagnostics', 'zoo.cli', 'zoo.sweeps', "
            "'zoo.export', 'zoo.papers', 'zoo.audit'))])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=child_env(), capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_due_is_every_n_steps_and_the_last():
    assert [s for s in range(1, 12) if due(s, 4, 11)] == [4, 8, 11]
    assert [s for s in range(1, 6) if due(s, None, 5)] == [5]


def test_config_parts_flat_names_and_nested_files_agree(tmp_path):
    """Every setting has one flat name (its flag); a flat file, a nested file and flags give the same config, and
    the nested form round-trips; resolution returns new configs and never changes the one it is given."""
    assert set(PARTS) == {"model", "param", "optim", "data", "loop"}
    assert {"lr", "optimizer", "model_opt", "param_opt", "data", "steps", "batch_size"} <= set(FLAT)
    (tmp_path / "flat.yaml").write_text("model: gpt\nwidth: 128\nlr: 3.0e-3\nseq_len: 32\nmodel_opt: {dropout: 0}\n")
    (tmp_path / "nested.yaml").write_text("model: {name: gpt, width: 128, options: {dropout: 0}}\n"
                                          "optim: {lr: 3.0e-3}\ndata: {seq_len: 32}\n")
    flat, nested = (resolve({}, read_file(str(tmp_path / f))) for f in ("flat.yaml", "nested.yaml"))
    flags = resolve({"model": "gpt", "width": 128, "lr": 3e-3, "seq_len": 32, "model_opt": {"dropout": 0}})
    assert flat == nested == flags
    assert flat.optim.name == "adamw" and flat.model.width == 128 and flat.data.seq_len == 32  # the gpt recipe
    assert RunConfig.from_json(json.loads(json.dumps(flat.to_json()))) == flat
    wider = flat.replace(width=256)
    assert (flat.model.width, wider.model.width) == (128, 256)


def test_yaml_reads_exponent_numbers_as_the_command_line_does(tmp_path):
    """`lr: 1e-3` in a YAML file is the number 0.001, as `--lr 1e-3` is (YAML 1.1 read it as the string '1e-3' and
    the file was refused with 'lr must be a number'); quoted, it stays a string. Aliases are refused (a billion
    values in nine lines)."""
    (tmp_path / "sci.yaml").write_text("lr: 1e-3\nb2: 9.5E-1\n")
    assert read_file(str(tmp_path / "sci.yaml")) == {"lr": 1e-3, "b2": 0.95}
    (tmp_path / "quoted.yaml").write_text("lr: '1e-3'\n")
    with pytest.raises(ValueError, match="lr must be a number, got '1e-3'"):
        read_file(str(tmp_path / "quoted.yaml"))
    nested = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 3)]  # to a8: 10^9 values, hours
    (tmp_path / "bomb.yaml").write_text("model_opt:\n" + "".join(f"  {line}\n" for line in nested))
    with pytest.raises(ValueError, match="bomb.yaml cannot be read as YAML: it uses an alias"):
        read_file(str(tmp_path / "bomb.yaml"))


def test_epochs_replace_the_steps_before_them(tmp_path):
    """--epochs (flag or file) sets the horizon in place of the recipe's or the file's steps; the resolved config
    states it in steps only, so a run's config.json reads back as a config file."""
    from zoo.train.setup import setup

    (tmp_path / "steps.yaml").write_text("steps: 10\n")
    assert resolve({"epochs": 0.5}).loop.steps is None
    assert resolve({"epochs": 0.5}, read_file(str(tmp_path / "steps.yaml"))).loop.steps is None
    cfg = setup(resolve({"data": "synthetic", "width": 8, "depth": 1, "batch_size": 16, "epochs": 0.5})).cfg
    assert (cfg.loop.steps, cfg.loop.epochs) == (128, None)  # 4096 train images, 256 batches an epoch
    (tmp_path / "stored.json").write_text(json.dumps(cfg.to_json()))
    assert resolve({}, read_file(str(tmp_path / "stored.json"))).loop.steps == 128


def test_help_is_grouped_by_part():
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--help"], cwd=ROOT, env=child_env(),
                          capture_output=True, text=True)
    text = proc.stdout
    headings = [h for h in ("model:", "parametrization:", "optimizer:", "data:", "training loop:") if h in text]
    assert len(headings) == 5 and [text.index(h) for h in headings] == sorted(text.index(h) for h in headings)
    assert text.index("\n  --lr ") > text.index("optimizer:")
    assert text.index("\n  --seed ") > text.index("training loop:")


EXTERNAL = {
    "zoo_ext/__init__.py": '''
        """An outside package adding a plugin, a data source and a model to zoo through entry points."""
        import dataclasses

        import numpy as np

        from zoo.data.dataset import Dataset
        from zoo.models.mlp_resnet import MLPResNet
        from zoo.param.base import MUP_TABLE, Parametrization


        @dataclasses.dataclass(frozen=True)
        class HalfMuP(Parametrization):
            name = "half_mup"
            table = {**MUP_TABLE, "output": (0.5, 0.5, 0.5, 1)}


        def stripes(arg, cfg, limit):
            """Images whose class is the row of a bright stripe."""
            rng = np.random.default_rng(0)
            y = rng.integers(0, 4, 512).astype(np.int32)
            x = np.zeros((512, 8, 8, 1), np.uint8)
            x[np.arange(512), y * 2] = 255
            split = {"x": x, "y": y}
            return Dataset(kind="image", splits={"train": split, "test": split}, num_classes=4, in_shape=(8, 8, 1),
                           eval_split="test")


        class SmallNet(MLPResNet):
            recipe = dict(data="stripes", optimizer="adam", lr=3e-3, batch_size=32, steps=3, eval_every=3)
        ''',
    "zoo_ext-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: zoo-ext\nVersion: 0.1\n",
    "zoo_ext-0.1.dist-info/entry_points.txt": "[zoo.params]\nhalf_mup = zoo_ext:HalfMuP\n\n"
                                              "[zoo.data]\nstripes = zoo_ext:stripes\n\n"
                                              "[zoo.models]\nsmall_net = zoo_ext:SmallNet\n",
}


@pytest.mark.slow
def test_an_installed_package_adds_a_plugin_a_data_source_and_a_model(tmp_path):
    """A package on the path with zoo entry points (as pip installs it): its plugin, data source and model work by
    name from train.py (the model's recipe picks its data), and its plugin from zoo.sweep and zoo.coord_check."""
    site = tmp_path / "site"
    for name, text in EXTERNAL.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(textwrap.dedent(text).lstrip())
    env = child_env({"PYTHONPATH": f"{site}:{ROOT}"})

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)

    trained = run(str(ROOT / "train.py"), "--model", "small_net", "--param", "half_mup", "--width", "32",
                  "--depth", "2", "--run-dir", str(tmp_path / "run"))
    assert trained.returncode == 0, trained.stderr
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["model"]["name"], config["param"]["name"], config["data"]["name"]) == \
        ("small_net", "half_mup", "stripes")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 3
    swept = run("-m", "zoo.sweep", "--out", str(tmp_path / "sweep"), *SMALL[:2], "--param", "half_mup",
                "--widths", "16,32", "--depth", "2", "--lrs", "1e-3", "--steps", "2", "--batch-size", "8",
                "--data", "synthetic")
    assert swept.returncode == 0, swept.stderr
    assert len((tmp_path / "sweep" / "results.jsonl").read_text().splitlines()) == 2
    checked = run("-m", "zoo.coord_check", "--param", "half_mup", "--widths", "32,64", "--depth", "2", "--seeds",
                  "1", "--steps", "1", "--model-opt", "in_shape=8", "--out", str(tmp_path / "coord"))
    assert checked.returncode in (0, 1), checked.stderr  # a verdict either way
    assert json.loads((tmp_path / "coord" / "coord_check_width.json").read_text())["param"] == "half_mup"
    listed = run(str(ROOT / "train.py"), "--help")
    assert "half_mup" in listed.stdout and "small_net" in listed.stdout


def test_a_model_option_is_compared_by_value_not_by_text():
    """--model-opt width=32 is read as text; beside --width 32 (the audit's widths, a resumed run's flags) it is the
    same setting, while width=64 contradicts it."""
    from zoo.train.setup import setup

    def run(text):
        return setup(resolve({"model": "mlp_resnet", "data": "synthetic", "width": 32, "depth": 2,
                              "model_opt": {"width": text}}))

    assert run("32").model_cfg.width == 32
    with pytest.raises(ValueError, match=r"model option width=64 contradicts --width \(width = 32\)"):
        run("64")
