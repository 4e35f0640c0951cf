"""`python train.py`: the command line over zoo.train.loop. Bad input gets one line and exit status 2."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from zoo.config import FIELDS, read_file, resolve


def _kv(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    k, v = text.split("=", 1)
    return k.strip().replace("-", "_"), v.strip()


def _model_value(v: str) -> Any:
    """Model options from the CLI: ints, floats, booleans, or strings."""
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def add_optimizer_flags(p: argparse.ArgumentParser) -> None:
    """The optimizer flags of train.py and zoo.sweep (RunConfig fields; the LR is each tool's own)."""
    a = p.add_argument
    a("--optimizer", help="sgd, momentum, adam, adamw, lion, adafactor")
    a("--schedule", help="constant, cosine or linear (after --warmup)")
    a("--warmup", type=int, help="linear warmup steps")
    a("--min-lr-ratio", type=float, help="final LR / peak LR for cosine and linear")
    a("--b1", type=float, help="Adam/Lion beta1")
    a("--b2", type=float, help="Adam/Lion beta2")
    a("--eps", type=float, help="Adam epsilon at the base width (the plugin scales it)")
    a("--weight-decay", type=float, help="decoupled per-step shrink lr*wd (default 0.1 for adamw, else 0)")
    a("--clip-norm", type=float, help="clip the global norm of the width-faithful gradients")
    a("--clip-rms", type=float, help="clip each parameter's update RMS (width-independent)")


def parser() -> argparse.ArgumentParser:
    import zoo.models
    import zoo.param

    p = argparse.ArgumentParser(
        prog="train.py", description="Train a zoo model under a parametrization plugin. Flags override --config, "
        "which overrides the model's defaults. Rerunning the same command in the same run dir resumes.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter, argument_default=None)
    a = p.add_argument
    a("--config", help="YAML or JSON file of options (keys as the flags, with _ or -)")
    a("--model", help=f"one of {', '.join(zoo.models.names())}")
    a("--param", help=f"parametrization plugin: {', '.join(zoo.param.names())}")
    a("--param-opt", action="append", type=_kv, metavar="K=V", help="plugin option, repeatable (e.g. alpha=1)")
    a("--model-opt", action="append", type=_kv, metavar="K=V", help="model config option (e.g. activation=abs)")
    a("--width", type=int, help="model width n")
    a("--depth", type=int, help="number of blocks L")
    a("--base-width", type=int, help="base width n0 at which every plugin equals SP (default: the model's)")
    a("--base-depth", type=int, help="base depth L0 (default: the model's)")
    a("--lr", type=float, help="peak learning rate (at the base width; the plugin scales it per parameter)")
    add_optimizer_flags(p)
    a("--steps", type=int, help="training steps")
    a("--epochs", type=float, help="training epochs (when --steps is not given)")
    a("--batch-size", type=int, help="global batch size (split over the devices)")
    a("--eval-batch-size", type=int, help="eval batch size")
    a("--data", help="cifar10, shakespeare, synthetic, synthetic:text, synthetic:teacher, imagefolder:<dir|.tar.gz>, "
      "text:<file>, tfds:<name>[:split]")
    a("--data-dir", help="data dir for tfds")
    a("--seq-len", type=int, help="context length for text data")
    a("--byte-level", action="store_const", const=True, help="text as bytes instead of characters")
    a("--augment", action=argparse.BooleanOptionalAction, help="CIFAR pad-crop and flip")
    a("--run-dir", help="where checkpoints, metrics.jsonl and plots go (default runs/<model>_<param>_w_d_s)")
    a("--init-from", help="a run dir whose latest params initialise this run (finetuning)")
    a("--seed", type=int, help="seed of init, data order and dropout")
    a("--precision", help="f32 or bf16 (compute; params stay f32)")
    a("--eval-every", type=int, help="eval every N steps")
    a("--ckpt-every", type=int, help="checkpoint every N steps")
    a("--log-every", type=int, help="log train metrics every N steps")
    a("--keep", type=int, help="checkpoints to keep")
    a("--diversity", type=float, metavar="LAMBDA", help="at each eval also log the feature-diversity slope of the "
      "residual stream at depth fraction LAMBDA (Depth-muP; ~0.5 with diverse features, ~1 when redundant)")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        flags = {k: v for k, v in vars(args).items() if k in FIELDS}
        flags["param_opt"] = dict(args.param_opt or [])
        flags["model_opt"] = {k: _model_value(v) for k, v in (args.model_opt or [])}
        cfg = resolve(flags, read_file(args.config) if args.config else None)
        from zoo.train.loop import train

        train(cfg)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
