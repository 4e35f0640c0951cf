"""The member grid of a sweep: learning rates (a comma list or a log2 range) times seeds."""

from __future__ import annotations

import math

import numpy as np


def _number(text: str) -> float:
    """A float, or 2^x written as `2^x`."""
    text = text.strip()
    if text.startswith("2^"):
        return 2.0 ** float(text[2:])
    return float(text)


def parse_lrs(text: str) -> list[float]:
    """`1e-3,3e-3,2^-8` (a list) or `2^-12:2^-4:1` (log2 start:stop:step, stop included) -> learning rates."""
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) != 3:
                raise ValueError
            start, stop = (math.log2(_number(p)) if p.strip().startswith("2^") else float(p) for p in parts[:2])
            step = float(parts[2])
            if step <= 0 or stop < start:
                raise ValueError
            count = int(math.floor((stop - start) / step + 1e-9)) + 1
            lrs = [2.0 ** (start + i * step) for i in range(count)]
        else:
            lrs = [_number(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"cannot read learning rates {text!r}; give a comma list (1e-3,2^-8) "
                         "or a log2 range start:stop:step (2^-12:2^-4:1)") from None
    if not lrs or any(not (lr > 0 and math.isfinite(lr)) for lr in lrs):
        raise ValueError(f"learning rates must be positive and finite, got {text!r}")
    return sorted(set(lrs))


def parse_ints(text: str, what: str) -> list[int]:
    """`64,128,256` -> [64, 128, 256] (positive integers)."""
    try:
        values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"{what} must be a comma list of integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise ValueError(f"{what} must be positive integers, got {text!r}")
    return sorted(set(values))


def members(lrs: list[float], seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (lr, seed) pair, LR-major: arrays lr [K] (float32) and seed [K] (int32), K = len(lrs) * seeds."""
    lr = np.repeat(np.asarray(lrs, np.float64), seeds)
    seed = np.tile(np.arange(seeds, dtype=np.int32), len(lrs))
    return lr, seed


def lr_key(lr: float) -> float:
    """A rounded log2 LR, to match members across runs of a sweep."""
    return round(math.log2(lr), 6)
