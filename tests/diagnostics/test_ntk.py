"""zoo.diagnostics.ntk: the NTK under a plugin's per-parameter SGD learning rates predicts one SGD step, and its
change after the step follows Yaida's width exponents."""

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import zoo.models
import zoo.param
from zoo.diagnostics.ntk import ntk_change
from zoo.param.mup import MuP
from zoo.param.tags import Tag


def cfg(width, depth=2, **opts):
    return zoo.models.config("mlp_resnet", width=width, depth=depth, base_width=16, in_shape=(8,), num_classes=1,
                             mean_subtract=False, **opts)


X = jnp.ones((1, 8))


def test_ntk_predicts_one_sgd_step():
    """First order: one SGD step on the loss c f moves f by -c Theta, with Theta = sum eta_mu (df/dw_mu)^2 and eta_mu
    zoo's per-parameter SGD LR (multipliers, pre-scale and LR multiplier at m = 4, r = 2 under UP_1/4 with tanh):
    |df / (-Theta) - 1| shrinks like lr (below 3e-3 at lr = 1e-3, and at least 5 times smaller than at lr = 1e-2)."""
    out = ntk_change("mlp_resnet", cfg(64, depth=4, base_depth=2, activation="tanh"),
                     lambda o: zoo.param.get("ntk_mup", **o), {"s": [0.5, 0.5]}, [1e-2, 1e-3], X, seeds=2)
    rel = np.abs(out["f_change"] / -out["ntk"] - 1)
    assert np.all(rel[1] < 3e-3) and np.all(rel[1] * 5 < rel[0]), rel


def test_ntk_change_width_exponents_of_yaida_family():
    """seed_yaida_and_lecture.md D5 (a linear ResNet, 16 seeds, widths 16 and 256): the even part of the NTK change
    scales like n^-(1-s) and the feature change like n^-(1-s)/2, for s = 0 and 1 (tolerance 0.12)."""
    opts = {"s": [0.0, 1.0]}
    run = [ntk_change("mlp_resnet", cfg(w, activation="identity"), lambda o: zoo.param.get("ntk_mup", **o), opts, 0.05,
                      X, 16)
           for w in (16, 256)]
    for key, exponent in (("even", lambda s: -(1 - s)), ("feature", lambda s: -(1 - s) / 2)):
        slope = np.log(np.abs(run[1][key]).mean(1) / np.abs(run[0][key]).mean(1)) / np.log(16)
        np.testing.assert_allclose(slope, [exponent(0.0), exponent(1.0)], atol=0.12, err_msg=key)


@dataclasses.dataclass(frozen=True)
class SlowSGD(MuP):
    """muP whose sgd family takes one more power of width in its LR exponent than its adam family (a plugin may
    set the families apart; zoo's own give them the same c)."""

    def lr_exponent(self, tag: Tag, family: str = "adam") -> Any:
        return super().lr_exponent(tag, family) + (1.0 if family == "sgd" else 0.0)


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
