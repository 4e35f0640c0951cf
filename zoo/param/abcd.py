"""General abcd-parametrization (TP IVb Def 2.2.1) with user-given exponents per kind and depth exponents.

Each kind not given keeps the SP exponents. Exponents come from the CLI (`--param-opt hidden=0,0.5,1,1`)
or from a JSON/YAML file (`--param-opt file=rules.yaml`, a mapping kind -> [a, b, c, d]). Under Muon a parameter's LR
exponent is the spectral map c - k/2 of its c (zoo.param.families), which gives it the ||dW||_* scaling of Adam's
exponent c; `global_lr=true` takes c itself under every optimizer family, as `sp` does: with SP's exponents that is
`sp` under Muon too.
"""

import dataclasses
import math
from typing import Any

from zoo.param.base import SP_TABLE, Parametrization
from zoo.param.tags import KINDS
from zoo.schema import to_float


def _exponents(value) -> tuple:
    """a,b,c,d from "a,b,c,d" or a list; plain numbers must be finite, and true/false is no number (YAML reads `true`
    as 1); traced values pass as they are."""
    if isinstance(value, str):
        try:
            value = [to_float(v.strip()) for v in value.split(",")]
        except ValueError:
            value = [value]
    if isinstance(value, dict) or not hasattr(value, "__len__") or len(value) != 4 or any(
            isinstance(v, (bool, int, float, str)) and (isinstance(v, (bool, str)) or not math.isfinite(v))
            for v in value):
        raise ValueError(f"abcd exponents need four numbers a,b,c,d (finite), got {value!r}")
    return tuple(value)


@dataclasses.dataclass(frozen=True)
class ABCD(Parametrization):
    name = "abcd"
    input: Any = None
    hidden: Any = None
    output: Any = None
    vector: Any = None
    scalar: Any = None
    attn_exp: Any = 0.5
    global_lr: bool = False  # the table's c under every optimizer family, as sp's class rule states it
    file: str | None = None

    def __post_init__(self):
        given = {}
        if self.file is not None and not str(self.file).strip():  # an unset shell variable: not SP's table silently
            raise ValueError("abcd: file= names no file (an empty path); give a JSON or YAML file of kind -> a,b,c,d")
        if self.file:
            given.update(_load(self.file))
        given.update({k: getattr(self, k) for k in KINDS if getattr(self, k) is not None})
        for kind, value in given.items():
            if kind not in KINDS:
                raise ValueError(f"unknown kind {kind!r} in abcd exponents; kinds are {', '.join(KINDS)}")
            object.__setattr__(self, kind, _exponents(value))

    def recorded_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """A file's exponents in place of its path: a resume or fork trains under the rules the run started with,
        and one whose file was edited or removed meanwhile is no other run, silently."""
        if not options.get("file"):
            return options
        kept = {k: v for k, v in options.items() if k != "file" and k not in KINDS}
        return {**kept, **{k: list(getattr(self, k)) for k in KINDS if getattr(self, k) is not None}}

    def abcd(self, tag):
        given = getattr(self, tag.kind)
        return given if given is not None else SP_TABLE[tag.kind]

    @property
    def attn_exponent(self) -> Any:
        return self.attn_exp


def _load(path: str) -> dict:
    """The mapping kind -> [a, b, c, d] of a JSON or YAML file, read as config files are (zoo.settings_file: a key
    given twice is refused, 1e-3 is a number); a file that does not parse is one line naming it."""
    from zoo import settings_file

    data = settings_file.load(path, "abcd exponents file")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping kind -> [a, b, c, d]")
    return data
