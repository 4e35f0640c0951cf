"""The flags of every zoo command line, from the config schema (zoo.config), so flags, config files and --help
share one definition; and the small argument types the commands share. Public: commands import these.

A bad flag is one line (`error: argument --lr: ...`) and exit status 2, not argparse's usage block.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, get_args

from zoo.config import FLAT, HINTS, PART_TITLES, default_text
from zoo.files import path_name_problem
from zoo.registry import allow_import
from zoo.schema import (
    INT32_MAX,
    MAX_SEEDS,
    SEED,
    base_type,
    comma_items,
    from_text,
    not_utf8,
    to_float,
    to_int,
    typed_number,
    utf8,
)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and no abbreviated flags. A model, plugin or policy given as module:Object by a
    flag (--model, --param, --policy, --allow-import) is the user's to import (zoo.registry.allow_import), where files
    name it too."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, allow_abbrev=False, **kwargs)
        # a negative number in scientific notation is a value, as -1 and -0.5 are (Python before 3.13 read --lr -1e-3
        # as a flag: "--lr: expected one argument"), and so are a grid or list of them (--lrs -12:-4:1, -3,-2) and
        # -inf, which its flag then names
        self._negative_number_matcher = re.compile(r"^-([\d.][\d.eE+\-:,^]*|inf|infinity|nan)$", re.I)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, rest = super().parse_known_args(args, namespace)
        for name in (getattr(parsed, "model", None), getattr(parsed, "param", None), getattr(parsed, "policy", None),
                     *(getattr(parsed, "allow_import", None) or [])):
            if isinstance(name, str) and ":" in name:
                allow_import(name)
        return parsed, rest

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


class ShownDefaults(argparse.HelpFormatter):
    """--help with each flag's default appended, unless its help already names one or there is none to show (None,
    False, an empty list): argparse's ArgumentDefaultsHelpFormatter would print "(default: None)" after a help
    text's own "(default: the model's)"."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def add_allow_import(p: argparse.ArgumentParser) -> None:
    """--allow-import MODULE:OBJECT, for a command that reads a config file, a run dir or a law file (which never
    import code by themselves: zoo.registry)."""
    p.add_argument("--allow-import", action="append", type=module_object, metavar="MODULE:OBJECT",
                   help="import this model, plugin or scaling policy where a config file, run dir or law file names "
                   "it (a file never makes zoo import code; repeatable)")


def model_options(model: str, pairs: list[tuple[str, str]], sets: dict[str, str]) -> dict[str, Any]:
    """--model-opt typed for `model`, none of them a size the command sets itself (`refuse_sizes`)."""
    import zoo.models

    refuse_sizes(pairs, sets)
    return zoo.models.options(model, pairs)


def refuse_sizes(pairs: list[tuple[str, str]] | None, sets: dict[str, str]) -> None:
    """No --model-opt gives a size the command sets itself (`sets`: the option -> the flags that set it): it was
    dropped without a word, or met the command's own in a TypeError."""
    for key, value in pairs or []:
        if key in sets:
            raise ValueError(f"--model-opt {key}={value}: this command sets the {key} itself ({sets[key]}); leave it "
                             "out")


def module_object(text: str) -> str:
    """--allow-import's MODULE:OBJECT (my_pkg.module:MyParam), checked for its form (any text was taken)."""
    if not re.fullmatch(r"[^:\s]+:[^\W\d][\w.]*", text):  # a module as --param takes it (my-plugin:MyParam)
        raise argparse.ArgumentTypeError(f"expected MODULE:OBJECT (e.g. my_pkg.params:MyParam), got {text[:80]!r}")
    return text


def nonempty(text: str) -> str:
    """A name that is not empty (--policy '' was read as the default, none)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def kv(text: str) -> tuple[str, str]:
    """K=V -> (k, v), dashes in K as underscores."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    k, v = text.split("=", 1)
    if not k.strip():  # '=1' named no option (the model then said it 'has no option ;')
        raise argparse.ArgumentTypeError(f"expected key=value with a key, got {text!r}")
    return k.strip().replace("-", "_"), v.strip()


class KeyValues(argparse.Action):
    """A repeatable K=V flag (type `kv`) collected as a list of pairs; a key given twice is a bad command line
    (the last one silently won, where a config file refuses a repeated key)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        pairs = list(getattr(namespace, self.dest, None) or [])
        key, value = values
        earlier = [v for k, v in pairs if k == key]
        if earlier:
            parser.error(f"{option_string} {key} given twice ({key}={earlier[0]} and {key}={value}): give it once")
        setattr(namespace, self.dest, [*pairs, values])


class Once(argparse.Action):
    """A flag that may be given once: a second one is a bad command line (a second --config silently replaced the
    first file, whose settings were then never read; a copied command's second --out or --run-dir wrote there)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given = namespace.__dict__.setdefault("_given_once", set())  # a value equal to the default counts too
        if self.dest in given:
            parser.error(f"{option_string} given twice ({getattr(namespace, self.dest)} and {values}): give it once")
        given.add(self.dest)
        setattr(namespace, self.dest, values)


def finite(text: str) -> float:
    """A finite number (nan and inf are refused)."""
    try:
        value = to_float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_finite(text: str) -> float:
    """A finite number above 0 (a learning rate)."""
    value = finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def path_arg(text: str) -> str:
    """A path that is not empty (an empty one, an unset shell variable, would read as the current folder) and is
    UTF-8 (orbax's C++ code takes no other), with a leading ~ as the home folder (as the data paths read it; a
    quoted '~/runs/a' made ./~/runs/a)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty (an empty path reads as the current folder)")
    if not utf8(text):
        raise argparse.ArgumentTypeError(not_utf8(text))
    if (why := path_name_problem(text)) is not None:
        raise argparse.ArgumentTypeError(f"cannot name a file: {why}")
    return os.path.expanduser(text)


def at_least(low: int, what: str) -> Callable[[str], int]:
    """An argparse type: an integer >= `low`, refused as `what`."""

    def parse(text: str) -> int:
        try:
            value = to_int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


positive = at_least(1, "a positive integer")
step = at_least(0, "a step (an integer >= 0)")


def integer(text: str) -> int:
    """An integer (its range is checked where it is used)."""
    try:
        return to_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int32(text: str) -> int:
    """A positive integer that fits in int32, as every integer setting (zoo.schema): a count JAX holds as one (a
    sample's draws)."""
    value = positive(text)
    if value > INT32_MAX:
        raise argparse.ArgumentTypeError(f"must be at most 2^31 - 1 (an int32), got {text!r}")
    return value


def seed_count(text: str) -> int:
    """How many seeds (initializations) to average: a positive integer up to MAX_SEEDS (a million of them ran out of
    memory or crashed XLA's CPU client)."""
    value = positive(text)
    if value > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SEEDS} (the mean over {MAX_SEEDS} seeds is within 3% "
                                         f"of one seed's spread already), got {text!r}")
    return value


def seed(text: str) -> int:
    """A seed: an integer in [0, 2^32) (JAX keeps a seed's low 32 bits: 2^32 would be seed 0 again)."""
    try:
        value = to_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not SEED[0](value):
        raise argparse.ArgumentTypeError(f"a seed {SEED[1]}, got {text!r}")
    return value


def numbers_text(text: str) -> str:
    """Text of numbers that a reader parses later (a sweep's comma lists and LR ranges, `2^-9`), refused here where
    it is not written as a user types numbers (zoo.schema.typed_number: '١' and '1_0' read as 1 and 10)."""
    if not typed_number(text):
        raise argparse.ArgumentTypeError(f"expected numbers in ASCII digits, got {text!r}")
    return text


def ints(text: str) -> list[int]:
    """A comma list of positive integers."""
    try:
        values = [to_int(v) for v in comma_items(text, "the list")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _typed(name: str):
    flag = "--" + name.replace("_", "-")

    def parse(text: str) -> Any:
        # A setting's None is the flag left out: --clip-norm none read so kept gpt's recipe clipping at 1.0.
        if text.lower() in ("none", "null") and type(None) in get_args(HINTS[name]):
            raise argparse.ArgumentTypeError(f"{text!r} is not a value: leave the flag out for its default")
        try:
            return from_text(flag, text, HINTS[name])
        except ValueError as e:  # argparse names the flag itself
            raise argparse.ArgumentTypeError(str(e).removeprefix(flag + " ")) from None

    parse.__name__ = base_type(HINTS[name]).__name__
    return parse


def add_settings(p: argparse.ArgumentParser, names: Iterable[str], defaults: bool = True) -> None:
    """One flag per setting (flat names), typed and documented by the schema, in one --help group per config
    part; `defaults`: say the real default (the schema's, and each model's recipe where it differs)."""
    groups: dict[str, Any] = {}
    for name in names:
        part, f = FLAT[name]
        group = groups.get(part) or groups.setdefault(part, p.add_argument_group(PART_TITLES[part]))
        base = base_type(HINTS[name])
        help_text = f.metadata["help"]
        if f.metadata.get("choices"):
            help_text += f": {', '.join(f.metadata['choices'])}"
        if defaults and base is not dict:
            help_text += f" (default: {default_text(name)})"
        flag = "--" + name.replace("_", "-")
        kwargs: dict[str, Any] = {"help": help_text.replace("%", "%%"), "metavar": f.metadata["metavar"],
                                  "default": None}
        if base is dict:
            group.add_argument(flag, action=KeyValues, type=kv, **kwargs)
        elif base is bool:
            group.add_argument(flag, nargs="?", const=True, type=_typed(name), **{**kwargs, "metavar": "true|false"})
        else:  # where the output goes is given once (Once); any other setting given twice takes the last
            group.add_argument(flag, type=_typed(name), **({"action": Once} if name == "run_dir" else {}), **kwargs)


def settings(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The flat settings given on the command line (None: not given; K=V lists as mappings)."""
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(args, name, None)
        if value is not None and base_type(HINTS[name]) is dict:
            value = dict(value)
        out[name] = value
    return out


def add_policy_flags(p: argparse.ArgumentParser, what: str, tokens: bool = True) -> None:
    """--policy, --policy-opt, --proxy-batch-size, --proxy-steps and (`tokens`) --proxy-tokens (zoo.policy); `what`:
    what the policy does here."""
    g = p.add_argument_group("scaling policy (batch size, horizon, weight decay)")
    g.add_argument("--policy", type=nonempty, help=f"the scaling policy that {what}: none, sde, timescale, fitted "
                   "(with --policy-opt law=FIT/law.json), a registered name or module:Class (default: none)")
    g.add_argument("--policy-opt", action=KeyValues, type=kv, metavar="K=V", help="policy option, repeatable (e.g. "
                   "betas=all)")
    g.add_argument("--proxy-batch-size", type=positive, help="the proxy's batch size (default: the target's)")
    g.add_argument("--proxy-steps", type=positive, help="the proxy's horizon in steps (default: the target's)")
    if tokens:
        g.add_argument("--proxy-tokens", type=positive, help="the proxy's horizon in tokens (examples for a model "
                       "that is not a language model), in place of --proxy-steps: steps = tokens / (batch x context), "
                       "rounded down")


def proxy_steps(args: argparse.Namespace, run: Any) -> int | None:
    """--proxy-steps, or --proxy-tokens over the proxy's tokens per step (its batch times the context of a language
    model's data, zoo.config.RunConfig `run`; one per example otherwise); None when neither is given."""
    if args.proxy_tokens is None:
        return args.proxy_steps
    if args.proxy_steps is not None:
        raise ValueError("--proxy-steps and --proxy-tokens exclude each other: give the proxy's horizon once")
    import dataclasses

    import zoo.models

    fields = {f.name for f in dataclasses.fields(zoo.models.config(run.model.name))}
    per_step = (args.proxy_batch_size or run.loop.batch_size) * (run.data.seq_len if "seq_len" in fields else 1)
    if args.proxy_tokens < per_step:
        raise ValueError(f"--proxy-tokens {args.proxy_tokens} is less than one step of the proxy ({per_step} tokens)")
    return args.proxy_tokens // per_step


def check_proxy_needs_policy(args: argparse.Namespace, policy: Any) -> None:
    """--proxy-batch-size, --proxy-steps and --proxy-tokens name the proxy a --policy maps from: without a policy
    nothing reads them (where the proxy itself trains, zoo.transfer, they need none)."""
    given = [f"--{name.replace('_', '-')}" for name in ("proxy_batch_size", "proxy_steps", "proxy_tokens")
             if getattr(args, name, None) is not None]
    if policy is None and given:
        raise ValueError(f"{given[0]} is the proxy a --policy maps from, and there is no --policy: give one (e.g. "
                         "--policy sde), or leave it out")


def policy_of(args: argparse.Namespace, optimizer: str) -> Any:
    """The policy of the parsed flags (None when neither --policy nor --policy-opt is given); an option
    `optimizer` does not read is refused (zoo.policy.base.ScalingPolicy.check)."""
    import zoo.policy

    options = dict(args.policy_opt or [])
    if args.policy is None and not options:
        return None
    policy = zoo.policy.get(args.policy or "none", **options)
    policy.check(optimizer, set(options))
    return policy


def add_compile_cache(p: argparse.ArgumentParser) -> None:
    """--compile-cache DIR|off, the flag of every command that compiles (zoo.train.compile_cache)."""
    p.add_argument("--compile-cache", type=path_arg, metavar="DIR|off",
                   help="JAX's persistent compile cache: a rerun, or a run of the same shapes, loads its programs "
                   "instead of compiling them; off: none (default: $JAX_COMPILATION_CACHE_DIR, else $ZOO_CACHE/jax "
                   "or ~/.cache/zoo/jax)")
