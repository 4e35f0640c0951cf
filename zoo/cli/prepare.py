"""`python -m zoo.data.prepare text|tfds SOURCE --out DIR`: a token directory for --data tokens:DIR
(zoo.data.prepare.prepare)."""

from __future__ import annotations

from pathlib import Path
from shlex import quote

from zoo.cli.boundary import boundary
from zoo.cli.flags import Once, Parser, path_arg


@boundary(computes=False)
def main(argv: list[str] | None = None) -> None:
    p = Parser(prog="python -m zoo.data.prepare",
               description="Write a token directory (train.bin, val.bin, meta.json) for --data tokens:DIR from a text "
               "file, a folder of text files, or a tfds text set.")
    p.add_argument("kind", choices=("text", "tfds"), help="what SOURCE is")
    p.add_argument("source", type=path_arg,
                   help="text: a UTF-8 file or a folder of them; tfds: a dataset name with a text feature")
    p.add_argument("--out", type=path_arg, action=Once, required=True, help="the token directory to write")
    p.add_argument("--tokenizer", default="char", help="char, byte or bpe:SIZE (a sentencepiece BPE of SIZE tokens; "
                   "default: char)")
    p.add_argument("--data-dir", type=path_arg, help="the tfds data dir")
    args = p.parse_args(argv)
    if args.kind == "text" and args.data_dir is not None:  # was ignored without a word
        p.error("--data-dir is where tfds keeps its sets; a text source does not read it: leave it out")
    from zoo.data.prepare import prepare
    from zoo.data.tokenizer import parse
    from zoo.data.tokens import read_meta

    counts = prepare(args.kind, args.source, args.out, args.tokenizer, args.data_dir)
    vocab, (kind, asked) = read_meta(Path(args.out).expanduser())["vocab_size"], parse(args.tokenizer)
    fewer = f" (fewer than the {asked:,} asked: the corpus has no more merges)" if kind == "bpe" and vocab < asked \
        else ""
    print(f"wrote {args.out}: {counts['train']:,} train and {counts['val']:,} val tokens, a vocabulary of {vocab:,}"
          f"{fewer}; use --data {quote('tokens:' + args.out)}")
