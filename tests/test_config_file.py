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
