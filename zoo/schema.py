"""Typed settings: one declaration per setting gives its flag, its help, its type, its range and whether it is
part of a run's identity, so the command line, config files, `--help` and the checks share one definition.

    lr: float = setting(1e-3, "peak learning rate", check=POSITIVE)

Every float is also checked to be finite (nan and inf are never a valid setting) and to keep its meaning in float32,
and every integer but a seed to fit in int32 (JAX holds steps and counts as int32: a bigger one fails inside the
jitted step).
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

import numpy as np

Check = tuple[Callable[[Any], bool], str]
POSITIVE: Check = (lambda v: v > 0, "must be positive")
NON_NEGATIVE: Check = (lambda v: v >= 0, "must be >= 0")
FRACTION: Check = (lambda v: 0 <= v <= 1, "must be in [0, 1]")
BETA: Check = (lambda v: 0 <= v < 1, "must be in [0, 1)")
# JAX (without x64) keeps a seed's low 32 bits: PRNGKey(2^32) is PRNGKey(0), the same init under another number
SEED: Check = (lambda v: 0 <= v < 2**32, "must be in [0, 2^32)")
INT32_MAX = 2**31 - 1
MAX_SEEDS = 1024  # seeds averaged or swept: their mean's error is 3% of one seed's spread at 1024; more is a typo


def option_fields(where: str, cls: type, given: Any, flag: str) -> dict[str, dataclasses.Field]:
    """The options of `where` (a plugin's, a policy's or a model's config dataclass `cls`) by name; ValueError
    naming those of `given` it lacks, and the command line's `flag` that gives options."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if unknown := sorted(set(given) - set(fields)):
        options = f"its options ({flag} K=V) are {', '.join(fields)}" if fields else f"it takes no {flag}"
        raise ValueError(f"{where} has no option {', '.join(map(repr, unknown))}; {options}")
    return fields


def setting(default: Any, help: str, *, identity: bool = True, flag: str | None = None, metavar: str | None = None,
            shown: str | None = None, check: Check | None = None, choices: tuple[str, ...] | None = None) -> Any:
    """A dataclass field with its metadata: `flag` (default: the field's name), whether it is part of the run's
    identity, how --help shows its default (`shown`), a range `check` and the `choices` of a string."""
    kwargs = {"default_factory": dict} if default == {} else {"default": default}
    return dataclasses.field(**kwargs, metadata={"help": help, "identity": identity, "flag": flag,
                                                 "metavar": metavar, "shown": shown, "check": check,
                                                 "choices": choices})


def flag_name(f: dataclasses.Field) -> str:
    """The setting's name on the command line and in flat config files (underscores; `--` + dashes as a flag)."""
    return f.metadata.get("flag") or f.name


def base_type(hint: Any) -> type:
    """int for `int | None`, dict for `dict[str, Any]`, ..."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(t for t in typing.get_args(hint) if t is not type(None))
    return typing.get_origin(hint) or hint


TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a mapping",
              tuple: "a list"}


def check_type(where: str, value: Any, hint: Any) -> Any:
    """`value` checked against a type hint (int, float, str, bool, dict, tuple, X | None); ints pass as floats,
    and a float must be finite."""
    if value is None and (hint is None or type(None) in typing.get_args(hint)):
        return None
    base = base_type(hint)
    ok = {bool: lambda v: isinstance(v, bool),
          int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str),
          dict: lambda v: isinstance(v, dict),
          tuple: lambda v: isinstance(v, (list, tuple))}.get(base, lambda v: True)
    if not ok(value):
        raise ValueError(f"{where} must be {TYPE_NAMES[base]}, got {value!r}")
    if base is float and not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    return float(value) if base is float else tuple(value) if base is tuple else value


def from_text(where: str, text: str, hint: Any) -> Any:
    """A command-line string as the type `hint` asks for: numbers, true/false, comma lists for tuples of ints."""
    base = base_type(hint)
    if text.lower() in ("none", "null") and type(None) in typing.get_args(hint):
        return None
    try:
        if base is bool:
            value = {"true": True, "1": True, "yes": True, "on": True,
                     "false": False, "0": False, "no": False, "off": False}[text.lower()]
        elif base is int:
            value = to_int(text)
        elif base is float:
            value = to_float(text)
        elif base is tuple:
            value = tuple(to_int(v) for v in text.split(","))
        else:
            value = text
    except (KeyError, ValueError):
        what = "integers a,b,c" if base is tuple else TYPE_NAMES.get(base, base.__name__)
        raise ValueError(f"{where} must be {what}, got {text!r}") from None
    if base is float and not math.isfinite(value):  # as typed: 1e400 reads as inf
        raise ValueError(f"{where} must be a finite number, got {text!r}")
    return check_type(where, value, hint)


def stored_form(values: dict[str, Any]) -> dict[str, Any]:
    """Typed options as a settings file holds them: JSON's forms (tuples as lists), None as the text "none" (which
    `from_text` reads back as None; a file's null is refused)."""
    return {k: "none" if v is None else v for k, v in json.loads(json.dumps(values)).items()}


def compute_dtype(precision: str) -> str:
    """The dtype a model computes in under --precision (f32 or bf16; parameters stay float32)."""
    return "bfloat16" if precision == "bf16" else "float32"


def typed_number(text: str) -> bool:
    """Whether `text` is written as a user types a number: ASCII, without underscores. Python's int() and float()
    also read any Unicode digit ('١' (Arabic-Indic one) and '１' (full-width) are 1) and '1_0' as 10, which no user
    means as a setting."""
    return text.isascii() and "_" not in text


def to_int(text: str) -> int:
    """An integer in ASCII digits with an optional sign (int() on `typed_number` text); ValueError otherwise."""
    if not typed_number(text):
        raise ValueError(f"not an ASCII integer: {text!r}")
    return int(text)


def to_float(text: str) -> float:
    """A number in ASCII (digits, sign, point, exponent; float() on `typed_number` text), or a power of two written
    2^x (as --lrs takes an LR: `--lr 2^-9`); ValueError otherwise."""
    if not typed_number(text):
        raise ValueError(f"not an ASCII number: {text!r}")
    if text.strip().startswith("2^"):
        try:
            return 2.0 ** float(text.strip()[2:])
        except OverflowError:
            raise ValueError(f"{text!r} is beyond float64's range") from None
    return float(text)


def comma_items(text: str, what: str) -> list[str]:
    """The entries of the comma list `what` (a flag or option), stripped; ValueError where one is empty (`1e-3,,2e-3`
    or `64,128,`: a value left out, which a reader that skipped it would silently drop)."""
    items = [part.strip() for part in text.split(",")]
    if not all(items):
        raise ValueError(f"{what} {text!r} has an empty entry: give a value between every two commas")
    return items


def digits(text: str) -> bool:
    """Whether `text` is a non-negative integer in ASCII digits, which int() reads: str.isdigit also takes '²'
    and other digit-like characters that int() refuses."""
    return text.isascii() and text.isdigit()


def utf8(text: str) -> bool:
    """Whether `text` is UTF-8 text: a command-line argument of other bytes arrives with surrogate escapes, which
    a path can hold but orbax's C++ code and JSON files cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def not_utf8(text: str) -> str:
    """Why `text` (not `utf8`) is refused: other bytes than UTF-8, or UTF-8 bytes this Python decoded in an ASCII
    locale (LC_ALL=POSIX without PYTHONUTF8), which it cannot hand on as text."""
    encoding = sys.getfilesystemencoding()
    try:
        os.fsencode(text).decode("utf-8")
    except UnicodeDecodeError:
        return f"must be UTF-8 text (checkpoints and config files hold only that), got {text!r}"
    return (f"is UTF-8, but this Python reads its arguments as {encoding} (the locale's): run it with "
            f"PYTHONUTF8=1 or under a UTF-8 locale (LANG=C.UTF-8), got {text!r}")


F32_TINY, F32_MAX = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)


def check_float32(name: str, value: float, check: Check | None) -> None:
    """A float setting keeps its meaning in float32, the precision JAX computes it in: --b1 0.9999999999999999 is
    1.0 there (Adam's bias correction divides by 0: nan at step 2), --eps 1e-50 is 0, and a number below float32's
    smallest normal one computes as 0 (XLA flushes subnormals) or beyond its largest as inf."""
    tiny, big = F32_TINY, F32_MAX
    if value != 0 and not tiny <= abs(value) <= big:
        where = f"below float32's smallest normal number {tiny:.3g}" if abs(value) < tiny else \
            f"beyond float32's largest number {big:.3g}"
        raise ValueError(f"{name} {value!r} is {where}; JAX computes it in float32, where it would be "
                         f"{'0' if abs(value) < tiny else 'inf'}")
    rounded = float(np.float32(value))
    if check and not check[0](rounded):
        raise ValueError(f"{name} {check[1]} as a float32, which JAX computes it in: {value!r} rounds to {rounded!r}")


def check_settings(obj: Any, prefix: str = "--") -> None:
    """Every field of a settings dataclass against its type and range (`setting(check=..., choices=...)`)."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        name = prefix + flag_name(f).replace("_", "-") if prefix == "--" else prefix + f.name
        value = check_type(name, getattr(obj, f.name), hints[f.name])
        choices, check = f.metadata.get("choices"), f.metadata.get("check")
        if value is None:
            continue
        if isinstance(value, str) and not value.strip():
            raise ValueError(f"{name} must not be empty")
        if isinstance(value, str) and not utf8(value):
            raise ValueError(f"{name} {not_utf8(value)}")
        if choices and value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        if check and not check[0](value):
            raise ValueError(f"{name} {check[1]}, got {value!r}")
        if type(value) is float:
            check_float32(name, value, check)
        if type(value) is int and check is not SEED and value > INT32_MAX:
            raise ValueError(f"{name} must be at most 2^31 - 1 (an int32), got {value}")



def power(ratio: Any, exponent: Any, what: str) -> Any:
    """ratio^exponent. Where both are numbers (not a sweep's traced values), one that float32 does not hold as a
    positive normal number (beyond 3.4e38 inf, below 1.2e-38 0: the model computes in it) is a ValueError naming
    `what`, not Python's OverflowError or a silent inf or 0 in the model."""
    if not all(isinstance(v, numbers.Real) for v in (ratio, exponent)):
        return ratio ** exponent
    try:
        value = float(ratio) ** float(exponent)
    except OverflowError:
        value = math.inf
    if not F32_TINY <= value <= F32_MAX:
        raise ValueError(f"{what} is {float(ratio):g}^{float(exponent):g} = {value:g}, outside float32's range (the "
                         "model computes in it)")
    return value
