"""An Equinox MLP on CIFAR-10 under muP (or any zoo plugin), its code unchanged: zoo infers each parameter's kind
from its shapes at two widths (Equinox stores Linear weights as [fan_out, fan_in]: layout "out_in"), rescales
Equinox's own init, and builds the optax optimizer. (Equinox draws biases from U(+-1/sqrt(fan_in)), which shrinks
with width where SP and muP keep vectors constant: this MLP starts them at 0, as Haiku and Flax do.)

    python examples/equinox_mlp.py --param mup --width 1024 --base-width 128 --steps 300
"""

from __future__ import annotations

import math

import equinox as eqx
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


class MLP(eqx.Module):
    """A relu MLP with `depth` hidden layers; on a batch, returns the logits and its pre-activations."""

    layers: list

    def __init__(self, width: int, depth: int, key: jax.Array):
        sizes = [math.prod(IMAGE), *[width] * (depth + 1), CLASSES]
        keys = jax.random.split(key, len(sizes) - 1)
        linear = [eqx.nn.Linear(i, o, key=k) for i, o, k in zip(sizes[:-1], sizes[1:], keys, strict=True)]
        self.layers = [eqx.tree_at(lambda layer: layer.bias, layer, jnp.zeros_like(layer.bias)) for layer in linear]

    def __call__(self, x: jax.Array) -> tuple[jax.Array, dict]:
        return jax.vmap(self.one)(x.reshape(x.shape[0], -1))

    def one(self, x: jax.Array) -> tuple[jax.Array, dict]:
        acts = {"embed": self.layers[0](x)}
        h = acts["embed"]
        for l, layer in enumerate(self.layers[1:-1]):
            h = acts[f"hidden_{l}"] = layer(jax.nn.relu(h))
        return self.layers[-1](jax.nn.relu(h)), acts


def init(key: jax.Array, width: int, depth: int) -> MLP:
    return MLP(width, depth, key)  # every leaf is an array: the module is its own parameter tree


def apply(params: MLP, x: jax.Array, width: int, depth: int):
    return params(x)


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

    model = eqx.filter_jit(init)(jax.random.key(0), args.width, args.depth)  # one program
    tags = zoo.param.infer_tags_from(lambda w: eqx.filter_eval_shape(init, jax.random.key(0), w, args.depth),
                                     base_width=args.base_width, width=args.width, layout="out_in")
    free = zoo.param.multiplier_free(zoo.param.get(args.param), tags)
    model = zoo.param.rescale_init(model, tags, free)
    tx = build(OptimConfig(name="adam", lr=args.lr), free, tags)

    @eqx.filter_jit
    def step(model, opt, x, y):
        def loss(m):
            return optax.softmax_cross_entropy_with_integer_labels(m(x)[0], y).mean()

        value, grads = eqx.filter_value_and_grad(loss)(model)
        updates, opt = tx.update(grads, opt, model)
        return eqx.apply_updates(model, updates), opt, value

    data = zoo.data.load("cifar10")
    opt, losses = tx.init(model), []
    for t in range(args.steps):
        idx = data.indices("train", t, args.batch_size, seed=0)
        x = data.splits["train"]["x"][idx] / 127.5 - 1.0
        model, opt, value = step(model, opt, x, data.splits["train"]["y"][idx])
        losses.append(float(value))
        if (t + 1) % max(args.steps // 10, 1) == 0:
            print(f"step {t + 1}: train loss {np.mean(losses[-10:]):.4f}")
    return float(np.mean(losses[-10:]))


if __name__ == "__main__":
    boundary(main)()  # a bad flag or size is one line on stderr and exit status 1
