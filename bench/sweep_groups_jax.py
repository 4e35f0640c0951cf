"""What vmapping small members buys on XLA:CPU, in plain JAX: the ceiling of bench/sweep.py's speedup.

16 members of the sweep bench's small MLP (3072 inputs, width 64, depth 4, batch 32, Adam, shared batches), each
trained 100 steps in one `lax.scan`, one after another ("sequential") or in vmapped groups of G, written five ways:

- `vmap`: `jax.vmap` of one member's run. JAX differentiates `rows @ W` (a member's W batched, the shared rows
  not) as g^T rows, (out, in) per member, then transposes it to W's (in, out): XLA:CPU copies that transpose every
  step (3072 x 64 per member), which is what makes vmapped members slower than sequential ones.
- `vmap, rows^T g`: the same, with the product's weight gradient taken as rows^T g (a custom_vjp): no transpose.
- `vmap, W (out, in)`: `jax.vmap`, the weights stored (out, in) as zoo's Dense stores them: JAX's g^T rows is then
  W's own order, so no transpose and no custom rule (forward-mode derivatives still work).
- `vmap, W (out, in), (W rows^T)^T`: the same with the product taken as (W rows^T)^T where W outweighs the rows (the
  transposes fall on the small activations). zoo keeps rows W^T: with this form its sweep's members no longer equal
  the sequential runs bit for bit at the default size (XLA:CPU splits the product differently in the two programs).
- `one product`: written by hand, the group's first-layer weights one (in, G x out) matrix, so the shared batch
  multiplies all of them as one 2-D product (forward and weight gradient), the hidden layers per member.

    python bench/sweep_groups_jax.py            # 5 interleaved rounds; prints ms per 16 member-steps and speedups

The best of these is what any formulation of the sweep engine could reach on this machine's products and Adam.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

IN, WIDTH, DEPTH, BATCH, CLASSES, MEMBERS = 3072, 64, 4, 32, 10, 16


@jax.custom_vjp
def rows_times(rows: jax.Array, w: jax.Array) -> jax.Array:
    """rows @ w, whose weight gradient is rows^T g (in W's own (in, out) order) instead of JAX's (g^T rows)^T."""
    return rows @ w


def _rows_times_fwd(rows, w):
    return rows @ w, (rows, w)


def _rows_times_bwd(res, g):
    rows, w = res
    return g @ w.T, jax.lax.dot_general(rows, g, (((0,), (0,)), ((), ())))


rows_times.defvjp(_rows_times_fwd, _rows_times_bwd)


def out_in_times(rows: jax.Array, w: jax.Array) -> jax.Array:
    """rows @ w^T for w stored (out, in), as zoo.models.layers.Dense takes it."""
    return rows @ w.T


def out_in_times_wx(rows: jax.Array, w: jax.Array) -> jax.Array:
    """rows @ w^T for w stored (out, in), as (w rows^T)^T where w outweighs the rows."""
    if w.size > rows.size:
        return jax.lax.dot_general(w, rows, (((1,), (1,)), ((), ()))).T
    return rows @ w.T


def init(key: jax.Array, group: int | None) -> dict[str, jax.Array]:
    """One member's weights (group None), or a group's: the first layer (in, G * width), the rest (G, in, out)."""
    ks = jax.random.split(key, DEPTH + 1)
    shapes = [(IN, WIDTH)] + [(WIDTH, WIDTH)] * (DEPTH - 1) + [(WIDTH, CLASSES)]
    one = {f"w{i}": jax.random.normal(k, s) / np.sqrt(s[0]) for i, (k, s) in enumerate(zip(ks, shapes, strict=True))}
    if group is None:
        return one
    stacked = {k: jnp.broadcast_to(v, (group, *v.shape)) for k, v in one.items()}
    return {**stacked, "w0": jnp.concatenate([one["w0"]] * group, axis=1)}


def member_loss(product: Callable) -> Callable:
    def loss(p, x, y):
        h = jax.nn.relu(product(x, p["w0"]))
        for i in range(1, DEPTH):
            h = h + jax.nn.relu(product(h, p[f"w{i}"]))
        return optax.softmax_cross_entropy_with_integer_labels(product(h, p[f"w{DEPTH}"]), y).mean()
    return loss


def group_loss(p, x, y):
    """The members' summed mean losses; the first layer one product of the shared batch, the rest per member."""
    group = p["w1"].shape[0]
    h = jax.nn.relu(x @ p["w0"]).reshape(x.shape[0], group, WIDTH)
    for i in range(1, DEPTH):
        h = h + jax.nn.relu(jnp.einsum("bmi,mio->bmo", h, p[f"w{i}"]))
    logits = jnp.einsum("bmi,mio->bmo", h, p[f"w{DEPTH}"])
    return optax.softmax_cross_entropy_with_integer_labels(logits, y[:, None]).mean(0).sum()


def trainer(loss: Callable, xs: jax.Array, ys: jax.Array) -> Callable:
    """run(params, lr) -> per-step losses: Adam over the steps' batches, one lax.scan."""
    def run(params, lr):
        tx = optax.adam(lr)

        def step(carry, batch):
            params, opt = carry
            value, grads = jax.value_and_grad(loss)(params, *batch)
            updates, opt = tx.update(grads, opt, params)
            return (optax.apply_updates(params, updates), opt), value

        return jax.lax.scan(step, (params, tx.init(params)), (xs, ys))[1]
    return run


def paths(xs: jax.Array, ys: jax.Array, groups: list[int]) -> dict[str, Callable[[], None]]:
    """Each way of training the 16 members, as a function that trains all of them once."""
    lrs = jnp.logspace(-4, -1, MEMBERS)
    one = jax.jit(trainer(member_loss(jnp.matmul), xs, ys))
    vmapped = {"vmap": jax.jit(jax.vmap(trainer(member_loss(jnp.matmul), xs, ys))),
               "vmap, rows^T g": jax.jit(jax.vmap(trainer(member_loss(rows_times), xs, ys))),
               "vmap, W (out, in)": jax.jit(jax.vmap(trainer(member_loss(out_in_times), xs, ys))),
               "vmap, W (out, in), (W rows^T)^T": jax.jit(jax.vmap(trainer(member_loss(out_in_times_wx), xs, ys)))}
    by_hand = jax.jit(trainer(group_loss, xs, ys))
    key = jax.random.key(0)

    def sequential() -> None:
        jax.block_until_ready([one(init(key, None), lrs[k]) for k in range(MEMBERS)])

    def in_groups(run: Callable, group: int, stacked: Callable) -> Callable[[], None]:
        def go() -> None:
            jax.block_until_ready([run(stacked(group), lrs[g * group:(g + 1) * group])
                                   for g in range(MEMBERS // group)])
        return go

    def vm_stacked(group: int, out_in: bool = False) -> dict:
        one = {k: v.T for k, v in init(key, None).items()} if out_in else init(key, None)
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (group, *a.shape)), one)

    out = {"sequential": sequential}
    for group in groups:
        for name, run in vmapped.items():
            out[f"{name} G{group}"] = in_groups(run, group, lambda g, t="(out, in)" in name: vm_stacked(g, t))
        # one LR for the group by hand (the members' LRs differ only in value, not in cost)
        out[f"one product G{group}"] = in_groups(lambda p, lr: by_hand(p, lr[0]), group, lambda g: init(key, g))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--groups", default="1,2,4,8,16")
    args = p.parse_args()
    xs = jax.random.normal(jax.random.key(1), (args.steps, BATCH, IN))
    ys = jax.random.randint(jax.random.key(2), (args.steps, BATCH), 0, CLASSES)
    runs = paths(xs, ys, [int(g) for g in args.groups.split(",")])
    for run in runs.values():
        run()  # compiles
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, run in runs.items():
            t0 = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - t0)
    base = statistics.median(seconds["sequential"])
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; {MEMBERS} members x {args.steps} steps, "
          f"median of {args.rounds} interleaved rounds")
    print(f"{'path':36s} {'ms / 16 member-steps':>21s} {'speedup':>8s}")
    for name, s in seconds.items():
        med = statistics.median(s)
        print(f"{name:36s} {med / args.steps * 1e3:21.2f} {base / med:8.2f}")


if __name__ == "__main__":
    main()
