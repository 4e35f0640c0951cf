"""Referee round 9 (laws): optimizers, Muon and the per-parameter rules at settings the other tests do not use."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from zoo import optim
from zoo.muon import as_matrices, singular_scale
from zoo.optim import OptimConfig
from zoo.param.tags import Tag

RANKS = ("3", "24", "full")  # the gradient's rank: a batch of 3, of 24, full


def muon_steps(n: int, clip: float | None, base: int = 32) -> dict[str, jax.Array]:
    """Muon's first update (before the LR) of a muP hidden matrix n x 3n (out_in) at base width `base`, by the
    gradient's rank (RANKS: a sum of that many outer products, or full), as stacks of Muon's matrices."""
    tags = {r: Tag("hidden", n, 3 * n, width_mult=n / base, layout="out_in") for r in RANKS}
    grads = {}
    for r in RANKS:
        k1, k2 = jax.random.split(jax.random.key(len(grads)))
        grads[r] = jax.random.normal(k1, (3 * n, n)) / n if r == "full" else \
            jax.random.normal(k1, (3 * n, int(r))) @ jax.random.normal(k2, (int(r), n)) / n
    cfg = OptimConfig("muon", lr=1.0, clip_rms=clip, muon_rms=1.0)
    route = optim.routes(cfg, tags)
    tx = optim.chain(cfg, *({r: v for r in RANKS} for v in (1.0, -1.0, 0.0)), route=route)
    updates = jax.jit(tx.update)(grads, tx.init(grads), jax.tree.map(jnp.zeros_like, grads))[0]
    return {r: as_matrices(updates[r], route[r]) for r in RANKS}


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
