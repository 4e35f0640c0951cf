"""The member grid of a sweep: learning rates (a comma list or a log2 range) times seeds."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from zoo.schema import F32_MAX, F32_TINY, INT32_MAX, MAX_SEEDS, comma_items, to_float, to_int

MAX_LRS = 1024  # LRs in one sweep: a finer range is a typo (2^-12:2^-4:1e-6 would be 8 million programs)
LR_RANGE = (F32_TINY, F32_MAX)


def parse_lrs(text: str) -> list[float]:
    """`1e-3,3e-3,2^-8` (a list) or `2^-12:2^-4:1` (log2 start:stop:step, stop included) -> learning rates."""
    bad = ValueError(f"cannot read learning rates {text!r}; give a comma list (1e-3,2^-8) or a log2 range "
                     "start:stop:step (2^-12:2^-4:1)")
    if ":" not in text:
        parts = comma_items(text, "the learning rates")
        try:
            lrs = [to_float(p) for p in parts]
        except (ValueError, OverflowError):
            raise bad from None
        return valid_lrs(lrs, repr(text))
    parts = text.split(":")
    try:
        if len(parts) != 3:
            raise ValueError
        start, stop = (math.log2(to_float(p)) if p.strip().startswith("2^") else to_float(p) for p in parts[:2])
        step = to_float(parts[2])
    except (ValueError, OverflowError):
        raise bad from None
    if not (math.isfinite(start) and math.isfinite(stop) and math.isfinite(step)):
        raise bad
    if step <= 0 or stop < start:  # the generic line did not say which: 2^-4:2^-12:1 read as unreadable
        a, b, c = (p.strip() for p in parts)
        low, high = (b, a) if stop < start else (a, b)
        up = c if step > 0 else f"{-step:g}" if step < 0 else "1"
        raise ValueError(f"the range of learning rates {text!r} must run upward by a positive log2 step (start <= "
                         f"stop, step > 0): give {low}:{high}:{up}")
    check_exponents(text, parts[:2], start, stop)
    if (stop - start) / step >= MAX_LRS:
        raise ValueError(f"the range {text!r} holds more than {MAX_LRS} learning rates; take a bigger step")
    span = (stop - start) / step
    if abs(span - round(span)) > 1e-9 * max(1.0, span):  # 2^-14:2^-4:0.3 ended at 2^-4.1 without a word
        raise ValueError(f"the range {text!r} does not reach its stop: {stop - start:g} / {step:g} = {span:.4g} steps; "
                         "give a step that divides stop - start (the stop is included)")
    count = round(span) + 1
    return valid_lrs([2.0 ** (start + i * step) for i in range(count)], repr(text))


def check_exponents(text: str, bounds: list[str], start: float, stop: float) -> None:
    """A range's bare bounds are log2 exponents: ones written as LRs are refused, those in scientific notation (no
    exponent needs it) or both between 0 and 1 (`1e-4:1e-2:1e-3` read as LRs 2^0.0001 .. 2^0.01, all about 1)."""
    bare = [b.strip() for b in bounds if not b.strip().startswith("2^")]
    if any("e" in b.lower() for b in bare) or (len(bare) == 2 and all(0 < float(b) < 1 for b in bare)):
        raise ValueError(f"the range {text!r} reads as log2 exponents {start:g} .. {stop:g} (LRs {2.0**start:.4g} .. "
                         f"{2.0**stop:.4g}); a range is log2 start:stop:step (2^-12:2^-4:1, or --lrs=-12:-4:1 with "
                         "the =): give LRs as a comma list")


def valid_lrs(lrs: list[float], what: str | None = None) -> list[float]:
    """The distinct learning rates, sorted: distinct in float32, as members hold them, and in `lr_key`, by which
    results are matched (1e-3 and 1.0000003e-3 are two float32s of one key: both trained, one was read back); each
    must be a positive normal float32, and there must be between 1 and MAX_LRS of them."""
    what = what or str(list(lrs))
    if not lrs:
        raise ValueError(f"no learning rates in {what}")
    if len(lrs) > MAX_LRS:
        raise ValueError(f"{what} holds {len(lrs)} learning rates, more than {MAX_LRS}")
    for lr in lrs:
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not LR_RANGE[0] <= lr <= LR_RANGE[1]:
            raise ValueError(f"learning rates must be positive and finite in float32 ({LR_RANGE[0]:.3g} to "
                             f"{LR_RANGE[1]:.3g}), got {lr!r} in {what}")
    distinct: dict[float, float] = {}  # by the float32 value a member holds: 1e-3 and 1.00000001e-3 are one member
    for lr in sorted(float(lr) for lr in lrs):
        distinct.setdefault(float(np.float32(lr)), lr)
    by_key: dict[float, float] = {}  # and by the key results are read back by
    for lr in distinct.values():
        by_key.setdefault(lr_key(lr), lr)
    return list(by_key.values())


def parse_ints(text: str, what: str) -> list[int]:
    """`64,128,256` -> [64, 128, 256] (positive integers)."""
    try:
        values = [to_int(p) for p in comma_items(text, what)]
    except ValueError:
        raise ValueError(f"{what} must be a comma list of integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise ValueError(f"{what} must be positive integers, got {text!r}")
    return sorted(set(values))


def check_positive(what: str, values: list[Any]) -> None:
    """Every value an integer >= 1 (a bool is not one)."""
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{what} must be a positive integer, got {v!r}")


def check_seeds(first: int, count: int, flag: str = "--seeds") -> None:
    """The member seeds first .. first + count - 1 fit in int32, in which members hold them, and there are at most
    MAX_SEEDS of them (2^31 seeds passed that check, and the process was killed for memory building its members)."""
    if first + count - 1 > INT32_MAX:
        raise ValueError(f"{flag} {count} from --seed {first} reaches seed {first + count - 1}; a sweep's seeds must "
                         "be at most 2^31 - 1 (members hold them as int32)")
    if count > MAX_SEEDS:
        raise ValueError(f"{flag} {count} is more than {MAX_SEEDS} seeds per learning rate (each is a member: a "
                         f"whole model trained); the mean over {MAX_SEEDS} is within 3% of one seed's spread already")


def members(lrs: list[float], seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (lr, seed) pair, LR-major: arrays lr [K] (float32) and seed [K] (int32), K = len(lrs) * seeds."""
    lr = np.repeat(np.asarray(lrs, np.float64), seeds)
    seed = np.tile(np.arange(seeds, dtype=np.int32), len(lrs))
    return lr, seed


def lr_key(lr: float) -> float:
    """A rounded log2 LR, to match members across runs of a sweep."""
    return round(math.log2(lr), 6)
