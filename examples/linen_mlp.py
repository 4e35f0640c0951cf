"""A Flax Linen MLP on CIFAR-10 under muP (or any zoo plugin), its code unchanged: zoo infers each parameter's kind
from its shapes at two widths, rescales Linen's own init, and builds the optax optimizer.

    python examples/linen_mlp.py --param mup --width 1024 --base-width 128 --steps 300
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import zoo.data
import zoo.param
from zoo.cli.boundary import boundary
from zoo.cli.flags import Parser, positive, positive_finite
from zoo.optim import OptimConfig, build

IMAGE, CLASSES = (32, 32, 3), 10


class MLP(nn.Module):
    """A relu MLP with `depth` hidden layers; returns the logits and its pre-activations."""

    width: int
    depth: int

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, dict]:
        acts = {"embed": nn.Dense(self.width, name="embed")(x.reshape(x.shape[0], -1))}
        h = acts["embed"]
        for l in range(self.depth):
            h = acts[f"hidden_{l}"] = nn.Dense(self.width, name=f"hidden_{l}")(nn.relu(h))
        return nn.Dense(CLASSES, name="readout")(nn.relu(h)), acts


def init(key: jax.Array, width: int, depth: int):
    return MLP(width, depth).init(key, jnp.zeros((1, *IMAGE)))


def apply(params, x: jax.Array, width: int, depth: int):
    return MLP(width, depth).apply(params, x)


def main(argv: list[str] | None = None) -> float:
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--param", default="mup", help=f"one of {', '.join(zoo.param.names())}")
    p.add_argument("--width", type=positive, default=1024)
    p.add_argument("--base-width", type=positive, default=128, help="the width where the plugin equals SP")
    p.add_argument("--depth", type=positive, default=2)
    p.add_argument("--lr", type=positive_finite, default=1e-3, help="Adam LR, tuned at the base width")
    p.add_argument("--steps", type=positive, default=300)
    p.add_argument("--batch-size", type=positive, default=128)
    args = p.parse_args(argv)

    params = jax.jit(init, static_argnums=(1, 2))(jax.random.key(0), args.width, args.depth)  # one program
    tags = zoo.param.infer_tags_from(lambda w: jax.eval_shape(lambda k: init(k, w, args.depth), jax.random.key(0)),
                                     base_width=args.base_width, width=args.width)  # shapes only: nothing allocated
    free = zoo.param.multiplier_free(zoo.param.get(args.param), tags)
    params = zoo.param.rescale_init(params, tags, free)
    tx = build(OptimConfig(name="adam", lr=args.lr), free, tags)

    @jax.jit
    def step(params, opt, x, y):
        def loss(p):
            return optax.softmax_cross_entropy_with_integer_labels(apply(p, x, args.width, args.depth)[0], y).mean()

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, value

    data = zoo.data.load("cifar10")
    opt, losses = tx.init(params), []
    for t in range(args.steps):
        idx = data.indices("train", t, args.batch_size, seed=0)
        x = data.splits["train"]["x"][idx] / 127.5 - 1.0
        params, opt, value = step(params, opt, x, data.splits["train"]["y"][idx])
        losses.append(float(value))
        if (t + 1) % max(args.steps // 10, 1) == 0:
            print(f"step {t + 1}: train loss {np.mean(losses[-10:]):.4f}")
    return float(np.mean(losses[-10:]))


if __name__ == "__main__":
    boundary(main)()  # a bad flag or size is one line on stderr and exit status 1
