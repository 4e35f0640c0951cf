"""What theory says each audited quantity of a parameter does across widths and depths: a log-law
log q = law(size) + const. Made from the plugin's *stated* rules only (its abcd table, its LR exponent per optimizer
family, alpha and gamma) and the kind the parameter's shapes give it (TP IVb Defs 2.9.11/2.9.12), never from the
plugin's realized methods (init_std, multiplier, lr_mult, grad_scale, wd_mult) nor from the tag: those are what the
audit checks. With m = n / n0, r = L / L0 (r = 1 outside residual branches) and (a, b, c, d) the kind's exponents:

    judged (the law holds at any width, so a finite-size transient cannot fail a correct run)
    multiplier        m^-a                      the realized one: the variable's value to the power with which the
                                                forward pass applies it
    init_rms          m^-(a+b)                  effective weight: multiplier times parameter
    update_rms        m^-(a+c) r^-gamma         entrywise family: Adam's first step is lr sign(g)
    spectral_step     m^-(a+c_muon) r^-gamma    spectral family: effective update per unit of Muon's Newton-Schulz
                                                output (whose singular values are about 1: the update's ||.||*);
                                                c_muon = c - k/2, k the kind's width axes (c under sp's global LR)
    step_size         m^-(a+c-d) r^(alpha-gamma)   sgd family: effective update per unit of raw gradient
    wd_shrink         m^0 r^0                   decoupled weight decay (TP IVb 2.10.1)
    eps_scale         m^-d r^-alpha             Adam's epsilon in raw-gradient units, eps |g| / sqrt(v) (Rem 2.2.6)
    frozen            0                         a kind the plugin's `freeze` lists: no update and no decay at any size
                                                (in place of the update's and the shrink's laws)

    (step_size and eps_scale are read from the chain's first update of a tiny multiple of the gradient, which
    global-norm clipping never touches: the clip factor depends on the gradient's size, not on a rule)

    reported with theory's asymptotic law (the first two carry the gradient's own size, whose finite-width transients
    are large: muP's logits shrink like m^-1/2 towards their limit 0, and with them a GPT's gradients at small widths;
    the edge of an iid matrix's spectrum is reached slowly when one side is small, 8 x n inputs)
    update_rms        m^-(a+c-d+d*) r^-gamma    sgd family: the LR m^(d-c) times a gradient of size m^-d*
    eps_ratio         m^(d*-d)                  Adam's epsilon against sqrt(v): a faithful plugin keeps it constant
    clip_factor       m^0                       the real step's global-norm clip factor (1 unclipped): the faithful
                                                gradients' entries are Theta(1), so a threshold scaled as their count
                                                keeps it width-independent
    init_spectral     m^-(a+b) (sqrt(fan_in) + sqrt(fan_out))   an iid matrix's largest singular value
    update_spectral   m^-(a+c_muon) r^-gamma    spectral family: the same, times the Newton-Schulz output's top
                                                singular value, which lands anywhere in about [0.7, 1.2]

d* is the faithful pre-scale (TP IVb Lemma 2.8.11): the gradient of a parameter before the readout has entries
m^-(a + a_out + b_out), the readout's m^-a_out, the readout's bias m^0. A scalar's sums over the width the backprop
m^-(a_out + b_out) times features: coherently (m^1) only over their part aligned with the readout, m^-r (r the
smallest feature exponent of the other kinds, TP IVb Def 2.8.5), the rest a central-limit sum (m^1/2), so
d* = a + a_out + b_out - max(1/2, 1 - r) (zoo.param.predict's: muP 1, as a coherent sum; NTK, whose features move
like m^-1/2, 1/2: its readout stays at its random init and the sum is the logits' own CLT sum, m^0). A sum of n
entries is at most m^1 times one: an unstable plugin's r < 0 (sp's under Adam) counts as 0, a coherent sum.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping
from typing import Any

from zoo.param import families, predict
from zoo.param.base import Parametrization
from zoo.param.families import MATRIX_KINDS
from zoo.param.tags import Tag

# how often a folded multiplier f enters each quantity: init and update f, SGD's step f^2 (LR and pre-scale), the
# epsilon in raw-gradient units f^-1 (the pre-scale)
FOLD_POWER = {"init_rms": 1, "init_spectral": 1, "update_rms": 1, "update_spectral": 1, "spectral_step": 1,
              "step_size": 2,
              "eps_scale": -1, "eps_ratio": -1}
QUANTITIES = ("multiplier", "init_rms", "init_spectral", "update_rms", "update_spectral", "spectral_step",
              "step_size", "wd_shrink", "eps_scale", "eps_ratio", "clip_factor")
ADAM_EPSILON = ("adam", "adamw", "muon")  # optimizers whose entrywise part divides by sqrt(v) + eps
# the quantities of a parameter's move: a frozen one (the plugin's `freeze`) has no law for them but that it does not
# move (zoo.audit.judge.frozen_check)
MOVES = ("update_rms", "update_spectral", "spectral_step", "step_size", "wd_shrink")


@dataclasses.dataclass(frozen=True)
class Facts:
    """One parameter at one size, as the laws need it: its tag, the kind its shapes give it, its optimizer family,
    whether it sits in a residual branch, and its fans."""

    tag: Tag
    kind: str
    family: str
    branch: bool
    fold: float = 0.0  # log of multipliers folded into the parameter beyond m^-a (multiplier-free forms)
    aligned: float = 0.0  # r of the features a scalar's gradient sums over (aligned_exponent)


def judged(quantity: str, facts: Facts, optimizer: str) -> bool:
    """Whether `quantity` is judged for this parameter (module docstring)."""
    if quantity == "update_rms":
        return facts.family == "adam"
    if quantity == "spectral_step":
        return facts.family == "spectral"
    if quantity == "step_size":
        return facts.family == "sgd"
    if quantity == "eps_scale":
        return facts.family == "adam" and optimizer in ADAM_EPSILON
    return quantity in ("multiplier", "init_rms", "wd_shrink")


def has_law(quantity: str, facts: Facts, optimizer: str) -> bool:
    """Whether theory gives `quantity` a law here: the judged ones and the reported ones of the docstring."""
    if quantity == "update_rms":
        return facts.family in ("adam", "sgd")
    if quantity in ("eps_ratio", "clip_factor"):
        return judged("eps_scale", facts, optimizer)
    if quantity == "init_spectral":
        return facts.kind in MATRIX_KINDS
    if quantity == "update_spectral":
        return facts.family == "spectral"
    return judged(quantity, facts, optimizer)


def log_law(quantity: str, plugin: Parametrization, facts: Facts) -> float:
    """log q at this size, up to a constant that does not change with size."""
    return unfolded_law(quantity, plugin, facts) + FOLD_POWER.get(quantity, 0) * facts.fold


def unfolded_law(quantity: str, plugin: Parametrization, facts: Facts) -> float:
    """The law of the module docstring, before any folded multiplier."""
    tag = dataclasses.replace(facts.tag, kind=facts.kind)
    a, b, c, d = (float(v) for v in plugin.abcd(tag))
    log_m = math.log(tag.width_mult)
    log_r = math.log(tag.depth / tag.base_depth) if facts.branch else 0.0
    alpha, gamma = (float(v) for v in depth_exponents(plugin))
    if quantity == "multiplier":
        return -a * log_m
    if quantity == "init_rms":
        return -(a + b) * log_m
    if quantity == "init_spectral":
        return -(a + b) * log_m + math.log(math.sqrt(tag.fan_in) + math.sqrt(tag.fan_out))
    if quantity == "update_rms":
        ce = c - d + faithful_d(plugin, tag, facts.aligned) if facts.family == "sgd" else c
        return -(a + ce) * log_m - gamma * log_r
    if quantity in ("update_spectral", "spectral_step"):
        return -(a + spectral_c(plugin, c, tag.kind)) * log_m - gamma * log_r
    if quantity == "step_size":
        return -(a + c - d) * log_m + (alpha - gamma) * log_r
    if quantity == "wd_shrink":
        return 0.0
    if quantity == "eps_scale":
        return -d * log_m - alpha * log_r
    if quantity == "eps_ratio":
        return (faithful_d(plugin, tag, facts.aligned) - d) * log_m
    if quantity == "clip_factor":
        return 0.0
    raise ValueError(f"unknown quantity {quantity!r}; quantities are {', '.join(QUANTITIES)}")


def spectral_c(plugin: Parametrization, c: float, kind: str) -> float:
    """The Muon LR exponent theory gives a kind of adam exponent c (spectral_optimizers.md section 2): the spectral
    map c - k/2, or c itself under a plugin stated as one global LR (sp; zoo.param.families.lr_exponent, whose rule
    the coordinate check's predictions read too); from the table, never from the plugin's lr_exponent, which is
    what the optimizer builder realizes."""
    return families.lr_exponent(c, kind, "spectral", plugin.global_lr)


def frozen(plugin: Parametrization, kind: str) -> bool:
    """Whether the plugin's stated `freeze` list holds parameters of `kind` (a multiplier-free form keeps its
    plugin's)."""
    return kind in plugin.frozen_kinds()


def depth_exponents(plugin: Parametrization) -> tuple[Any, Any]:
    """(alpha, gamma) of a plugin; a multiplier-free form keeps its plugin's."""
    rules = getattr(plugin, "plugin", None) or plugin
    return rules.alpha, rules.gamma


def free_multiplier_law(plugin: Parametrization, rule: Mapping[str, Any]) -> float:
    """log of a forward multiplier that sits on no parameter of its own, up to a constant that does not change with
    size, from the stated rule it applies (the multiplier's `rule` metadata, zoo.audit.probe.free_multipliers):

    branch     a (L / L0)^-alpha              a residual branch's (Depth-muP eq. (1); TP VI Def 6.1)
    attention  s d0^(e - 1/2) / d^e           the attention logits' q.k / d_head^e (e: the plugin's attn_exponent)
    tied       m^-(a_out + theta)             a readout tied to an input table: the output rule gauge-shifted onto
                                              the table's init (Parametrization.tied_exponent)
    """
    kind = rule["rule"]
    if kind == "branch":
        return -float(depth_exponents(plugin)[0]) * math.log(rule["depth"] / rule["base_depth"])
    if kind == "attention":
        return -float(plugin.attn_exponent) * math.log(rule["head_dim"])
    if kind == "tied":
        readout = rule["tag"]
        return -float(plugin.tied_exponent(readout, rule["ties"])) * math.log(readout.width_mult)
    raise ValueError(f"unknown multiplier rule {kind!r}; rules are branch, attention, tied")


def faithful_d(plugin: Parametrization, tag: Tag, aligned: float = 0.0) -> float:
    """d* of TP IVb Lemma 2.8.11: minus the width exponent of the gradient's entries; a scalar's with `aligned` the
    feature exponent r of its sum's coherent part (module docstring; 0, a coherent sum, where not given; r < 0 as
    0)."""
    a = float(plugin.abcd(tag)[0])
    out = plugin.abcd(dataclasses.replace(tag, kind="output"))
    a_out, b_out = float(out[0]), float(out[1])
    if tag.kind == "output":
        return a_out
    if tag.kind == "scalar":
        return 0.0 if tag.role.startswith("readout") else a + a_out + b_out - min(1.0, max(0.5, 1.0 - aligned))
    return a + a_out + b_out


def aligned_exponent(plugin: Parametrization, tag: Tag, optimizer: str, muon_io: bool,
                     kinds: Collection[str]) -> float:
    """r (TP IVb Def 2.8.5) of the features a scalar's gradient sums over: the smallest over the model's `kinds`
    that train, but the readout and the scalars (zoo.param.predict.feature_exponents, from the stated table and
    Muon exponents); 0 where none trains."""
    def abcd(kind: str) -> tuple:
        return plugin.abcd(dataclasses.replace(tag, kind=kind, role=""))

    r = predict.feature_exponents(abcd, optimizer, kinds, lambda k: spectral_c(plugin, float(abcd(k)[2]), k),
                                  muon_io, plugin.frozen_kinds())
    return min((v for k, v in r.items() if k not in ("output", "scalar")), default=0.0)
