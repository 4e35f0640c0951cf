"""Feature diversity across depth (TP VI Def. 7.6, Claims 7.4 and 7.5; seed_depth_mup.md sections 3 and 4)."""

from __future__ import annotations

import dataclasses
import functools
import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_utils import SMALL, clean_error, run_main_many

import zoo.models as M
import zoo.param as P
from zoo import optim
from zoo.diagnostics.diversity import diversity_probe, feature_diversity
from zoo.optim import OptimConfig
from zoo.train.step import build_program


def test_brownian_and_smooth_paths():
    """d(eps) of a random walk grows as eps^1/2 and of a straight path as eps^1 (the two limits of Claim 7.5
    and 7.4); the slope over eps in {1, 2, 4, 8, 16}/L is within 0.05 of each."""
    rng = np.random.default_rng(0)
    depth, n = 1024, 256
    walk = np.concatenate([np.zeros((1, 64, n)), np.cumsum(rng.standard_normal((depth, 64, n)), 0)]) / depth**0.5
    line = np.linspace(0, 1, depth + 1)[:, None, None] * rng.standard_normal((1, 64, n))
    eps = [k / depth for k in (1, 2, 4, 8, 16)]
    assert feature_diversity(walk, 0.5, eps)[1] == pytest.approx(0.5, abs=0.05)
    d, slope = feature_diversity(line, 0.5, eps)
    assert slope == pytest.approx(1.0, abs=1e-6)
    assert d[0] == pytest.approx(np.mean(np.linalg.norm(line[1, :, :], axis=-1)) / np.sqrt(n))


def test_eps_past_the_last_block_is_an_error():
    with pytest.raises(ValueError, match="need 0 <= i0 < i1 <= L"):
        feature_diversity(np.zeros((9, 2, 4)), 0.5, [0.75])


def test_a_stream_that_does_not_move_has_no_slope_and_a_nan_fraction_is_refused():
    """A frozen stream (every d(eps) 0) gave NaN through log(0) with numpy's divide-by-zero warning; a stream frozen
    after some block (a d of 0 among others) the same. Now NaN, quietly; and a NaN depth fraction is one clear
    ValueError, not int(nan)'s."""
    still = np.ones((65, 2, 8))
    half = np.concatenate([np.cumsum(np.ones((33, 2, 8)), 0), np.full((32, 2, 8), 33.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for xs in (still, half):
            d, slope = feature_diversity(xs, 0.5, [1 / 64, 2 / 64, 4 / 64])
            assert d[0] == 0 and np.isnan(slope)
    for lam, eps in ((float("nan"), 1 / 64), (0.5, float("inf"))):
        with pytest.raises(ValueError, match="depth fractions are finite numbers"):
            feature_diversity(still, lam, [eps])


def _teacher(n: int, d: int = 16, classes: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Inputs N(0, I_d), labels argmax of a fixed random tanh network."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (np.tanh(x @ rng.standard_normal((d, 64)) / 4) @ rng.standard_normal((64, classes))).argmax(-1)
    return x, y.astype(np.int32)


ADAM = OptimConfig(name="adam", lr=3e-2)


@functools.cache
def _shared() -> tuple:
    """The linear MLP-ResNet (TP VI section 5: phi = id, MS), width 64, L = 256 (L0 = 1), its 200 Adam steps on a
    10-class teacher task and its diversity probe, each compiled once for every plugin: the plugin's per-parameter
    rules are an argument and its multipliers live in the state."""
    cfg = M.config("mlp_resnet", width=64, depth=256, base_depth=1, in_shape=(16,), activation="identity")
    prog = build_program(lambda r: M.create("mlp_resnet", cfg, P.get("depth_mup"), r), P.get("depth_mup"), ADAM)
    x, y = map(jnp.asarray, _teacher(4096))

    @jax.jit
    def train(state, rules):
        stepper = dataclasses.replace(prog, tx=optim.chain(ADAM, *rules))

        def step(state, i):
            idx = jax.random.randint(jax.random.fold_in(jax.random.key(1), i), (16,), 0, len(y))
            return stepper.train_step(state, {"x": x[idx], "y": y[idx]})[0], None

        return jax.lax.scan(step, state, jnp.arange(200))[0]

    return cfg, train, diversity_probe(prog), x[:256]


def _slopes(alpha: float, gamma: float) -> tuple[float, float]:
    """Diversity slope at init and after training under depth_mup(alpha, gamma)."""
    cfg, train, probe, x = _shared()
    plugin = P.get("depth_mup", alpha=alpha, gamma=gamma)
    prog = build_program(lambda r: M.create("mlp_resnet", cfg, plugin, r), plugin, ADAM)
    state = prog.init(jax.random.key(0))
    rules = optim.rules(plugin, jax.eval_shape(prog.init, jax.random.key(0))["params"])
    return probe(state, x)[1], probe(train(state, rules), x)[1]


@pytest.mark.slow
def test_depth_mup_keeps_diversity_and_ode_loses_it():
    """After training at L = 256 with eps in {1..16}/L: Depth-muP (alpha = gamma = 1/2) keeps d ~ eps^1/2
    (slope <= 0.65, kappa = 1/2, Claim 7.5); the ODE scaling (alpha = 1, gamma = 0) is redundant, d ~ eps
    (slope >= 0.8, Claim 7.4). At init both are Brownian (slope 0.5 +- 0.1)."""
    init_mup, trained_mup = _slopes(0.5, 0.5)
    init_ode, trained_ode = _slopes(1.0, 0.0)
    assert abs(init_mup - 0.5) <= 0.1 and abs(init_ode - 0.5) <= 0.1
    assert trained_mup <= 0.65, trained_mup
    assert trained_ode >= 0.8, trained_ode


def test_train_option_logs_the_slope_and_refuses_shallow_models(tmp_path):
    """`train.py --diversity 0.5` logs the diversity slope at every eval (Brownian at init: near 1/2 on a
    barely trained model) and to the summary's final eval; a stack too shallow for two eps values is one line."""
    run = tmp_path / "div"
    args = [*SMALL, "--depth", "16", "--steps", "20", "--eval-every", "10", "--diversity", "0.5", "--param",
            "depth_mup"]
    shallow = [*SMALL, "--depth", "2", "--steps", "2", "--diversity", "0.5", "--run-dir", str(tmp_path / "shallow")]
    (code, stderr), refused = run_main_many([[*args, "--run-dir", str(run)], shallow])  # one interpreter for both
    assert code == 0, stderr
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    slopes = [r["diversity_slope"] for r in rows if r["split"] == "eval" and "diversity_slope" in r]  # its own rows
    assert len(slopes) == 2 and all(0.2 < s < 0.9 for s in slopes), slopes
    assert json.loads((run / "summary.json").read_text())["final_eval"]["diversity_slope"] == slopes[-1]
    line = clean_error(*refused)
    assert "feature diversity" in line and "depth 2" in line


@pytest.mark.parametrize("lam", [0.29, 0.57, 0.58])
def test_diversity_blocks_round_alike_at_every_depth_fraction(lam):
    """A straight path x^l = (l / L) v has d(eps) = eps |v| / sqrt(n): slope 1 at every depth fraction (Claim 7.4's
    limit). At L = 100 and lambda = 0.29, 0.57 or 0.58, lambda L rounds below its integer in floating point
    (28.999999999999996), so the start block was one too early while each eps = k/L end was not: every step spanned
    k + 1 blocks, and the slope read 0.776."""
    from zoo.diagnostics.diversity import default_eps, feature_diversity

    depth = 100
    line = np.linspace(0, 1, depth + 1)[:, None, None] * np.random.default_rng(1).standard_normal((1, 4, 32))
    d, slope = feature_diversity(line, lam, default_eps(depth, lam))
    assert slope == pytest.approx(1.0, abs=1e-9)
    assert d[0] == pytest.approx(np.mean(np.linalg.norm(line[1, :, :], axis=-1)) / np.sqrt(32))  # one block apart


def test_diversity_slope_is_fitted_against_the_blocks_each_eps_spans():
    """eps off the block grid (1.5, 3 and 6 blocks at L = 100) measures the steps floor rounds them to (1, 3 and 6
    blocks): fitted against those, a straight path's slope is 1 and a random walk's 1/2 (within 0.05 over 256
    inputs); against the nominal eps the straight path read 1.29."""
    from zoo.diagnostics.diversity import feature_diversity

    depth, rng = 100, np.random.default_rng(2)
    line = np.linspace(0, 1, depth + 1)[:, None, None] * rng.standard_normal((1, 4, 32))
    walk = np.concatenate([np.zeros((1, 256, 32)), np.cumsum(rng.standard_normal((depth, 256, 32)), 0)])
    eps = [0.015, 0.03, 0.06]
    assert feature_diversity(line, 0.5, eps)[1] == pytest.approx(1.0, abs=1e-9)
    assert feature_diversity(walk, 0.5, eps)[1] == pytest.approx(0.5, abs=0.05)
