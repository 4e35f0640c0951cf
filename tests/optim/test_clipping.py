"""Clipping in zoo.optim: --clip-rms caps each matrix (under Muon its singular-value scale, the same cap at every
width and gradient rank) and each stacked layer or scalar on its own; --clip-norm's threshold counts only the
parameters that train."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import zoo.param as P
from zoo import optim
from zoo.muon import as_matrices, singular_scale
from zoo.optim import OptimConfig
from zoo.param.tags import Tag
from zoo.train.step import run_once_options

RANKS = ("3", "24", "full")  # the gradient's rank: a batch of 3, of 24, full


def muon_steps(n: int, clip: float | None, base: int = 32) -> dict[str, jax.Array]:
    """Muon's first update (before the LR) of a muP hidden matrix n x 3n (out_in) at base width `base`, by the
    gradient's rank (RANKS: a sum of that many outer products, or full), as stacks of Muon's matrices."""
    tags = {r: Tag("hidden", n, 3 * n, width_mult=n / base, layout="out_in") for r in RANKS}
    cfg = OptimConfig("muon", lr=1.0, clip_rms=clip, muon_rms=1.0)
    route = optim.routes(cfg, tags)
    tx = optim.chain(cfg, *({r: v for r in RANKS} for v in (1.0, -1.0, 0.0)), route=route)

    def steps():  # one program, compiled to run once (the gradients' draws were eager ops, each its own program)
        grads = {}
        for r in RANKS:
            k1, k2 = jax.random.split(jax.random.key(len(grads)))
            grads[r] = jax.random.normal(k1, (3 * n, n)) / n if r == "full" else \
                jax.random.normal(k1, (3 * n, int(r))) @ jax.random.normal(k2, (int(r), n)) / n
        updates = tx.update(grads, tx.init(grads), jax.tree.map(jnp.zeros_like, grads))[0]
        return {r: as_matrices(updates[r], route[r]) for r in RANKS}

    return run_once(steps)


def run_once(fn, *args):
    """fn(*args) as one program compiled to run once (XLA backend optimisation off)."""
    return jax.jit(fn).lower(*args).compile(compiler_options=run_once_options())(*args)


def test_muon_clip_rms_caps_the_same_singular_scale_at_every_width_and_rank():
    """--clip-rms under Muon caps each matrix's singular-value scale s(O) = ||O^T O||_F / ||O||_F at
    clip_rms * sqrt(max(p0, q0)), the spectral norm of a full-rank O of RMS clip_rms at the base shape (here
    0.01 * sqrt(96) = 0.098). O's RMS is sqrt(rank / (p q)), so the former threshold clip_rms * sqrt(max(p0, q0) /
    max(p, q)) on it bit differently by width at a small batch: the clipped update's s was 0.38 at width 40 and 0.73
    at 360 for a gradient of rank 3 (clip factors 0.37 and 1), 0.13 and 0.40 at rank 24, 0.10 at full rank. Now s is
    the cap at every width and rank, and ||dW||_* is within the Newton-Schulz band [1, 1.3] of it (muP's hidden
    rule: ||dW||_* ~ m^0)."""
    cap = 0.01 * np.sqrt(3 * 32)
    for n in (40, 360):
        for r, u in muon_steps(n, 0.01).items():
            np.testing.assert_allclose(singular_scale(u), [cap], rtol=1e-3, err_msg=f"width {n}, rank {r}")
            assert 1.0 <= float(jnp.linalg.norm(u[0], 2)) / cap < 1.3, (n, r)


def test_muon_clip_rms_is_per_stacked_matrix():
    """A stacked [L, out, in] leaf is L matrices, orthogonalised one by one: the clip caps each matrix's s on its own
    (a layer whose update is 0 stays 0, one whose O is large is capped), as L separate parameters would be."""
    tags = {"w": Tag("hidden", 40, 40, width_mult=40 / 20, layout="out_in")}
    u = jnp.stack([jnp.zeros((40, 40)), 5.0 * jnp.eye(40), 0.01 * jnp.eye(40)])
    route = optim.routes(OptimConfig("muon"), tags)
    clipped = optim.clip_by_natural_rms(0.05, route).update({"w": u}, None)[0]["w"]
    np.testing.assert_allclose(singular_scale(clipped), [0.0, 0.05 * np.sqrt(20), 0.01], rtol=1e-5)


def test_entrywise_clip_rms_is_per_stacked_layer_at_every_depth():
    """--clip-rms on an entrywise (Adam) stack [L, out, in] clips each layer's RMS alone: one layer with update RMS 10
    among layers of RMS 0.5 is brought to 1 and the others are left alone, at depth 3 and 30 alike. The RMS was the
    stack's, so the clip factor of every layer was 1/sqrt((100 + 0.25 (L - 1)) / L): 0.17 at depth 3, 0.52 at 30
    (the spiking layer kept RMS 5.2 at depth 30, and the quiet ones were shrunk to 0.09 at depth 3)."""
    for depth in (3, 30):
        tags = {"w": Tag("hidden", 12, 20, width_mult=2.0, layout="out_in", branch=True, depth=depth)}
        def clipped_rms(key, tags=tags, depth=depth):  # one program (op by op, each eager op compiled on its own)
            scale = jnp.asarray([10.0] + [0.5] * (depth - 1))[:, None, None]
            u = scale * jnp.sign(jax.random.normal(key, (depth, 20, 12)))
            clipped = optim.clip_by_natural_rms(1.0, optim.routes(OptimConfig("adam"), tags)).update({"w": u}, None)[0]
            return jnp.sqrt(jnp.mean(jnp.square(clipped["w"]), axis=(1, 2)))

        rms = run_once(clipped_rms, jax.random.key(depth))
        np.testing.assert_allclose(rms, [1.0] + [0.5] * (depth - 1), rtol=1e-5, err_msg=f"depth {depth}")


def test_a_stack_of_scalars_is_one_scalar_per_layer():
    """A per-layer scalar stacked as [L] (fan-in and fan-out 1) is L parameters: --clip-rms at 1 brings each entry
    above 1 to 1 and leaves the others, where the stack's one RMS (2.3 here) shrank them all."""
    tags = {"g": Tag("scalar", 1, 1, branch=True, depth=4)}
    u = {"g": jnp.asarray([0.5, -4.0, 0.25, 2.0])}
    clipped = optim.clip_by_natural_rms(1.0, optim.routes(OptimConfig("adam"), tags)).update(u, None)[0]
    np.testing.assert_allclose(clipped["g"], [0.5, -1.0, 0.25, 1.0], rtol=1e-6)


def test_clip_norm_counts_only_the_parameters_that_train():
    """--clip-norm's threshold grows as the square root of the trained entries against the base width's: under
    freeze=input,output (TP VI's depth runs) a frozen layer's gradient is 0, so its entries must not count. With a
    300-input layer counted, the threshold grew like m^(1/2) where the hidden layers' faithful norm grows like m, and
    SGD's clipped hidden step over its unclipped one was 0.0093, 0.0064, 0.0055 at widths 48, 200, 800 (base 24);
    now it is the same at widths 40 and 360."""
    plugin, factors = P.get("mup", freeze="input,output"), []
    for n in (40, 360):
        m = n / 24
        tags = {"embed": Tag("input", 300, n, width_mult=m, layout="out_in"),
                "w": Tag("hidden", n, n, width_mult=m, layout="out_in", branch=True, depth=3, base_depth=3),
                "head": Tag("output", n, 10, width_mult=m, layout="out_in")}
        shapes = {"embed": (n, 300), "w": (3, n, n), "head": (10, n)}
        txs = [optim.build(OptimConfig("sgd", lr=1.0, clip_norm=clip), plugin, tags) for clip in (0.5, None)]

        def factor(m=m, shapes=shapes, txs=txs):  # one program (op by op, each eager op compiled on its own)
            grads = {k: jax.random.normal(jax.random.key(i), s) / m for i, (k, s) in enumerate(shapes.items())}
            steps = [jnp.linalg.norm(tx.update(grads, tx.init(grads), grads)[0]["w"]) for tx in txs]
            return steps[0] / steps[1]

        factors.append(float(run_once(factor)))
    assert factors[0] < 0.1 and abs(factors[1] / factors[0] - 1) < 0.03, factors
