"""The optimizer builder (zoo.optim; design.md section 4): schedules, every base optimizer, and decoupled weight
decay that does not change with width (TP IVb 2.10.1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from param_helpers import batch, leaves, program

import zoo.models as M
import zoo.optim
import zoo.param as P
from zoo.optim import OPTIMIZERS, OptimConfig, build
from zoo.schedule import schedule_shape
from zoo.train.step import run_once_options


def run_once(fn, *args):
    """fn(*args) as one program compiled to run once (XLA backend optimisation off); op by op, each eager op of the
    optimizer chain or the model compiled on its own."""
    return jax.jit(fn).lower(*args).compile(compiler_options=run_once_options())(*args)


@pytest.mark.parametrize("schedule, mid", [("cosine", 0.55), ("linear", 0.55), ("constant", 1.0)])
def test_schedule_warmup_then_decay_to_min_ratio(schedule, mid):
    """Linear warmup over 10 steps ((t+1)/10), then from 1 down to min_lr_ratio 0.1 at the horizon t = 110;
    halfway (t = 60) cosine and linear both give 0.1 + 0.9/2."""
    shape = schedule_shape(OptimConfig(schedule=schedule, warmup=10, min_lr_ratio=0.1), horizon=110)
    got = [float(shape(t)) for t in (0, 4, 9, 10, 60, 110, 500)]
    end = 1.0 if schedule == "constant" else 0.1
    np.testing.assert_allclose(got, [0.1, 0.5, 1.0, 1.0, mid, end, end], rtol=1e-6)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_optimizer_trains(name):
    """Each base optimizer under muP at twice the base width: 20 steps on one batch lower the loss."""
    lr = {"sgd": 0.1, "momentum": 0.05}.get(name, 3e-3)
    prog = program(P.get("mup"), name, lr=lr, width=128, base_width=64)
    state, data = prog.init(jax.random.key(0)), batch()
    # 20 steps of a tiny model: compiling is the cost, and compiles ~2x faster without XLA's backend optimisation
    step = jax.jit(prog.train_step).lower(state, data).compile(compiler_options=run_once_options())
    losses = []
    for _ in range(20):
        state, metrics = step(state, data)
        losses.append(float(metrics["loss"]))
    assert np.all(np.isfinite(losses)) and losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("width", [64, 256])
def test_weight_decay_is_a_width_independent_shrink(width):
    """With zero gradients an AdamW step is pure decay: every matrix shrinks by exactly lr * wd per step, whatever
    the width and the plugin's LR multipliers; vectors (norm gains, biases) are not decayed."""
    plugin, lr, wd = P.get("mup"), 1e-2, 0.5
    params = run_once(program(plugin, width=width, base_width=64).init, jax.random.key(0))["params"]
    tx = build(OptimConfig(name="adamw", lr=lr, weight_decay=wd), plugin, params)
    updates, _ = run_once(lambda p: tx.update(jax.tree.map(jnp.zeros_like, p), tx.init(p), p), params)
    for path, v in leaves(params).items():
        u, w, kind = leaves(updates)[path][...], v[...], v.get_metadata()["tag"].kind
        expected = np.zeros_like(w) if kind in ("vector", "scalar") else -lr * wd * w
        np.testing.assert_allclose(u, expected, rtol=1e-6, atol=1e-12, err_msg=f"{path} ({kind})")


@pytest.mark.parametrize("width", [48, 160])
def test_decay_vectors_shrinks_every_trained_parameter(width):
    """--decay-vectors (torch's AdamW(model.parameters()), the ViT's and Mixer's reference code): with zero gradients
    every bias and norm gain shrinks by lr * wd per step as the matrices do, at any width; a frozen kind keeps its
    values. The recipes of the two models set it."""
    plugin, lr, wd = P.get("mup", freeze="output"), 1e-2, 0.5
    params = run_once(program(plugin, width=width, base_width=64).init, jax.random.key(0))["params"]
    tx = build(OptimConfig(name="adamw", lr=lr, weight_decay=wd, decay_vectors=True), plugin, params)
    updates, _ = run_once(lambda p: tx.update(jax.tree.map(jnp.zeros_like, p), tx.init(p), p), params)
    kinds = set()
    for path, v in leaves(params).items():
        u, w, kind = leaves(updates)[path][...], v[...], v.get_metadata()["tag"].kind
        kinds.add(kind)
        np.testing.assert_allclose(u, np.zeros_like(w) if kind == "output" else -lr * wd * w, rtol=1e-6, atol=1e-12,
                                   err_msg=f"{path} ({kind})")
    assert {"vector", "output", "hidden"} <= kinds, kinds
    assert all(M.recipe(name)["decay_vectors"] for name in ("vit", "mixer"))
    assert not M.recipe("gpt").get("decay_vectors")  # nanoGPT decays the matrices only, as zoo's default


@pytest.mark.parametrize("m", [1.0, 4.0])
def test_global_norm_clipping_scales_with_the_faithful_norm(m):
    """clip_norm bounds the faithful gradients' global norm by clip_norm * sqrt(N / N0) (N entries, N0 at the base
    width: a hidden matrix's count over m^2, a vector's over m), clip_norm itself at the base width; their entries
    are Theta(1) in width, so the clip factor is width-independent (TP IVb 2.10.2)."""
    from zoo.optim import clip_by_faithful_norm, routes
    from zoo.param.tags import Tag

    tags = {"w": Tag("hidden", 64, 64, width_mult=m), "b": Tag("vector", 1, 64, width_mult=m)}
    updates = {"w": jnp.full((64, 64), 10.0), "b": jnp.full((64,), 10.0)}
    tx = clip_by_faithful_norm(2.0, routes(OptimConfig("adam"), tags))
    clipped, _ = tx.update(updates, tx.init(updates))
    want = 2.0 * np.sqrt((64 * 64 + 64) / (64 * 64 / m**2 + 64 / m))
    np.testing.assert_allclose(float(optax.global_norm(clipped)), want, rtol=1e-5)


def test_global_norm_clip_factor_is_depth_independent():
    """Under depth_mup the branch gradients shrink like r^-1/2 and the pre-scale r^alpha makes them Theta(1) again, so
    the faithful global norm grows like sqrt(N), N the entries, which grow like L (TP VI; TP IVb 2.10.2 in depth).
    Its ratio to the clip threshold sqrt(N / N0) (N0: the count at the base width *and depth*) is then flat in depth:
    on the pre-LN MLP-ResNet, width 64, base depth 4, mean of 2 seeds, depth 64 over depth 16 is 1 +- 0.2 (with N0 at
    the run's own depth, 1.96: the clip tightened like sqrt(L) and shrank the LR of a clipped deep run)."""
    from flax import nnx

    import zoo.models as M
    from zoo.optim import routes, rules
    from zoo.train.step import loss_and_metrics

    def norm_over_threshold(depth: int) -> float:
        """The mean over seeds 0 and 1: one program per depth (op by op, each eager op compiled on its own)."""
        plugin, cfg = P.get("depth_mup"), M.config("mlp_resnet", width=64, depth=depth, base_depth=4, in_shape=(8,),
                                                    num_classes=4, bias=True, pre_ln=True)
        params = nnx.state(nnx.eval_shape(lambda: M.create("mlp_resnet", cfg, plugin, nnx.Rngs(0))), nnx.Param)
        grad_scale = rules(plugin, params, OptimConfig("adam")).grad_scale
        sizes = jax.tree.leaves(jax.tree.map(lambda u, r: (u.size, u.size * r.base_fraction), params,
                                             routes(OptimConfig("adam"), params)))

        def faithful_norm(key, data):
            model = M.create("mlp_resnet", cfg, plugin, nnx.Rngs(key))
            grads = nnx.grad(lambda m: loss_and_metrics(m, data, None, True)[0])(model)
            return optax.global_norm(jax.tree.map(lambda g, s: g * s, grads, grad_scale))

        keys = jnp.stack([jax.random.key(s) for s in range(2)])
        data = jax.tree.map(lambda *a: jnp.stack(a), *(batch(seed=s) for s in range(2)))
        norms = run_once(jax.vmap(faithful_norm), keys, data)
        return float(np.mean(norms)) / np.sqrt(sum(sizes[0::2]) / sum(sizes[1::2]))

    shallow, deep = (norm_over_threshold(d) for d in (16, 64))
    assert 0.8 < deep / shallow < 1.25, (shallow, deep)


def test_each_optimizer_gets_its_own_epsilon():
    """Adam's epsilon (1e-8) sits beside sqrt(v), Adafactor's beside g^2 (Shazeer & Stern's eps1 = 1e-30): with
    Adam's number there, a gradient of entries 1e-5 (g^2 = 1e-10) was damped to an update RMS of 0.1 instead of
    Adafactor's 1 (its block-RMS clip). An eps given stays as given."""
    assert OptimConfig("adam").eps == OptimConfig("muon").eps == 1e-8
    assert OptimConfig("adafactor").eps == 1e-30 and OptimConfig("adafactor", eps=1e-8).eps == 1e-8
    g = {"w": jnp.full((4, 3), 1e-5)}

    def update_rms(cfg):
        tx = zoo.optim.entrywise_transform(cfg)
        u, _ = run_once(lambda g: tx.update(g, tx.init(g), g), g)
        return float(jnp.sqrt(jnp.mean(u["w"] ** 2)))

    np.testing.assert_allclose(update_rms(OptimConfig("adafactor")), 1.0, rtol=1e-3)
    np.testing.assert_allclose(update_rms(OptimConfig("adafactor", eps=1e-8)), 1e-5 / np.sqrt(1e-10 + 1e-8), rtol=1e-3)


@pytest.mark.parametrize("plugin", [P.get("mup", freeze="input"), P.multiplier_free(P.get("mup", freeze="input"))])
def test_a_frozen_kind_adds_nothing_to_the_clipped_norm(plugin):
    """--clip-norm clips the global norm of the parameters that train: a frozen input layer's gradient, however
    large, leaves the hidden layer's clipped update as it is with that gradient 0 (it counted, and clipped the hidden
    update 10x harder with an input gradient of 100 per entry); its own update stays 0. Also in the multiplier-free
    form, which keeps its plugin's frozen kinds."""
    from zoo.param.tags import Tag

    tags = {"w": Tag("hidden", 32, 32, width_mult=2.0), "e": Tag("input", 8, 32, width_mult=2.0)}
    tx = build(OptimConfig("sgd", lr=1.0, clip_norm=0.5), plugin, tags)
    params = {"w": jnp.zeros((32, 32)), "e": jnp.zeros((8, 32))}
    grad_w = jax.random.normal(jax.random.key(0), (32, 32))
    step = jax.jit(lambda e: tx.update({"w": grad_w, "e": jnp.full((8, 32), e)}, tx.init(params), params)[0])
    updates = [step(e) for e in (0.0, 100.0)]  # one program, not op by op
    np.testing.assert_allclose(updates[1]["w"], updates[0]["w"], rtol=1e-6)
    assert float(jnp.abs(updates[0]["w"]).max()) > 0 and float(jnp.abs(updates[1]["e"]).max()) == 0


def test_mixer_token_mixing_weights_decay_like_every_matrix():
    """AdamW with zero gradients is pure decay, -lr wd w per step on each weight matrix: the Mixer's token-mixing
    kernels (S -> D_S, scalar kind since no dimension grows) are matrices the SP recipe decays (they got 0 while
    the channel kernels shrank by lr wd), at any width and depth (here m = 3, L/L0 = 2); their biases, like every
    bias and norm gain, keep 0."""
    plugin, lr, wd = P.get("depth_mup"), 1e-2, 0.5
    cfg = M.config("mixer", width=96, depth=2, base_width=32, base_depth=1, in_shape=(8, 8, 3), patch=4,
                   token_dim=6, num_classes=3, scan=False)
    params = nnx.state(M.create("mixer", cfg, plugin, nnx.Rngs(0)), nnx.Param)
    tx = build(OptimConfig(name="adamw", lr=lr, weight_decay=wd), plugin, params)
    # one program for the chain (op by op it compiled each of its eager ops, most of this test's time)
    updates, _ = jax.jit(lambda p: tx.update(jax.tree.map(jnp.zeros_like, p), tx.init(p), p))(params)
    token_kernels = 0
    for path, v in leaves(params).items():
        u, w, tag = leaves(updates)[path][...], v[...], v.get_metadata()["tag"]
        weight = path.endswith("['kernel']")
        token_kernels += "token_mlp" in path and weight
        np.testing.assert_allclose(u, -lr * wd * w if weight else np.zeros_like(w), rtol=1e-6, atol=1e-12,
                                   err_msg=f"{path} ({tag.kind})")
    assert token_kernels == 2
