"""bench/sweep_groups_jax.py times five ways of training vmapped members; they must compute the same thing: the
rows^T g product's gradients, and the (out, in) products' transposed, equal JAX's own (alone and vmapped over
members' weights with the rows shared), and the by-hand group (first layer one product of all members' weights)
gives the members' losses and gradients."""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
from cli_utils import ROOT

spec = importlib.util.spec_from_file_location("sweep_groups_jax", ROOT / "bench" / "sweep_groups_jax.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_rows_times_gradients_equal_jax_product_alone_and_vmapped():
    k1, k2, k3 = jax.random.split(jax.random.key(3), 3)
    rows, ws, g = jax.random.normal(k1, (7, 5)), jax.random.normal(k2, (3, 5, 4)), jax.random.normal(k3, (3, 7, 4))

    def grads(product, w, ct):
        return jax.grad(lambda r, w: jnp.sum(product(r, w) * ct), argnums=(0, 1))(rows, w)

    def out_in(r, w):  # the (out, in) products of the same weights; their weight gradients come back as W's (in, out)
        return bench.out_in_times(r, w.T)

    def out_in_wx(r, w):
        return bench.out_in_times_wx(r, w.T)

    products = (bench.rows_times, out_in, out_in_wx)
    ref = grads(jnp.matmul, ws[0], g[0])
    for product in products:
        for got, want in zip(grads(product, ws[0], g[0]), ref, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ref = jax.vmap(lambda w, ct: grads(jnp.matmul, w, ct))(ws, g)
    for product in products:
        vm = jax.vmap(lambda w, ct, p=product: grads(p, w, ct))(ws, g)
        for got, want in zip(vm, ref, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_out_in_product_takes_both_forms():
    """Both branches of out_in_times_wx: W outweighing the rows (a small batch) and not."""
    w = jax.random.normal(jax.random.key(4), (4, 6))
    for n in (2, 50):
        rows = jax.random.normal(jax.random.key(n), (n, 6))
        np.testing.assert_allclose(bench.out_in_times_wx(rows, w), rows @ w.T, rtol=1e-5, atol=1e-6)


def test_group_by_hand_is_the_members_summed():
    group, key = 3, jax.random.key(0)
    members = [bench.init(k, None) for k in jax.random.split(key, group)]
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *members)
    by_hand = {**stacked, "w0": jnp.concatenate([m["w0"] for m in members], axis=1)}
    x = jax.random.normal(jax.random.key(1), (bench.BATCH, bench.IN))
    y = jax.random.randint(jax.random.key(2), (bench.BATCH,), 0, bench.CLASSES)
    loss = bench.member_loss(jnp.matmul)
    want = sum(loss(m, x, y) for m in members)
    np.testing.assert_allclose(bench.group_loss(by_hand, x, y), want, rtol=1e-5)
    g_hand = jax.grad(bench.group_loss)(by_hand, x, y)
    for i, m in enumerate(members):
        g = jax.grad(loss)(m, x, y)
        cols = slice(i * bench.WIDTH, (i + 1) * bench.WIDTH)
        np.testing.assert_allclose(g_hand["w0"][:, cols], g["w0"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(g_hand["w2"][i], g["w2"], rtol=1e-4, atol=1e-6)
