"""zoo.diagnostics.ntk: the NTK under a plugin's per-parameter SGD learning rates predicts one SGD step, and its
change after the step follows Yaida's width exponents."""

import jax.numpy as jnp
import numpy as np

import zoo.models
import zoo.param
from zoo.diagnostics.ntk import ntk_change


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
