"""Text from a trained GPT: `python -m zoo.sample RUN_DIR --prompt "..." --tokens 200`.

The model is the run's (RUN_DIR/config.json) with the parameters of its latest checkpoint (or --step N); the
prompt is encoded and the continuation decoded with the run's tokenizer (char, byte or the run's BPE). Each
new token is drawn from softmax(logits / temperature) restricted to the top-k logits (temperature 0: argmax),
given the last seq_len tokens as context.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import zoo.models
from zoo.data.view import DataView
from zoo.train.checkpoint import load_params
from zoo.train.run import read_run_config
from zoo.train.setup import setup
from zoo.tree import key_path


def load_run(run_dir: str, step: int | None = None) -> tuple[nnx.Module, DataView]:
    """The run's GPT with its checkpoint's parameters, and its data set (whose tokenizer encodes and decodes)."""
    cfg = read_run_config(run_dir)
    if cfg.model != "gpt":
        raise ValueError(f"{run_dir} trained a {cfg.model}; sampling needs a GPT run")
    params, _ = load_params(run_dir) if step is None else load_params(run_dir, step)
    s = setup(cfg)
    model = zoo.models.create("gpt", s.model_cfg, s.plugin, nnx.Rngs(0))
    graphdef, fresh, rest = nnx.split(model, nnx.Param, ...)
    flat, treedef = jax.tree_util.tree_flatten_with_path(fresh)
    leaves = []
    for p, leaf in flat:
        name = key_path(p)
        if name not in params or params[name].shape != leaf.shape:
            got = "missing" if name not in params else f"of shape {params[name].shape}"
            raise ValueError(f"{run_dir}: the checkpoint's {name} is {got}, but the run's config builds "
                             f"{leaf.shape}")
        leaves.append(jnp.asarray(params[name], leaf.dtype))
    return nnx.merge(graphdef, jax.tree_util.tree_unflatten(treedef, leaves), rest), s.data


def _next_token(model: nnx.Module, window: jax.Array, last: jax.Array, key: jax.Array, temperature: jax.Array,
                top_k: int | None) -> jax.Array:
    """A token drawn after position `last` of the (1, T) window (positions after it are padding, which a causal
    model does not see)."""
    logits = model(window)[0][0, last].astype(jnp.float32)
    if top_k is not None:
        kth = jax.lax.top_k(logits, top_k)[0][-1]
        logits = jnp.where(logits < kth, -jnp.inf, logits)
    greedy = jnp.argmax(logits)
    drawn = jax.random.categorical(key, logits / jnp.maximum(temperature, 1e-6))
    return jnp.where(temperature > 0, drawn, greedy)


_next_token_jit = nnx.jit(_next_token, static_argnames="top_k")


def generate(model: nnx.Module, prompt: np.ndarray, tokens: int, temperature: float = 1.0,
             top_k: int | None = None, seed: int = 0) -> np.ndarray:
    """`tokens` new token ids after `prompt`, each given at most the model's context of preceding tokens."""
    context = model.cfg.seq_len
    ids = [int(t) for t in prompt]
    key = jax.random.key(seed)
    temp = jnp.float32(temperature)
    for i in range(tokens):
        recent = ids[-context:]
        window = np.zeros((1, context), np.int32)
        window[0, :len(recent)] = recent
        ids.append(int(_next_token_jit(model, jnp.asarray(window), jnp.int32(len(recent) - 1),
                                       jax.random.fold_in(key, i), temp, top_k)))
    return np.array(ids[len(prompt):], np.int32)


def sample(run_dir: str, prompt: str, tokens: int, temperature: float = 1.0, top_k: int | None = None,
           step: int | None = None, seed: int = 0) -> str:
    """The decoded continuation of `prompt`."""
    if tokens < 1:
        raise ValueError(f"--tokens must be at least 1, got {tokens}")
    if temperature < 0:
        raise ValueError(f"--temperature must be >= 0, got {temperature}")
    if not prompt:
        raise ValueError("--prompt is empty; give the model at least one character to continue")
    model, data = load_run(run_dir, step)
    if top_k is not None and not 1 <= top_k <= data.num_classes:
        raise ValueError(f"--top-k must be between 1 and the vocabulary size {data.num_classes}, got {top_k}")
    ids = data.encode(prompt)
    return data.decode(generate(model, ids, tokens, temperature, top_k, seed))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m zoo.sample",
                                description="Continue a prompt with a trained GPT run, decoding with its tokenizer.")
    a = p.add_argument
    a("run_dir", help="a GPT run directory (config.json and checkpoints/)")
    a("--prompt", default="\n", help="text to continue (default: a newline)")
    a("--tokens", type=int, default=200, help="how many tokens to generate (default: 200)")
    a("--temperature", type=float, default=1.0, help="softmax temperature; 0 always takes the most likely token "
      "(default: 1)")
    a("--top-k", type=int, help="draw only among the K most likely tokens (default: all)")
    a("--step", type=int, help="the checkpoint's step (default: the latest)")
    a("--seed", type=int, default=0, help="seed of the draws (default: 0)")
    args: Any = p.parse_args(argv)
    try:
        text = sample(args.run_dir, args.prompt, args.tokens, args.temperature, args.top_k, args.step, args.seed)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    sys.stdout.write(args.prompt + text + "\n")


if __name__ == "__main__":
    main()
