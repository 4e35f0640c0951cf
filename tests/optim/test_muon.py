"""Muon in zoo's optimizer builder (issue 18, spectral_optimizers.md): what goes to Muon, how stacked blocks are
orthogonalised, the LR rule each plugin gives it, and that it composes with accumulation, remat and vmapped sweeps."""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from optax.contrib._muon import orthogonalize_via_newton_schulz
from param_helpers import batch, leaves, program, s

import zoo.models as M
import zoo.param as P
from zoo import optim
from zoo.optim import OptimConfig, Route, routes
from zoo.param.tags import Tag
from zoo.train.step import build_program, loss_and_metrics, run_once_options

NS = jnp.asarray((3.4445, -4.7750, 2.0315))  # optax's default Newton-Schulz coefficients


def orthogonalise(g: np.ndarray) -> np.ndarray:
    return np.asarray(orthogonalize_via_newton_schulz(jnp.asarray(g), NS, 5))


@functools.cache
def first_step():
    """A muon step of the MLP-ResNet at m = 4, r = 2 (stacked blocks), Adam's epsilon negligible: the plugin, the LR,
    the optimizer config and path -> (tag, gradient, update)."""
    plugin, lr = P.get("mup"), 1e-2
    cfg = OptimConfig(name="muon", lr=lr, eps=1e-20)
    prog = dataclasses.replace(program(plugin, base_width=16, base_depth=2), tx=optim.build(cfg, plugin, params()))
    state, data = jax.jit(prog.init)(jax.random.key(0)), batch()

    @jax.jit  # one program (op by op, each eager op compiled on its own: 38 CPU-s)
    def grads_and_step(state, data):
        grads = jax.grad(lambda p: loss_and_metrics(nnx.merge(prog.graphdef, p, state["rest"]), data, None, True)[0])(
            state["params"])
        return grads, prog.train_step(state, data)[0]

    grads, new = grads_and_step(state, data)
    old, g = leaves(state["params"]), leaves(grads)
    out = {}
    for path, var in leaves(new["params"]).items():
        out[path] = (var.get_metadata()["tag"], np.asarray(g[path][...]), np.asarray(var[...] - old[path][...]))
    return plugin, lr, cfg, out


def test_stacked_blocks_are_orthogonalised_one_layer_at_a_time():
    """Each block's hidden matrix in the stacked (L, n, n) leaf moves by -lr * (plugin LR multiplier) * (base-shape
    constant) * NS(g_l) with its own gradient g_l (Newton-Schulz is scale-invariant, so the pre-scale and Nesterov's
    factor drop out), to 1e-4 (of the largest entry); orthogonalising the stack as one tall (L n, n) matrix gives
    another update (by > 10%)."""
    plugin, lr, cfg, steps = first_step()
    stacked = [(p, t, g, u) for p, (t, g, u) in steps.items() if t.kind == "hidden" and g.ndim == 3]
    assert stacked
    for path, tag, g, u in stacked:
        mult = plugin.lr_mult(tag, "spectral") * cfg.muon_rms * math.sqrt(max(tag.base_fan_in, tag.base_fan_out))
        for layer in range(g.shape[0]):
            want = -lr * mult * orthogonalise(g[layer])
            # atol: optax orients the matrix by its dimension numbers, so its f32 rounding differs at 1e-5 of the
            # largest entry (10^4 below the > 10% that tells a stack orthogonalised as one matrix)
            np.testing.assert_allclose(u[layer], want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=path)
        tall = orthogonalise(g.reshape(-1, g.shape[-1])).reshape(g.shape)
        per_layer = orthogonalise(g[0])
        assert np.linalg.norm(tall[0] - per_layer) > 0.1 * np.linalg.norm(per_layer)


def test_vectors_scalars_and_by_default_the_io_layers_get_adam():
    """Entrywise Adam (first step sign(g), TP IVb 2.1) on every parameter that is not a hidden matrix: each entry with
    g != 0 moves by lr * m^-c (the Adam table's c); with muon_io the input and output layers go to Muon too."""
    plugin, lr, _, steps = first_step()
    for path, (tag, g, u) in steps.items():
        if tag.kind == "hidden":
            continue
        step = lr * plugin.lr_mult(tag, "adam")
        on = np.abs(g) > 1e-6
        np.testing.assert_allclose(np.abs(u[on]), step, rtol=1e-3, err_msg=path)
    for muon_io, io in ((False, "adam"), (True, "spectral")):
        route = routes(OptimConfig(name="muon", muon_io=muon_io), params())
        tags = [v.get_metadata()["tag"] for v in leaves(params()).values()]
        family = {t.kind: r.family for t, r in zip(tags, leaves(route).values(), strict=True)}
        assert family == {"input": io, "hidden": "spectral", "output": io, "vector": "adam", "scalar": "adam"}


def params():
    """The abstract tagged parameters of the test MLP-ResNet at m = 4, r = 2."""
    model = nnx.eval_shape(lambda: program(P.get("mup"), base_width=16, base_depth=2).make_model(nnx.Rngs(0)))
    return nnx.state(model, nnx.Param)


@pytest.mark.parametrize("name, hidden, io", [("mup", 0.0, 0.5), ("sp", 0.0, 0.0), ("ntk", 0.0, 0.0),
                                              ("mean_field", 0.5, 0.5)])
def test_muon_lr_exponents(name, hidden, io):
    """spectral_optimizers.md 2: a plugin's Muon LR is m^-(c - k/2) (k width axes): muP's hidden m^0 and input and
    output m^(1/2); NTK's m^0 everywhere (its multipliers m^-1/2 give the effective step); the mean-field gauge's
    hidden m^(1/2) (its multiplier m^-1/2 makes the effective step m^0 again); sp keeps one global LR (m^0)."""
    plugin = P.get(name)
    for kind, want in (("hidden", hidden), ("input", io), ("output", io)):
        tag = Tag(kind, 64, 64, width_mult=4.0)
        assert math.isclose(plugin.lr_mult(tag, "spectral"), 4.0**want), (name, kind)


def test_depth_exponent_carries_over():
    """Depth-muP's branch LR (L/L0)^-1/2 is the same under Muon as under Adam (the note's check)."""
    tag = Tag("hidden", 64, 64, width_mult=1.0, branch=True, depth=8, base_depth=2)
    plugin = P.get("depth_mup")
    assert math.isclose(plugin.lr_mult(tag, "spectral"), plugin.lr_mult(tag, "adam")) and \
        math.isclose(plugin.lr_mult(tag, "spectral"), 0.5)


@pytest.mark.parametrize("shape, fan_in, layout, want", [
    ((64, 256), 64, "in_out", ((-2,), -1)),
    ((4, 64, 256), 64, "in_out", ((-2,), -1)),  # a stack of 4 layers
    ((8, 16, 64), 128, "in_out", ((-3, -2), -1)),  # a fan-in over two axes
    ((256, 64), 64, "out_in", ((-1,), -2)),
    ((4, 256, 64), 64, "out_in", ((-1,), -2)),
])
def test_matrix_axes(shape, fan_in, layout, want):
    dims = Route("spectral", fan_in, layout).matrix_axes(shape)
    assert (tuple(dims.reduction_axis), dims.output_axis) == want


def test_muon_needs_routes():
    with pytest.raises(ValueError, match="route"):
        optim.chain(OptimConfig(name="muon"), {}, {}, {})


def test_accumulation_and_remat_change_nothing_under_muon():
    """The GPT under Muon: 3 steps with grad_accum 2 and per-block remat equal 3 plain steps (losses to 1e-5, params
    to 1e-4; the mean gradient is the same, the recomputed forward too). The key bias is left out: its gradient is
    zero in exact arithmetic (softmax ignores a shift of a row's logits), so Adam moves it by the sign of rounding."""
    cfg = M.config("gpt", width=32, depth=2, base_width=16, seq_len=8, vocab_size=17, dropout=0.0, head_dim=8)
    plugin = P.get("depth_mup")
    x = jax.random.randint(jax.random.key(1), (4, 8), 0, 17)
    data = {"x": x, "y": jnp.roll(x, -1, 1)}
    out = []
    for accum, remat in ((1, False), (2, True)):
        c = M.config("gpt", **{**cfg.__dict__, "remat": remat})
        prog = build_program(lambda r, c=c: M.create("gpt", c, plugin, r), plugin, OptimConfig("muon", lr=1e-2),
                             grad_accum=accum)
        state, losses = prog.init(jax.random.key(0)), []
        step = jax.jit(prog.train_step).lower(state, data).compile(run_once_options())  # 3 steps: compiling
        for _ in range(3):  # is the cost, ~2x faster without XLA's backend optimisation
            state, metrics = step(state, data)
            losses.append(float(metrics["loss"]))
        out.append((losses, state["params"]))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-5)
    for path, a in leaves(out[0][1]).items():
        if "['k']['bias']" not in path:
            np.testing.assert_allclose(a[...], leaves(out[1][1])[path][...], rtol=1e-4, atol=1e-6, err_msg=path)


def test_vmapped_learning_rates_equal_separate_runs():
    """A sweep's members (LR a traced value in the optimizer state, Program.init(key, lr)) train under Muon as
    separate runs do: 2 steps of two LRs vmapped equal each run alone (rtol 1e-5)."""
    prog = program(P.get("mup"), "muon", base_width=32)
    data, lrs = batch(), jnp.asarray([1e-3, 1e-2])
    def run(lr):  # init and 2 steps, one program compiled to run once (XLA's backend optimisation off)
        return prog.train_step(prog.train_step(prog.init(jax.random.key(0), lr), data)[0], data)[1]["loss"]

    vmapped = jax.jit(jax.vmap(run)).lower(lrs).compile(compiler_options=run_once_options())(lrs)
    alone_run = jax.jit(run).lower(lrs[0]).compile(compiler_options=run_once_options())
    alone = [alone_run(lr) for lr in lrs]
    np.testing.assert_allclose(vmapped, alone, rtol=1e-5)
    assert abs(float(alone[0]) - float(alone[1])) > 1e-4


@pytest.mark.parametrize("name, muon_io, want", [
    ("mup", False, {"input": 0.0, "hidden": 0.0, "output": 0.0}),
    ("mup", True, {"input": 0.0, "hidden": 0.0, "output": 0.0}),
    ("ntk", True, {"input": -0.5, "hidden": -0.5, "output": 0.0}),
    # one global LR: the hidden matrices' spectral steps are already width-free under Muon, but the readout (Adam's
    # entries Theta(lr) against n inputs) grows like n, or n^1/2 under Muon; the input layer under Muon shrinks
    ("sp", False, {"input": 0.0, "hidden": 0.0, "output": 1.0}),
    ("sp", True, {"input": -0.5, "hidden": 0.0, "output": 0.5}),
])
def test_predicted_slopes_under_muon(name, muon_io, want):
    """zoo.param.predict under Muon: a kind's update scales like an entrywise one with LR exponent c_muon + k/2, so
    the spectral map reproduces the Adam table's slopes, and sp's one LR gives the growth above."""
    got = P.get(name).expected_slopes("muon", kinds=("input", "vector", "hidden"), muon_io=muon_io)
    assert {k: got[k] for k in want} == want


def test_bf16_compute_trains_under_muon():
    """bf16 activations (params and Muon's momentum stay f32): 10 steps on one batch lower the loss."""
    plugin = P.get("mup")
    cfg = M.config("gpt", width=32, depth=2, base_width=16, seq_len=8, vocab_size=17, dropout=0.0, head_dim=8,
                   dtype="bfloat16")
    prog = build_program(lambda r: M.create("gpt", cfg, plugin, r), plugin, OptimConfig("muon", lr=1e-2),
                         dtype=jnp.bfloat16)
    x = jax.random.randint(jax.random.key(1), (4, 8), 0, 17)
    state, data, losses = prog.init(jax.random.key(0)), {"x": x, "y": x}, []
    step = jax.jit(prog.train_step).lower(state, data).compile(compiler_options=run_once_options())  # 10 tiny steps
    for _ in range(10):
        state, metrics = step(state, data)
        losses.append(float(metrics["loss"]))
    assert np.all(np.isfinite(losses)) and losses[-1] < 0.8 * losses[0], losses
    assert all(v.dtype == jnp.float32 for v in jax.tree.leaves(state["params"]))


FANS = {"square": lambda n: (n, n), "tall": lambda n: (n, 4 * n), "input": lambda n: (12, n)}  # (fan_in, fan_out)


@pytest.mark.parametrize("shape", sorted(FANS))
def test_clipped_muon_step_keeps_the_spectral_condition(shape):
    """--clip-rms under Muon: O's RMS is 1/sqrt(max(p, q)), so the threshold follows it (max_rms at the base shape)
    and the clip factor is width-independent. muP's Muon rule gives a hidden matrix (n x n, and a non-square 4n x n)
    ||dW||_* flat in width and an input layer (n x 12, muon_io) ||dW||_* ~ m^(1/2) (spectral_optimizers.md 1): with
    clip_rms = 0.05, which clips O at every width here, the log-log slope over n = 64, 128, 256 (base 64) is 0 (1/2)
    within 0.1 (the tall matrix's -0.08: five Newton-Schulz steps leave its mean singular value at 0.85 at n = 64 and
    0.96 at 256, so O's RMS is not quite 1/sqrt(max(p, q))); a fixed threshold clipped the base width's O harder:
    slopes +0.52 (square) and +1.0 (input)."""
    kind = "input" if shape == "input" else "hidden"

    def step_norm(n: int) -> float:
        fan_in, fan_out = FANS[shape](n)
        tags = {"w": Tag(kind, fan_in, fan_out, width_mult=n / 64, layout="out_in")}
        tx = optim.build(OptimConfig("muon", lr=1.0, clip_rms=0.05, muon_io=True), P.get("mup"), tags)

        def norm(key):  # one program, compiled to run once (op by op, each eager op compiled on its own)
            g = {"w": jax.random.normal(key, (fan_out, fan_in)) / n}
            u, _ = tx.update(g, tx.init(g), {"w": jnp.zeros((fan_out, fan_in))})
            return jnp.linalg.norm(u["w"], 2)

        key = jax.random.key(0)
        return float(jax.jit(norm).lower(key).compile(compiler_options=run_once_options())(key))

    widths = np.array([64, 128, 256])
    slope = np.polyfit(np.log(widths), np.log([step_norm(int(n)) for n in widths]), 1)[0]
    assert abs(slope - (0.5 if kind == "input" else 0.0)) < 0.1, slope


@pytest.mark.parametrize("stacked", [False, True])
def test_muon_on_an_out_in_kernel_equals_muon_on_the_kernel_stored_in_out(stacked):
    """Muon on a [2, 2, out, in] kernel (7 -> 5 channels; a stack of 3 of them) with the inferred route equals Muon on
    the same kernel stored [2, 2, in, out], to 1e-6 in float64 over two steps. Read in_out, its n to n kernel was
    orthogonalised as the matrix [kh * kw * out, in]: another update."""
    lead = (3,) if stacked else ()
    rules = {"^conv2_d_transpose/": "stacked"} if stacked else None

    def tree(n):
        return {"conv2_d_transpose": {"w": s(*lead, 2, 2, n, 7)}}

    tags = P.infer_tags(tree(5), tree(10), base_width=5, width=10, rules=rules)
    route = optim.routes(OptimConfig(name="muon", muon_io=True), tags)["conv2_d_transpose"]["w"]
    rng = np.random.default_rng(0)
    swap = lambda x: jnp.swapaxes(x, -1, -2)  # noqa: E731
    with jax.enable_x64(True):
        w = jnp.zeros((*lead, 2, 2, 10, 7), jnp.float64)
        mine = optax.contrib.scale_by_muon(weight_dimension_numbers={"w": route.matrix_axes(w.shape)})
        flax_like = optax.contrib.scale_by_muon(weight_dimension_numbers={
            "w": Route("spectral", 28, "in_out").matrix_axes(swap(w).shape)})
        s1, s2 = mine.init({"w": w}), flax_like.init({"w": swap(w)})
        for _ in range(2):
            g = jnp.asarray(rng.standard_normal(w.shape))
            u1, s1 = mine.update({"w": g}, s1, {"w": w})
            u2, s2 = flax_like.update({"w": swap(g)}, s2, {"w": swap(w)})
            np.testing.assert_allclose(swap(u1["w"]), u2["w"], atol=1e-6, rtol=0)
        assert float(jnp.abs(u2["w"]).max()) > 0.1
