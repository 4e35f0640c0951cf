"""Critical initialization (Doshi, He, Gromov; seed_partial_jacobians.md sections 1, 2 and 7).

SP exponents with the init of the partial-Jacobian paper's eq. (1):

    hidden weights ~ N(0, sigma_w^2 / fan_in),   branch biases ~ N(0, sigma_b^2),   x <- mu x + branch(x)

(mu multiplies the skip path; mu = 0 is a plain MLP). Options left at None take the model's critical point, chi_J* = 1:
for the MLP-ResNet from the infinite-width theory of its block (zoo.param.mean_field_theory.critical_point: ReLU
sigma_w^2 = 2 and erf, tanh sigma_w^2 phi'(0)^2 = 1 at sigma_b = 0; GELU's half-stable point, (1.408, 0.416) without
mean subtraction as in the note and (1.415, 0.899) with the MLP-ResNet's default one, both of which need biases; pre-LN
without a residual sigma_b / sigma_w on its line); mu defaults to 1 with LayerNorm in the block (then every (sigma_w,
sigma_b) is critical, Thm 1.3, and sigma_w is the one at which the stream's variance doubles over the stack, so the
end-to-end APJN stays O(1) at any depth) and to 0 without. The transformers and the Mixer are pre-LN with mu = 1:
sigma_w = 1, sigma_b = 0. `report` gives the point and, for the MLP-ResNet, the infinite-width chi at its last block;
zoo.diagnostics.run_report adds the measured chi_hat, and a note where chi sits off 1 at the model's depth: chi* = 1
holds at infinite depth, and at a marginal fixed point (chi_K* = 1) chi reaches it only as a power law (GELU's
half-stable point: 0.976 to 0.978 at blocks 10 to 100 at infinite width; measured 0.944 +- 0.012 at width 256, 0.964 +-
0.004 at width 1024).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from zoo.param import mean_field_theory as theory
from zoo.param.base import SP_TABLE, Parametrization
from zoo.param.tags import Tag
from zoo.schema import F32_MAX, F32_TINY, check_float32


@dataclasses.dataclass(frozen=True)
class Critical(Parametrization):
    name = "critical"
    table = SP_TABLE
    global_lr = True  # an init on SP's exponents: SP's one LR under every optimizer
    no_depth_law = ("it puts (sigma_w, sigma_b, mu) at the edge of chaos at each depth and scales no update with depth "
                    "(python -m zoo.criticality measures its depth behaviour; depth_mup and completep have depth laws)")

    sigma_w: Any = None
    sigma_b: Any = None
    mu: Any = None

    def __post_init__(self):
        self.read_numbers("sigma_w", "sigma_b", "mu")
        if isinstance(self.init_mult, (int, float)) and self.init_mult != 1:
            raise ValueError("'critical' sets the init through sigma_w and sigma_b; init_mult does not apply")
        for option in ("sigma_w", "sigma_b", "mu"):
            value = getattr(self, option)
            if isinstance(value, (int, float)):  # traced values (a sweep's) pass as they are
                check_option(option, value)

    def init_std(self, tag: Tag, std0: float) -> Any:
        """sigma_w / sqrt(fan_in) on hidden and scalar-kind weights, sigma_b on residual-branch biases, SP's init
        elsewhere; 0 for readouts and queries under zero_init, as in every plugin."""
        if self.zeroed(tag):
            return 0.0
        weight = tag.kind == "hidden" or (tag.kind == "scalar" and not tag.role.endswith("_bias"))
        if weight:
            return _given(self.sigma_w, "sigma_w") * tag.fan_in**-0.5
        if tag.branch and tag.role.endswith("_bias") and tag.role != "norm_bias":
            return _given(self.sigma_b, "sigma_b")
        return super().init_std(tag, std0)

    def skip_multiplier(self) -> Any:
        return _given(self.mu, "mu")

    def check_model(self, model_name: str, cfg: Any) -> None:
        """sigma_b on a model without biases: it draws the residual branches' biases, and there are none."""
        if getattr(cfg, "bias", None) is False and isinstance(self.sigma_b, (int, float)) and self.sigma_b != 0:
            raise ValueError(f"critical: sigma_b={self.sigma_b:g} draws the residual branches' biases, and this "
                             f"{model_name} has none; leave it out, or build it with --model-opt bias=true")

    def for_model(self, model_name: str, cfg: Any) -> Critical:
        if all(v is not None for v in (self.sigma_w, self.sigma_b, self.mu)):
            return self
        residual_ln = getattr(cfg, "pre_ln", None)  # the model's config says whether its blocks are pre-LN
        if residual_ln is None and (self.sigma_w is None or self.mu is None):
            raise ValueError(f"the critical point of {model_name!r} is unknown: its config does not say whether its "
                             "residual blocks are pre-LayerNorm (a pre_ln attribute); give sigma_w and mu (mu = 0: no "
                             "skip path), and sigma_b where it has biases")
        mu = self.mu if self.mu is not None else (1.0 if residual_ln else 0.0)
        sigma_w, sigma_b = self.sigma_w, self.sigma_b
        if sigma_w is None and residual_ln and float(mu) ** 2 == 1.0:  # every init is critical (Thm 1.3)
            sb = 0.0 if sigma_b is None else float(sigma_b)
            sigma_w = (theory.residual_sigma_w(self._block(cfg), cfg.depth, sb, mu=float(mu))
                       if theory.describes(cfg) else 1.0)
        elif sigma_w is None and theory.describes(cfg):
            given = None if sigma_b is None else float(sigma_b)
            sigma_w, sigma_b = theory.critical_point(self._block(cfg), float(mu), given, bias=cfg.bias)
        elif sigma_w is None:
            raise ValueError(f"the critical point of {model_name!r} with mu={mu} has no closed form; give "
                             "sigma_w, or find it with `python -m zoo.criticality --find sigma_w`")
        elif sigma_b is None and theory.describes(cfg) and not (residual_ln and float(mu) ** 2 == 1.0):
            sigma_b = theory.sigma_b_on_line(self._block(cfg), float(sigma_w), float(mu), bias=cfg.bias)
        return dataclasses.replace(self, sigma_w=sigma_w, sigma_b=0.0 if sigma_b is None else sigma_b, mu=mu)

    def report(self, model_name: str, cfg: Any, **_: Any) -> dict[str, float]:
        """sigma_w, sigma_b, mu, and for the MLP-ResNet the infinite-width chi at its last block (the recursion from
        the input's Q = 1). Measuring chi_hat is zoo.diagnostics.run_report's."""
        bound = self.for_model(model_name, cfg)
        out = {"sigma_w": float(bound.sigma_w), "sigma_b": float(bound.sigma_b), "mu": float(bound.mu)}
        chis = bound.infinite_width_chis(model_name, cfg, cfg.depth)
        if chis is not None:
            out["chi_infinite_width"] = float(chis[-1])
        return out

    def infinite_width_chis(self, model_name: str, cfg: Any, depth: int, rtol: float | None = None) -> Any:
        """chi^l, l = 1..depth, of this (bound) point at infinite width from the input's Q = 1 (the recursion of
        zoo.param.mean_field_theory: shorter where the stream overflows, or with `rtol` where chi has converged), for
        a model whose blocks the theory follows (the MLP-ResNet); None for other models."""
        found = self.infinite_width(model_name, cfg, depth, rtol)
        return None if found is None else found[0]

    def infinite_width(self, model_name: str, cfg: Any, depth: int, rtol: float | None = None) -> Any:
        """(chi^l for l = 1..depth, the stream's second moment Q^l for l = 0..depth) as `infinite_width_chis` says;
        None for models the theory does not follow."""
        if not theory.describes(cfg):
            return None
        bound = self.for_model(model_name, cfg)
        return theory.recursion(bound._block(cfg), float(bound.sigma_w), float(bound.sigma_b), float(bound.mu),
                                depth, rtol=rtol)

    def _block(self, cfg: Any) -> theory.Block:
        return theory.Block.of(cfg, float(self.branch_multiplier(cfg.depth, cfg.base_depth or cfg.depth)))


RANGES = {"sigma_w": (lambda v: v > 0, "> 0"), "sigma_b": (lambda v: v >= 0, ">= 0"), "mu": (lambda v: v == v, "")}


def check_option(option: str, values: Any) -> None:
    """Every value of option sigma_w, sigma_b or mu (a number, or a grid's array of them) in its range: the init
    std sigma_w > 0 and sigma_b >= 0 (eq. 1), and each of the three a number float32 keeps (the model computes in
    it: beyond 3.4e38 it is inf, below 1.2e-38 it is 0)."""
    where = f"option {option} of 'critical'"
    values = np.ravel(np.asarray(values, np.float64))
    ok, bound = RANGES[option]
    bad = values[~ok(values)]
    if bad.size:
        raise ValueError(f"{where} must be {bound}, got {bad[0]}" if bound else f"{where} must be a number, got nan")
    bad = values[(values != 0) & ~((np.abs(values) >= F32_TINY) & (np.abs(values) <= F32_MAX))]
    if bad.size:
        check_float32(where, float(bad[0]), None)


def _given(value: Any, option: str) -> Any:
    if value is None:
        raise ValueError(f"critical: {option} is unset; build the model with zoo.models.create (which fills in the "
                         f"model's critical point) or pass {option}")
    return value
