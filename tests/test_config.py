"""The run config (zoo.config): typed parts with one flat name per setting for flags and files alike; numbers and
paths in a file read as on the command line; model options that contradict the loop's flags refused, by value; a
default eps that follows the optimizer."""

from __future__ import annotations

import json

import pytest
import yaml
from cli_utils import one_line_error

from zoo.cli import sweep as sweep_cli
from zoo.cli import train as train_cli
from zoo.config import FLAT, PARTS, RunConfig, identity_changes, resolve
from zoo.config_file import read_file


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
    with pytest.raises(ValueError, match=r"bomb.yaml cannot be read as YAML: line \d+, column \d+: it uses an alias"):
        read_file(str(tmp_path / "bomb.yaml"))


@pytest.mark.parametrize("text, where", [("model: gpt\nsteps:\t5\n\twidth: 3\n", "line 2, column 7: found character"),
                                         ("model: gpt\n  width: [3\n", "line 2, column 8: mapping values")])
def test_a_yaml_error_names_its_line(tmp_path, text, where):
    """A tab in a YAML file read "cannot be read as YAML: while scanning for the next token", naming no line."""
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ValueError, match=f"c.yaml cannot be read as YAML: {where}"):
        read_file(str(tmp_path / "c.yaml"))


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


def test_steps_given_replace_the_epochs_of_the_file(tmp_path):
    """A file's `epochs: 1` and `--steps 5`: the run trained 5 steps, but --print-config's config said both, and fed
    back it was refused ('--steps and --epochs exclude each other'). The flag's steps replace the file's epochs."""
    (tmp_path / "epochs.yaml").write_text("epochs: 1\n")
    cfg = resolve({"steps": 5}, read_file(str(tmp_path / "epochs.yaml")))
    assert (cfg.loop.steps, cfg.loop.epochs) == (5, None)
    (tmp_path / "printed.yaml").write_text(yaml.safe_dump(cfg.to_json()))
    assert resolve({}, read_file(str(tmp_path / "printed.yaml"))).loop.steps == 5


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


def test_a_model_option_given_as_text_is_the_recipes_typed_value(tmp_path):
    """`--model-opt head_dim=16` (text) beside the ViT recipe's head_dim 16 (an int) is one setting: config.json
    stored "16", and a rerun without the flag was refused as 'other settings'. Options are typed by the model's config
    where the run's settings are made, a stored config's as it is read (a run dir or sweep written before, with
    "16"), and a sweep.json's."""
    typed = resolve({"model": "vit"})
    given = resolve({"model": "vit", "model_opt": {"head_dim": "16", "qkv_bias": "false", "norm_eps": "1e-5",
                                                   "patch": "2"}})
    assert given.model.options == {**typed.model.options, "patch": 2}
    assert identity_changes(typed.to_json(), given) == ["model_opt " + json.dumps(typed.model.options) + " -> "
                                                        + json.dumps(given.model.options)]
    stored = typed.to_json()
    stored["model"]["options"] = {k: str(v).lower() if isinstance(v, bool) else str(v)
                                  for k, v in typed.model.options.items()}  # as a command line stored them before
    assert identity_changes(stored, typed) == []
    from zoo.sweeps.results import read_settings

    flat = {k: v for k, v in json.loads(json.dumps(typed.identity())).items() if k not in ("lr", "seed")}
    (tmp_path / "sweep.json").write_text(json.dumps({**flat, "model_opt": stored["model"]["options"]}))
    assert read_settings(tmp_path)["model_opt"] == typed.model.options
    odd = resolve({"model": "mlp_resnet", "model_opt": {"activation": "tanh"}})  # text options stay text
    assert odd.model.options == {"activation": "tanh"}


@pytest.mark.parametrize("model, param, options, other", [
    ("mlp_resnet", "depth_mup", {"param_opt": {"alpha": "0.5"}, "model_opt": {"activation": "relu"}},
     {"param_opt": {"alpha": "1"}}),
    ("gpt", "completep", {"model_opt": {"mlp_ratio": "4", "bias": "false"}, "param_opt": {"alpha": "1.0"}},
     {"model_opt": {"mlp_ratio": "3"}})])
def test_options_given_at_their_defaults_are_the_same_run_and_sweep(tmp_path, model, param, options, other):
    """An option given at its default (`--param-opt alpha=0.5` to depth_mup, whose alpha is 1/2) trains the run that
    left it out: a resume and a sweep's rerun take it; an option at another value is still another run."""
    from zoo.sweeps import results

    plain, given, changed = (resolve({"model": model, "param": param, "width": 48, **o}) for o in ({}, options, other))
    assert identity_changes(plain.to_json(), given) == [] and identity_changes(given.to_json(), plain) == []
    key = next(iter(other))
    assert [c.split(" ")[0] for c in identity_changes(plain.to_json(), changed)] == [key]
    flat = [{k: v for k, v in json.loads(json.dumps(c.identity())).items() if k not in results.PER_MEMBER}
            for c in (plain, given, changed)]
    results.check_settings(tmp_path, flat[0])
    results.append(tmp_path, [{"width": 48, "depth": 2, "lr": 0.5, "seed": 0}])
    results.check_settings(tmp_path, flat[1])
    with pytest.raises(ValueError, match=f"other settings \\({key} "):
        results.check_settings(tmp_path, flat[2])


def test_print_config_shows_the_model_the_settings_build(capsys, tmp_path):
    """--print-config printed `width: null` and `options: {}` for the GPT: nanoGPT's n_embd, n_layer, heads and
    dropout were nowhere. The model config the settings build follows as YAML comments (the data's facts left out),
    and the file still reads back as the same settings."""
    import yaml

    train_cli.main(["--print-config", "--model", "gpt", "--depth", "3", "--precision", "bf16"])
    out = capsys.readouterr().out
    built = yaml.safe_load("\n".join(line[1:] for line in out.splitlines() if line.startswith("#   ")))["gpt"]
    assert (built["width"], built["depth"], built["head_dim"], built["dropout"], built["dtype"]) == (
        384, 3, 64, 0.2, "bfloat16")
    assert not {"vocab_size", "seq_len", "in_shape"} & set(built)
    (tmp_path / "c.yaml").write_text(out)
    train_cli.main(["--print-config", "--config", str(tmp_path / "c.yaml")])
    assert capsys.readouterr().out == out


def test_options_typed_to_none_and_plugin_options_read_back(tmp_path):
    """Typing options stored `--model-opt init_std=none` as null, which --config refuses: a run's config.json (and a
    fork's, an export's) could not be read back. None is stored as the text "none". A plugin's options are typed too:
    `--param-opt alpha=1` and a file's 1.0 are one setting."""
    cfg = resolve({"model": "gpt", "model_opt": {"init_std": "none", "num_heads": "none"}, "param": "depth_mup",
                   "param_opt": {"alpha": "1"}})
    assert cfg.model.options == {"init_std": "none", "num_heads": "none"} and cfg.param.options == {"alpha": 1.0}
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_json()))
    again = resolve({}, read_file(str(tmp_path / "config.json")))
    assert again == cfg and identity_changes(cfg.to_json(), again) == []
    assert identity_changes(cfg.to_json(), cfg.replace(param_opt={"alpha": 1})) == []
    # the plugin named as --param-opt takes it, not in Python's forms (hidden=[0.0, 0.5, 1.0, 1.0], zero_init=True)
    assert str(cfg.param) == "depth_mup(alpha=1)"
    assert str(resolve({"param": "abcd", "param_opt": {"hidden": "0,0.5,1,1"}}).param) == "abcd(hidden=0,0.5,1,1)"
    assert str(resolve({"param": "mup", "param_opt": {"zero_init": "true"}}).param) == "mup(zero_init=true)"
    exact = resolve({"param": "abcd", "param_opt": {"hidden": "0,0.123456789,1,1"}}).param  # not rounded to 6 digits
    assert str(exact) == "abcd(hidden=0,0.123456789,1,1)"


def test_reading_a_sweep_never_imports_the_code_it_names(tmp_path, monkeypatch):
    """Typing a sweep.json's model options resolved its model, and a `module:Object` there was imported (its code
    ran) by zoo.fit or a sweep's --report-only, before the refusal that says a file never makes zoo import code."""
    from zoo.sweeps.results import read_settings

    monkeypatch.chdir(tmp_path)
    (tmp_path / "payload_mod.py").write_text("import pathlib\npathlib.Path('ran').write_text('1')\nclass Net: pass\n")
    flat = json.loads(json.dumps(resolve({}).identity()))
    (tmp_path / "sweep.json").write_text(json.dumps({**flat, "model": "payload_mod:Net", "model_opt": {"a": "1"},
                                                     "param": "payload_mod:P", "param_opt": {"b": "2"}}))
    settings = read_settings(tmp_path)
    assert settings["model_opt"] == {"a": "1"} and settings["param_opt"] == {"b": "2"}
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("flag, option", [("--width", "width=64"), ("--base-depth", "base_depth=3")])
def test_print_config_refuses_a_size_given_twice_as_training_does(flag, option, capsys):
    """--print-config printed `--width 32 --model-opt width=64` with exit 0, a config training then refused."""
    line = one_line_error(train_cli.main, ["--print-config", flag, "32", "--model-opt", option], capsys)
    assert f"model option {option} contradicts {flag}" in line, line


@pytest.mark.parametrize("text, want", [
    ("steps: 010\n", 10),  # YAML 1.1: octal 8, where --steps 010 is 10
    ("steps: +12\n", 12), ("lr: 1e-3\n", 1e-3), ("lr: +.5\n", 0.5), ("lr: 3.\n", 3.0),
    ("steps: 1:30\n", "'1:30'"),  # YAML 1.1: base 60, 90
    ("width: 0x40\n", "'0x40'"), ("width: 0b101\n", "'0b101'"), ("steps: 1_000\n", "'1_000'"),
    ("lr: 1_0.5\n", "'1_0.5'"),
])
def test_config_file_numbers_read_as_typed_on_the_command_line(text, want, tmp_path, capsys, monkeypatch):
    """A YAML config file read `steps: 010` as 8 and `steps: 1:30` as 90 (YAML 1.1's octal and base 60), `width:
    0x40` as 64 and `1_000` as 1000: numbers in a file now read as the same text on the command line does, and the
    other forms are refused in one line."""
    monkeypatch.chdir(tmp_path)
    from zoo.config_file import read_file

    (tmp_path / "run.yaml").write_text(text)
    if isinstance(want, str):
        line = one_line_error(train_cli.main, ["--print-config", "--config", str(tmp_path / "run.yaml")], capsys)
        assert f"must be an integer, got {want}" in line or f"must be a number, got {want}" in line, line
    else:
        assert list(read_file(str(tmp_path / "run.yaml")).values()) == [want]


def test_a_run_dir_under_the_home_folder_in_a_config_file(tmp_path, monkeypatch, capsys):
    """`run_dir: ~/runs/a` in a config file (or a quoted '~/runs/a') trained into ./~/runs/a, where the data paths
    of the same file read ~ as the home folder: every path setting and path flag reads it so."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "run.yaml").write_text("run_dir: ~/runs/a\ninit_from: ~/runs/b\n")
    train_cli.main(["--print-config", "--config", "~/../run.yaml"])
    out = capsys.readouterr().out
    assert f"run_dir: {tmp_path}/home/runs/a" in out and f"init_from: {tmp_path}/home/runs/b" in out, out


@pytest.mark.parametrize("argv, both", [
    (["--model-opt", "dtype=bfloat16", "--precision", "f32"], ("dtype=bfloat16", "--precision f32")),
    (["--model-opt", "dtype=bfloat16"], ("dtype=bfloat16", "--precision f32")),
    (["--model-opt", "dtype=float32", "--precision", "bf16"], ("dtype=float32", "--precision bf16")),
    (["--model", "gpt", "--model-opt", "dtype=float16", "--precision", "bf16"], ("dtype=float16", "--precision bf16")),
    (["--remat", "block", "--model-opt", "remat=false"], ("remat=false", "--remat block")),
])
def test_a_model_dtype_or_remat_that_contradicts_the_loop_flags_is_refused(argv, both, capsys, tmp_path, monkeypatch):
    """`--model-opt dtype=bfloat16 --precision f32` trained in bf16 (the option won over the flag, and the run
    recorded f32): the flags set these options, and an option that says otherwise is refused naming both."""
    monkeypatch.chdir(tmp_path)
    line = one_line_error(train_cli.main, ["--print-config", *argv], capsys)
    assert all(part in line for part in both), line


def test_the_same_contradiction_is_refused_by_the_sweep_and_the_audit(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from zoo.cli import audit as audit_cli

    for main, argv in ((sweep_cli.main, ["--out", "x", "--lrs", "1e-3"]), (audit_cli.main, [])):
        line = one_line_error(main, [*argv, "--model-opt", "dtype=bfloat16", "--precision", "f32"], capsys)
        assert "--model-opt dtype=bfloat16 contradicts --precision f32" in line, line


def test_model_options_that_agree_with_the_loop_flags_are_taken(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train_cli.main(["--print-config", "--model-opt", "dtype=bfloat16", "--precision", "bf16", "--remat", "block",
                    "--model-opt", "remat=true"])
    out = capsys.readouterr().out
    assert "precision: bf16" in out and "remat: block" in out


def test_a_remat_option_without_remat_given_is_taken():
    """The sweeps and the audit have no --remat: the model option is how they recompute blocks (the same losses),
    so it is refused only against a --remat given; --precision, which changes every number, always counts."""
    from zoo.cli.sweep import run_config

    cfg = run_config(sweep_cli.parser().parse_args(["--out", "x", "--lrs", "1e-3", "--model-opt", "remat=true"]))
    assert cfg.model.options == {"remat": True} and cfg.loop.remat == "none"


@pytest.mark.parametrize("model", ["mixer", "vit"])
def test_a_sweeps_base_sizes_are_its_smallest_not_the_recipes(model):
    """The mixer's recipe sets base width 128 and depth 8 (its model's own size), the ViT's base depth 9: a sweep's
    base sizes default to its smallest swept ones and a transfer's to its proxy's (docs/sweeps.md), as for a model
    whose recipe sets none; given ones are kept."""
    from zoo.cli import transfer as transfer_cli

    def sweep(*extra):
        args = ["--out", "x", "--lrs", "1e-3", "--model", model, "--widths", "48,96", "--depths", "3,5", *extra]
        return sweep_cli.build_spec(sweep_cli.parser().parse_args(args))

    assert sweep().bases() == (48, 3)
    assert sweep("--base-width", "16", "--base-depth", "4").bases() == (16, 4)
    args = ["--out", "x", "--lrs", "1e-3", "--model", model, "--param", "mup", "--proxy-width", "48", "--width", "96",
            "--depth", "3"]
    arms = transfer_cli.build_spec(transfer_cli.parser().parse_args(args)).arms()
    assert [(a.model.base_width, a.model.base_depth) for a in arms] == [(48, 3), (48, 3)]


def test_a_runs_config_with_a_remat_option_reads_back(tmp_path, capsys):
    """A run (or --print-config) with `--model-opt remat=true` and no --remat wrote `remat: none` beside it, and
    --config of that file was refused ('contradicts --remat none'): a file's setting that repeats the default is no
    setting given, as one that repeats the recipe's is not."""
    train_cli.main(["--print-config", "--model-opt", "remat=true"])
    out = capsys.readouterr().out
    (tmp_path / "c.yaml").write_text(out)
    train_cli.main(["--print-config", "--config", str(tmp_path / "c.yaml")])
    assert capsys.readouterr().out == out
    line = one_line_error(train_cli.main, ["--print-config", "--config", str(tmp_path / "c.yaml"), "--remat", "none"],
                          capsys)  # given on the command line, it is still refused
    assert "--model-opt remat=true contradicts --remat none" in line, line


def test_the_program_computes_in_the_precision_the_run_records():
    """What setup gives the model: --precision bf16's dtype, as config.json records it."""
    from zoo.config import resolve
    from zoo.train.setup import _model_overrides

    class Data:
        in_shape, num_classes, seq_len = (8,), 4, None

    cfg = resolve({"precision": "bf16", "remat": "block", "width": 8, "depth": 1})
    over = _model_overrides(cfg, Data())
    assert over["dtype"] == "bfloat16" and over["remat"] is True


def test_a_config_file_with_a_bad_mesh_is_refused(tmp_path, capsys):
    file = tmp_path / "run.yaml"
    file.write_text("loop: {mesh: 'fsdp=two'}\n")
    argv = ["--print-config", "--config", str(file)]
    assert "'fsdp=two' needs an integer size" in one_line_error(train_cli.main, argv, capsys)


@pytest.mark.parametrize("text, kind", [("loop: 5", "int"), ("optim: [1, 2]", "list")])
def test_a_part_that_is_no_mapping_is_named_as_one(tmp_path, capsys, text, kind):
    """`loop: 5` was 'unknown option(s) loop', though loop is a part of the settings."""
    file = tmp_path / "run.yaml"
    file.write_text(text + "\n")
    line = one_line_error(train_cli.main, ["--print-config", "--config", str(file)], capsys)
    assert line.endswith(f"{text.split(':')[0]} holds settings (a mapping), not {kind}"), line


def test_a_run_files_default_eps_follows_a_new_optimizer():
    """A run's config.json holds its optimizer's resolved eps: an Adafactor run's 1e-30 rerun with --optimizer adam
    trained Adam with eps 1e-30 (its default is 1e-8), and an Adam run's 1e-8 became Adafactor's eps1 (default
    1e-30). A default eps now follows the optimizer; an eps the file chose, or a flag's, is kept."""
    from zoo.config import resolve

    adafactor_run = {"model": "mlp_resnet", "optimizer": "adafactor", "eps": 1e-30}
    assert resolve({"optimizer": "adam"}, adafactor_run).optim.eps == 1e-8
    assert resolve({}, adafactor_run).optim.eps == 1e-30
    assert resolve({"optimizer": "adam", "eps": 1e-5}, adafactor_run).optim.eps == 1e-5
    assert resolve({"optimizer": "adafactor"}, {"model": "gpt", "eps": 1e-8}).optim.eps == 1e-30  # gpt: adamw
    assert resolve({"optimizer": "adafactor"}, {"model": "mlp_resnet", "eps": 1e-6}).optim.eps == 1e-6



def test_a_setting_an_older_run_lacks_is_its_default_not_todays_recipe():
    """decay_vectors was added with the ViT's recipe setting it true: a ViT run dir written before (no such key, and
    vectors not decayed) resumed under the new recipe silently, its params off by up to 1.48 relative, and its
    config.json rewritten. A missing setting is its default (the behaviour before it existed), so the change shows."""
    args = train_cli.parser().parse_args(["--model", "vit", "--steps", "10"])
    now = train_cli.config_from_args(args)
    old = now.to_json()
    del old["optim"]["decay_vectors"]
    assert identity_changes(old, now) == ["decay_vectors false -> true"]
    assert identity_changes(old, now.replace(decay_vectors=False)) == []
    assert identity_changes(now.to_json(), now) == []


def test_decay_vectors_without_weight_decay_is_refused_but_a_recipes_is_not():
    """--decay-vectors where nothing decays (Adam's weight decay 0) changed nothing, silently, and as an identity
    setting then made a resume without it refuse. Given, it is refused in one line; set by a recipe (the Mixer's)
    under --weight-decay 0, it stays, unread."""
    with pytest.raises(ValueError, match="--decay-vectors widens the weight decay, and the run has none"):
        resolve({"model": "mlp_resnet", "decay_vectors": True})
    assert resolve({"model": "mlp_resnet", "decay_vectors": True, "weight_decay": 0.1}).optim.decay_vectors
    assert resolve({"model": "mixer", "weight_decay": 0.0}).optim.decay_vectors


def test_a_config_file_repeating_the_recipe_is_not_a_setting_given():
    """A ViT run under --schedule constant stores the recipe's min_lr_ratio 0.001 in its config.json (and a transfer
    its target.json); `train.py --config` of that file was refused ('--min-lr-ratio is where the decaying schedules
    end'). A file's value equal to the recipe's is not given; another value still is."""
    flags = {"model": "vit", "schedule": "constant"}
    assert resolve(flags, {"min_lr_ratio": 1e-3}).optim.min_lr_ratio == 1e-3
    with pytest.raises(ValueError, match="--min-lr-ratio is where the decaying schedules end"):
        resolve(flags, {"min_lr_ratio": 0.01})


def test_a_float_setting_takes_a_power_of_two_as_the_sweeps_write_it(capsys):
    """`--lr 2^-9` and `--weight-decay 2^-6`, the form `--lrs` takes and a sweep's report gives (train.py refused it:
    'must be a number'); anything else after `2^` is still no number."""
    args = train_cli.parser().parse_args(["--lr", "2^-9", "--weight-decay", "2^-6"])
    assert (args.lr, args.weight_decay) == (2.0**-9, 2.0**-6)
    for text in ("2^x", "2^", "2^1e5"):
        line = one_line_error(train_cli.main, ["--lr", text], capsys)
        assert f"argument --lr: must be a number, got '{text}'" in line, line
