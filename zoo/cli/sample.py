"""`python -m zoo.sample RUN_DIR`: continue a prompt with a trained GPT run (zoo.sample.sample)."""

from __future__ import annotations

import sys

from zoo.cli.boundary import boundary
from zoo.cli.flags import (
    Parser,
    add_allow_import,
    add_compile_cache,
    finite,
    path_arg,
    positive,
    positive_int32,
    seed,
    step,
)
from zoo.train import compile_cache


@boundary
def main(argv: list[str] | None = None) -> None:
    p = Parser(prog="python -m zoo.sample",
               description="Continue a prompt with a trained GPT run, decoding with its tokenizer.")
    a = p.add_argument
    a("run_dir", type=path_arg, help="a GPT run directory (config.json and checkpoints/)")
    a("--prompt", help="text to continue; the model sees its last seq_len tokens, its context (default: a newline)")
    a("--tokens", type=positive_int32, default=200, help="how many tokens to generate, printed as they are drawn; "
      "at most 2^31 - 1 (default: 200)")
    a("--temperature", type=finite, default=1.0, help="softmax temperature, >= 0; 0 always takes the most likely "
      "token (default: 1)")
    a("--top-k", type=positive, help="draw only among the K most likely tokens (default: all)")
    a("--step", type=step, help="the checkpoint's step (default: the latest)")
    a("--seed", type=seed, default=0, help="seed of the draws (default: 0)")
    add_compile_cache(p)
    add_allow_import(p)
    args = p.parse_args(argv)
    compile_cache.use(args.compile_cache)
    from zoo.sample import DEFAULT_PROMPT, continuation

    pieces = continuation(args.run_dir, args.prompt, args.tokens, args.temperature, args.top_k, args.step, args.seed)
    write(DEFAULT_PROMPT if args.prompt is None else args.prompt)
    for piece in pieces:
        write(piece)
    write("\n")


def write(text: str) -> None:
    """Text on stdout at once (the continuation shows as it is drawn; a reader that stopped reading, `| head`, ends
    the command quietly, and a terminal that cannot print it is one line: zoo.cli.boundary)."""
    sys.stdout.write(text)
    sys.stdout.flush()
