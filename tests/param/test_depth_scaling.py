"""Depth scaling of the MLP-ResNet x^l = x^{l-1} + a L^-alpha MS(phi(W^l x^{l-1})) (seed_depth_mup.md 1.1, 5)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from param_helpers import batch

import zoo.models as M
import zoo.param as P
from zoo.diagnostics.coord import CoordRun
from zoo.optim import OptimConfig
from zoo.train.step import run_once_options

N, ALPHAS = 64, (0.5, 0.25)
V_PHI = {"identity": 1.0, "relu": 0.5 - 0.5 / np.pi, "abs": 1.0 - 2.0 / np.pi}  # Var phi(z), z ~ N(0, 1)


@functools.cache
def init_ratios(depth: int) -> dict[str, np.ndarray]:
    """phi -> [alpha, seed] of ||x^L||^2 / ||x^0||^2 at init under depth_mup (base depth 1 and a = 1, so the
    branch multiplier is L^-alpha), mean over a batch of 8 inputs; the three phis share each init."""
    cfgs = {phi: M.config("mlp_resnet", width=N, depth=depth, base_depth=1, in_shape=(8,), num_classes=4,
                          activation=phi) for phi in V_PHI}
    graphdefs = {phi: nnx.graphdef(nnx.eval_shape(lambda c=c: M.create("mlp_resnet", c, P.get("depth_mup"),
                                                                        nnx.Rngs(0)))) for phi, c in cfgs.items()}
    x = batch()["x"]

    def ratios(key, alpha):
        state = nnx.state(M.create("mlp_resnet", cfgs["relu"], P.get("depth_mup", alpha=alpha), nnx.Rngs(key)))
        inters = {phi: nnx.merge(g, state)(x)[1] for phi, g in graphdefs.items()}
        return {phi: jnp.mean(jnp.sum(i["blocks"][-1] ** 2, -1) / jnp.sum(i["embed"] ** 2, -1))
                for phi, i in inters.items()}

    keys = jax.random.split(jax.random.key(depth), max(16, 1024 // depth))  # 64 seeds at L = 16
    args = keys, jnp.asarray(ALPHAS)
    # a program run once: compiled without XLA's backend optimisation (about half the compile time)
    every = jax.jit(jax.vmap(jax.vmap(ratios, (0, None)), (None, 0)))
    out = every.lower(*args).compile(compiler_options=run_once_options())(*args)
    return {phi: np.asarray(r, np.float64) for phi, r in out.items()}


def recursion(v: float, depth: int, alpha: float) -> float:
    """E ||x^L||^2 / ||x^0||^2 = (1 + a^2 v_phi (n-1)/n L^-2alpha)^L with a = 1: exact at any width for Gaussian
    W, MS and positively homogeneous phi (seed_depth_mup.md 5)."""
    return (1.0 + v * (N - 1) / N * depth ** (-2 * alpha)) ** depth


@pytest.mark.parametrize("phi", ["identity", "relu", "abs"])
def test_init_norm_matches_recursion(phi):
    """TP VI App. D.1 with mean subtraction (seed_depth_mup.md 5): at alpha = 1/2, L = 16, n = 64 the mean of
    ||x^L||^2/||x^0||^2 over 64 inits is within 3 standard errors of (1 + v_phi (n-1)/(n L))^L, v_phi = Var phi;
    the statistic is sharp enough to reject v = E phi^2 in its place for relu and abs."""
    r = init_ratios(16)[phi][0]
    se = r.std(ddof=1) / np.sqrt(r.size)
    assert abs(r.mean() - recursion(V_PHI[phi], 16, 0.5)) < 3 * se, (r.mean(), recursion(V_PHI[phi], 16, 0.5), se)
    if phi != "identity":
        assert abs(r.mean() - recursion(1.0 if phi == "abs" else 0.5, 16, 0.5)) > 3 * se


def test_init_norm_blows_up_below_alpha_one_half():
    """TP VI Claim 7.1: stable at init iff alpha >= 1/2. With relu, alpha = 1/4 the norm ratio grows without
    bound (about exp(v sqrt L): more than doubles from L = 16 to 64 to 256), while at alpha = 1/2 it stays
    within 5% of its limit exp(v_relu (n-1)/n)."""
    means = np.array([init_ratios(depth)["relu"].mean(1) for depth in (16, 64, 256)])  # [depth, alpha]
    np.testing.assert_allclose(means[:, 0], np.exp(V_PHI["relu"] * (N - 1) / N), rtol=0.05)
    assert np.all(means[1:, 1] > 2 * means[:-1, 1]), means[:, 1]


def one_step_change(plugin, depth: int, seeds: int = 4) -> float:
    """RMS change of the logits after one SGD step caused by the residual blocks alone (input and output layers put
    back to init, as in TP VI's experiments), geometric mean over seeds; width 128 (the base width), base depth 16.
    Both gammas share one compiled program per depth."""
    run = CoordRun("mlp_resnet", plugin, 1, OptimConfig(name="sgd", lr=1e-2), batch(), branch=True, width=128,
                   depth=depth, base_depth=16, in_shape=(8,), num_classes=4)
    return float(np.exp(np.log(run(range(seeds)).branch["output"][:, 0]).mean()))


@pytest.mark.slow
@pytest.mark.parametrize("gamma", [0.5, 0.0])
def test_one_step_output_change_scales_as_depth_to_one_minus_alpha_minus_gamma(gamma):
    """TP VI App. D.2 / seed_depth_mup.md 3 check (b): after one SGD step f_1 - f_0 = Theta(L^(1-alpha-gamma)).
    The change at L = 64, 256 over the change at L = 16 is within +-30% of (L/16)^(1-alpha-gamma): flat under
    Depth-muP (1/2, 1/2); like sqrt(L) under (1/2, 0), ratio L = 256 / L = 16 in 2.8..5.2 (theory 4)."""
    plugin = P.get("depth_mup", gamma=gamma, branch_mult=0.25)  # a / sqrt(L) with a = 1: 1/4 at L0 = 16
    depths = np.array([16, 64, 256])
    df = np.array([one_step_change(plugin, int(depth)) for depth in depths])
    np.testing.assert_allclose(df[1:] / df[0], (depths[1:] / 16) ** (0.5 - gamma), rtol=0.3)
