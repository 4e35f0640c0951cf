"""An outside referee's inputs to the transfer CLI, the NTK-change diagnostic and the optimizer settings that zoo's
other tests do not use: each was accepted silently, misreported or ended in a traceback before its fix."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import zoo.models
import zoo.param
from zoo.diagnostics.ntk import ntk_change
from zoo.param.mup import MuP
from zoo.param.tags import Tag


def test_ntk_change_with_its_defaults():
    """ntk_change(model, cfg, plugin) with no options ended in StopIteration (K was read off the first option);
    now the plugin's defaults are one option set (K = 1) on one seed and one random input. Theta > 0 and one SGD
    step at lr 1e-3 moves f by -Theta to first order (|df / -Theta - 1| < 1e-2, on mlp_resnet widths 24 under
    mean_field, settings the other NTK tests do not use); lists of different lengths are refused in one line."""
    cfg = zoo.models.config("mlp_resnet", width=24, depth=3, base_width=8, in_shape=(5,), num_classes=1,
                            activation="gelu")
    out = ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("mean_field", **o))
    assert {k: v.shape for k, v in out.items()} == dict.fromkeys(("ntk", "even", "odd", "feature", "f_change"), (1, 1))
    assert out["ntk"][0, 0] > 0 and abs(out["f_change"][0, 0] / -out["ntk"][0, 0] - 1) < 1e-2, out
    with pytest.raises(ValueError, match="one value or a list of K >= 1 values, got lengths option s: 2, lr: 3"):
        ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("ntk_mup", **o), {"s": [0.0, 1.0]}, [1e-3] * 3)
    with pytest.raises(ValueError, match="seeds must be a positive integer, got 0"):
        ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("ntk_mup", **o), seeds=0)
    for lr in (0.0, [1e-3, float("nan")]):  # Theta = 0: E and O were 0 / 0 = NaN
        with pytest.raises(ValueError, match="the lr must be positive and finite"):
            ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("ntk_mup", **o), lr=lr)


@dataclasses.dataclass(frozen=True)
class SlowSGD(MuP):
    """muP whose sgd family takes one more power of width in its LR exponent than its adam family (a plugin may
    set the families apart; zoo's own give them the same c)."""

    def lr_exponent(self, tag: Tag, family: str = "adam") -> Any:
        return super().lr_exponent(tag, family) + (1.0 if family == "sgd" else 0.0)


def test_the_ntk_takes_the_sgd_familys_learning_rates():
    """Theta summed eta_mu = lr * pre-scale * LR multiplier of the *adam* family (rules() without an optimizer)
    while the step it predicts is SGD's: under a plugin whose sgd exponent is one higher, at m = 24/8 = 3, df
    was -Theta / 3; now the rates are SGD's and df / -Theta is 1 to first order (within 2e-3 at lr 1e-4)."""
    cfg = zoo.models.config("mlp_resnet", width=24, depth=2, base_width=8, in_shape=(5,), num_classes=1,
                            activation="tanh")
    out = ntk_change("mlp_resnet", cfg, lambda o: SlowSGD(**o), lr=1e-4, seeds=2)
    np.testing.assert_allclose(out["f_change"] / -out["ntk"], 1.0, atol=2e-3)


def test_the_default_ntk_input_does_not_move_with_the_seed_count():
    """The default input was drawn from fold_in(key, seeds): 1 seed and 2 seeds measured different inputs, so the
    first seed's numbers changed with the seed count; now its Theta is the same (float32 rounding: rtol 1e-5)."""
    cfg = zoo.models.config("mlp_resnet", width=12, depth=1, in_shape=(3,), num_classes=1)
    one, two = (ntk_change("mlp_resnet", cfg, lambda o: zoo.param.get("ntk", **o), seeds=n)["ntk"] for n in (1, 2))
    np.testing.assert_allclose(one[:, 0], two[:, 0], rtol=1e-5)
    assert abs(two[0, 1] / two[0, 0] - 1) > 1e-3  # another seed: another draw


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
