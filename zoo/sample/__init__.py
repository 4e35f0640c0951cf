"""Text from a trained GPT (`python -m zoo.sample RUN_DIR --prompt "..." --tokens 200`, zoo/cli/sample.py).

The model is the run's (zoo.train.load: read without touching a run that may still train) at its latest
checkpoint (or step N); the
prompt is encoded and the continuation decoded with the run's tokenizer (char, byte or the run's BPE). Each
new token is drawn from softmax(logits / temperature) restricted to the top-k logits (temperature 0: argmax),
given the last seq_len tokens as context. The continuation comes piece by piece (`continuation`), so the command
prints it as it is drawn; only the context is kept, and --tokens goes up to 2^31 - 1 (the draws' counter).
"""

from __future__ import annotations

import functools
import itertools
import math
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from zoo.data.tokenizer import ByteTokenizer
from zoo.data.view import DataView
from zoo.schema import F32_MAX, INT32_MAX, utf8
from zoo.train.load import load_run, read_config

DEFAULT_PROMPT = "\n"


def load_gpt(run_dir: str, step: int | None = None) -> tuple[nnx.Module, DataView]:
    """The run's GPT with its checkpoint's parameters, and its data set (whose tokenizer encodes and decodes)."""
    model = read_config(run_dir).model.name
    if model != "gpt":
        raise ValueError(f"{run_dir} trained the model {model}; sampling needs a GPT run")
    run = load_run(run_dir, step, report=functools.partial(print, file=sys.stderr))  # stdout holds only the text
    return run.setup.program.model(run.state), run.setup.data


def _next_token(model: nnx.Module, window: jax.Array, last: jax.Array, key: jax.Array, temperature: jax.Array,
                top_k: int | None) -> jax.Array:
    """A token drawn after position `last` of the (1, T) window (positions after it are padding, which a causal
    model does not see)."""
    logits = model(window)[0][0, last].astype(jnp.float32)
    scaled = logits / jnp.maximum(temperature, 1e-6)
    if top_k is not None:  # masked after the scaling: -inf / a temperature near float32's largest was nan (drawn)
        kth = jax.lax.top_k(logits, top_k)[0][-1]
        logits, scaled = (jnp.where(logits < kth, -jnp.inf, x) for x in (logits, scaled))
    drawn = jax.random.categorical(key, scaled)
    return jnp.where(temperature > 0, drawn, jnp.argmax(logits))


# jax.jit, not nnx.jit: the module is a pytree, flattened by JAX's own pytree code at each call, about a quarter of
# nnx.jit's per-call graph traversal (0.85 against 3.3 ms a token for a small GPT on the CPU); the forward pass
# changes no state of the module.
_next_token_jit = jax.jit(_next_token, static_argnames="top_k")


def drawn(model: nnx.Module, prompt: np.ndarray, temperature: float = 1.0, top_k: int | None = None,
          seed: int = 0) -> Iterator[int]:
    """New token ids after `prompt`, endlessly, each given at most the model's context of preceding tokens (the only
    tokens kept)."""
    context = model.cfg.seq_len
    recent = deque((int(t) for t in prompt), maxlen=context)
    key = jax.random.key(seed)
    temp = jnp.float32(temperature)
    for i in itertools.count():
        window = np.zeros((1, context), np.int32)
        window[0, :len(recent)] = list(recent)
        token = int(_next_token_jit(model, jnp.asarray(window), jnp.int32(len(recent) - 1),
                                    jax.random.fold_in(key, i), temp, top_k))
        recent.append(token)
        yield token


def generate(model: nnx.Module, prompt: np.ndarray, tokens: int, temperature: float = 1.0,
             top_k: int | None = None, seed: int = 0) -> np.ndarray:
    """`tokens` new token ids after `prompt` (the first `tokens` of `drawn`)."""
    return np.fromiter(itertools.islice(drawn(model, prompt, temperature, top_k, seed), tokens), np.int32, tokens)


def decoded(ids: Iterable[int], decode: Callable[[list[int]], str], hold: int = 16) -> Iterator[str]:
    """The text of `ids` in pieces as they come, which join to decode(all ids): a token that ends in the middle of a
    character (a byte, a BPE byte-fallback piece: decoded as U+FFFD) waits for the rest, up to `hold` tokens."""
    pending: list[int] = []
    for token in ids:
        pending.append(token)
        text = decode(pending)
        if not text.endswith("\ufffd") or len(pending) >= hold:
            pending.clear()
            yield text
    if pending:
        yield decode(pending)


def check_request(tokens: int, temperature: float, prompt: str | None) -> None:
    """What can be refused before the run is read."""
    if not 1 <= tokens <= INT32_MAX:
        raise ValueError(f"--tokens must be between 1 and 2^31 - 1 (the draws' counter), got {tokens}")
    if not (math.isfinite(temperature) and 0 <= temperature <= F32_MAX):
        raise ValueError(f"--temperature must be a number from 0 to float32's largest ({F32_MAX:.3g}), got "
                         f"{temperature}")
    if prompt == "":
        raise ValueError("--prompt is empty; give the model at least one character to continue")


def encode_prompt(data: DataView, prompt: str | None) -> np.ndarray:
    """The prompt's token ids; None: the default, a newline, which a vocabulary without one cannot encode (a
    command given no --prompt then read 'characters not in the vocabulary: '\\n''). A prompt of bytes that are not
    UTF-8 (a command-line argument holds them as surrogate escapes) is read by a byte-level run as those bytes and
    refused by the others, whose tokenizers take text (a BPE failed with sentencepiece's 'Unable to cast')."""
    if prompt is not None:
        if not utf8(prompt) and not isinstance(data.tokenizer, ByteTokenizer):
            raise ValueError(f"--prompt {prompt!r} holds bytes that are not UTF-8 text, which this run's "
                             f"{data.tokenizer.meta()['kind']} tokenizer cannot read; give UTF-8 text")
        try:
            return data.encode(prompt)
        except ValueError as e:
            raise ValueError(f"--prompt: {e}") from None
    try:
        return data.encode(DEFAULT_PROMPT)
    except ValueError:
        raise ValueError("this run's vocabulary has no newline, the default --prompt: give one with --prompt TEXT "
                         "in the run's characters") from None


def continuation(run_dir: str, prompt: str | None, tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 step: int | None = None, seed: int = 0) -> Iterator[str]:
    """The decoded continuation of `prompt` (None: a newline), in pieces as they are drawn (the request checked and
    the run read first)."""
    check_request(tokens, temperature, prompt)
    model, data = load_gpt(run_dir, step)
    if top_k is not None and not 1 <= top_k <= data.num_classes:
        raise ValueError(f"--top-k must be between 1 and the vocabulary size {data.num_classes}, got {top_k}")
    ids = encode_prompt(data, prompt)
    if len(ids) > model.cfg.seq_len:  # drawn keeps the context only: said, not done silently
        print(f"note: the prompt is {len(ids)} tokens; the model sees the last {model.cfg.seq_len} of them, its "
              "context", file=sys.stderr)
    return decoded(itertools.islice(drawn(model, ids, temperature, top_k, seed), tokens), data.decode)


def sample(run_dir: str, prompt: str | None, tokens: int, temperature: float = 1.0, top_k: int | None = None,
           step: int | None = None, seed: int = 0) -> str:
    """The decoded continuation of `prompt`."""
    return "".join(continuation(run_dir, prompt, tokens, temperature, top_k, step, seed))

