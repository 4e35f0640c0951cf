"""Optimizer families: how an optimizer normalises a parameter's update, which decides the LR exponent that gives a
parametrization's width scaling (spectral_optimizers.md section 2; TP IVb section 2.1).

    adam       entrywise-normalised updates, entries Theta(lr): adam, adamw, lion, adafactor; in a Muon run the
               vectors, the scalars and (unless muon_io) the input and output layers
    sgd        linear in the gradient: sgd, momentum (TP IVb Remark 2.2.4: the LR is m^(d-c) through the pre-scale)
    spectral   Newton-Schulz-orthogonalised momentum, singular values about 1 (Muon on the matrices)

A parameter with k width axes (WIDTH_AXES) and an entrywise update of size lr has ||dW||_* ~ m^(k/2) lr (a near
low-rank sign pattern); a spectral update has ||dW||_* ~ lr whatever the shape. So the spectral LR exponent that
reproduces an Adam exponent c is c - k/2.
"""

from __future__ import annotations

SGD_LIKE = ("sgd", "momentum")
ENTRYWISE = ("adam", "adamw", "lion", "adafactor")
SPECTRAL = ("muon",)
OPTIMIZERS = (*SGD_LIKE, *ENTRYWISE, *SPECTRAL)
FAMILIES = ("adam", "sgd", "spectral")
WIDTH_AXES = {"input": 1, "hidden": 2, "output": 1, "vector": 1, "scalar": 0}
MATRIX_KINDS = ("input", "hidden", "output")


def spectral_exponent(c: float, kind: str) -> float:
    """The Muon LR exponent that gives a parameter of `kind` the ||dW||_* scaling of an entrywise LR exponent c:
    c - k/2, k its width axes (module docstring)."""
    return c - WIDTH_AXES[kind] / 2


def lr_exponent(c: float, kind: str, family: str, global_lr: bool = False) -> float:
    """The LR exponent a table's Adam exponent c states for a parameter of `kind` under an optimizer family: c for adam
    and sgd (SGD's m^(d-c) comes through the gradient pre-scale), the spectral map c - k/2 for spectral, and c under
    every family for a plugin stated as one global LR (sp). The rule both the optimizer builder's default and the
    checks (zoo.audit, zoo.coord_check) read."""
    if family not in FAMILIES:
        raise ValueError(f"unknown optimizer family {family!r}; families are {', '.join(FAMILIES)}")
    return spectral_exponent(c, kind) if family == "spectral" and not global_lr else c


def family(optimizer: str, kind: str, muon_io: bool = False) -> str:
    """The family of a parameter of `kind` under `optimizer`: Muon takes the hidden matrices (and with muon_io the
    input and output layers too); vectors and scalars keep the entrywise rule."""
    if optimizer in SGD_LIKE:
        return "sgd"
    if optimizer in ENTRYWISE:
        return "adam"
    if optimizer not in SPECTRAL:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose from {', '.join(OPTIMIZERS)}")
    spectral = kind == "hidden" or (muon_io and kind in MATRIX_KINDS)
    return "spectral" if spectral else "adam"
