"""zoo.config_file: a config zoo wrote, read back with `--config`, trains as it was written."""

from __future__ import annotations

import json

from zoo.cli import train as train_cli
from zoo.config import resolve
from zoo.config_file import read_file, written_by_zoo


def test_a_setting_added_since_zoo_wrote_a_config_is_its_default_not_the_recipes(tmp_path):
    """A transfer's target.json (or a run's config.json) written before decay_vectors existed, read back with
    `train.py --config`, trained with today's ViT recipe's decay_vectors true, no word said: not the run it
    describes. A config zoo wrote held every setting of its day, so a missing one is its default; a hand-written
    file, flat or partly nested, still takes the recipe's."""
    cfg = train_cli.config_from_args(train_cli.parser().parse_args(["--model", "vit", "--steps", "10"]))
    stored = cfg.to_json()
    del stored["optim"]["decay_vectors"]
    (tmp_path / "target.json").write_text(json.dumps(stored))
    assert written_by_zoo(stored)
    assert resolve({}, read_file(str(tmp_path / "target.json"))).optim.decay_vectors is False
    (tmp_path / "mine.yaml").write_text("model: {name: vit}\noptim: {lr: 0.001}\nloop: {steps: 10}\n")
    assert resolve({}, read_file(str(tmp_path / "mine.yaml"))).optim.decay_vectors is True
    (tmp_path / "full.json").write_text(json.dumps(cfg.to_json()))
    assert resolve({}, read_file(str(tmp_path / "full.json"))) == resolve({}, read_file(str(tmp_path / "target.json"))
                                                                         ).replace(decay_vectors=True)


def test_a_null_written_by_hand_is_a_setting_not_given(tmp_path):
    """`width: null` in a hand-written file trained the Mixer at its class's width 256 (base 128), `steps: null` one
    epoch, `weight_decay: null` without the recipe's decay: a null replaced the recipe's value, where a flag left out
    keeps it. A hand-written null is now not given (an option's too); a config zoo wrote keeps its nulls, which are
    the run's values."""
    (tmp_path / "mine.yaml").write_text("model: mixer\nwidth: null\nsteps: null\nweight_decay: null\nclip_norm: null\n")
    mine = resolve({}, read_file(str(tmp_path / "mine.yaml")))
    recipe = resolve({"model": "mixer"})
    assert mine == recipe and (mine.model.width, mine.optim.weight_decay) == (128, 5e-5), mine
    stored = recipe.to_json()
    stored["model"]["width"] = None  # as --print-config writes a width the model's class gives
    (tmp_path / "ours.json").write_text(json.dumps(stored))
    assert read_file(str(tmp_path / "ours.json"))["width"] is None
    (tmp_path / "opts.yaml").write_text("model: gpt\nmodel_opt: {init_std: null, head_dim: 16}\n")  # an option's
    assert read_file(str(tmp_path / "opts.yaml"))["model_opt"] == {"head_dim": 16}  # null: refused as no plain value
