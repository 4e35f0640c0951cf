"""A Haiku decoder-only transformer (pre-LN blocks in hk.layer_stack) on tiny-shakespeare under Depth-muP, its code
unchanged. Shapes at two widths give each parameter's kind; three rules add what shapes cannot tell: the stacked
blocks are residual branches, the query takes the attention-logit scale, and the matrix ending each branch takes
the branch multiplier 1/sqrt(L/L0).

    python examples/haiku_transformer.py --param depth_mup --width 256 --depth 8 --base-width 128 --base-depth 2
"""

from __future__ import annotations

import argparse

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

import zoo.data
import zoo.param
from zoo.cli.boundary import boundary
from zoo.cli.flags import Parser, positive, positive_finite
from zoo.optim import OptimConfig, build

VOCAB, SEQ_LEN, HEAD_DIM = 65, 64, 32
RULES = {"^blocks/": ("stacked", "branch"), "^blocks/query/": "query", "^blocks/(attn_out|mlp_out)/": "branch_output"}


def block(x: jax.Array, width: int) -> tuple[jax.Array, jax.Array]:
    """x + Attn(LN(x)), then x + MLP(LN(x)), logits q.k / sqrt(d) (SP form: no multipliers anywhere)."""
    b, t, heads = x.shape[0], x.shape[1], width // HEAD_DIM
    h = hk.LayerNorm(-1, True, True, name="ln1")(x)
    q, k, v = (hk.Linear(width, name=n)(h).reshape(b, t, heads, HEAD_DIM) for n in ("query", "key", "value"))
    logits = jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(HEAD_DIM)
    att = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((t, t), bool)), logits, -1e30), axis=-1)
    x = x + hk.Linear(width, name="attn_out")(jnp.einsum("bhts,bshd->bthd", att, v).reshape(b, t, width))
    h = hk.LayerNorm(-1, True, True, name="ln2")(x)
    x = x + hk.Linear(width, name="mlp_out")(jax.nn.gelu(hk.Linear(4 * width, name="mlp_in")(h)))
    return x, x


def forward(tokens: jax.Array, width: int, depth: int) -> tuple[jax.Array, dict]:
    """Next-token logits, and the embedding and every block's output (for the coordinate check)."""
    pos = hk.get_parameter("pos", [SEQ_LEN, width], init=hk.initializers.TruncatedNormal(0.02))
    x0 = hk.Embed(VOCAB, width, name="embed")(tokens) + pos[: tokens.shape[1]]
    x, blocks = hk.layer_stack(depth, with_per_layer_inputs=True, name="blocks")(lambda x: block(x, width))(x0)
    return hk.Linear(VOCAB, name="readout")(hk.LayerNorm(-1, True, True, name="ln_f")(x)), {"embed": x0,
                                                                                            "blocks": blocks}


def init(key: jax.Array, width: int, depth: int):
    fn = hk.without_apply_rng(hk.transform(lambda t: forward(t, width, depth)))
    return fn.init(key, jnp.zeros((1, SEQ_LEN), jnp.int32))


def apply(params, tokens: jax.Array, width: int, depth: int):
    return hk.without_apply_rng(hk.transform(lambda t: forward(t, width, depth))).apply(params, tokens)


def whole_heads(text: str) -> int:
    """A width made of whole heads of HEAD_DIM (each size the model is built at: the width and the base width)."""
    width = positive(text)
    if width % HEAD_DIM:
        raise argparse.ArgumentTypeError(f"expected a multiple of the head dim {HEAD_DIM}, got {text!r}")
    return width


def main(argv: list[str] | None = None) -> float:
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--param", default="depth_mup", help=f"one of {', '.join(zoo.param.names())}")
    p.add_argument("--width", type=whole_heads, default=256)
    p.add_argument("--depth", type=positive, default=8)
    p.add_argument("--base-width", type=whole_heads, default=128, help="the width where the plugin equals SP")
    p.add_argument("--base-depth", type=positive, default=2, help="the depth where the plugin equals SP")
    p.add_argument("--lr", type=positive_finite, default=3e-3, help="Adam LR, tuned at the base size")
    p.add_argument("--steps", type=positive, default=300)
    p.add_argument("--batch-size", type=positive, default=32)
    args = p.parse_args(argv)

    params = jax.jit(init, static_argnums=(1, 2))(jax.random.key(0), args.width, args.depth)  # one program
    tags = zoo.param.infer_tags_from(lambda w: jax.eval_shape(lambda k: init(k, w, args.depth), jax.random.key(0)),
                                     base_width=args.base_width, width=args.width, rules=RULES, depth=args.depth,
                                     base_depth=args.base_depth)
    free = zoo.param.multiplier_free(zoo.param.get(args.param), tags, head_dim=HEAD_DIM, base_head_dim=HEAD_DIM)
    params = zoo.param.rescale_init(params, tags, free)
    tx = build(OptimConfig(name="adam", lr=args.lr), free, tags)

    @jax.jit
    def step(params, opt, x, y):
        def loss(p):
            return optax.softmax_cross_entropy_with_integer_labels(apply(p, x, args.width, args.depth)[0], y).mean()

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, value

    data = zoo.data.load("shakespeare", seq_len=SEQ_LEN)
    tokens = data.splits["train"]["tokens"]
    opt, losses = tx.init(params), []
    for t in range(args.steps):
        pos = data.indices("train", t, args.batch_size, seed=0)[:, None] + np.arange(SEQ_LEN + 1)
        params, opt, value = step(params, opt, tokens[pos[:, :-1]], tokens[pos[:, 1:]])
        losses.append(float(value))
        if (t + 1) % max(args.steps // 10, 1) == 0:
            print(f"step {t + 1}: train loss {np.mean(losses[-10:]):.4f} nats/char")
    return float(np.mean(losses[-10:]))


if __name__ == "__main__":
    boundary(main)()  # a bad flag or size is one line on stderr and exit status 1
