"""`python -m zoo.sample RUN_DIR`: continue a prompt with a trained GPT run (zoo.sample.sample)."""

from __future__ import annotations

import sys

from zoo.cli.boundary import boundary
from zoo.cli.flags import Parser, finite, path_arg, positive, seed


@boundary
def main(argv: list[str] | None = None) -> None:
    p = Parser(prog="python -m zoo.sample",
               description="Continue a prompt with a trained GPT run, decoding with its tokenizer.")
    a = p.add_argument
    a("run_dir", type=path_arg, help="a GPT run directory (config.json and checkpoints/)")
    a("--prompt", default="\n", help="text to continue (default: a newline)")
    a("--tokens", type=positive, default=200, help="how many tokens to generate (default: 200)")
    a("--temperature", type=finite, default=1.0, help="softmax temperature, >= 0; 0 always takes the most likely "
      "token (default: 1)")
    a("--top-k", type=positive, help="draw only among the K most likely tokens (default: all)")
    a("--step", type=int, help="the checkpoint's step (default: the latest)")
    a("--seed", type=seed, default=0, help="seed of the draws (default: 0)")
    args = p.parse_args(argv)
    from zoo.sample import sample

    text = sample(args.run_dir, args.prompt, args.tokens, args.temperature, args.top_k, args.step, args.seed)
    sys.stdout.write(args.prompt + text + "\n")
