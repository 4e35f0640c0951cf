"""Critical initialization (Doshi, He, Gromov; seed_partial_jacobians.md sections 1, 2 and 7).

SP exponents with the init of the partial-Jacobian paper's eq. (1):

    hidden weights ~ N(0, sigma_w^2 / fan_in),   branch biases ~ N(0, sigma_b^2),   x <- mu x + branch(x)

(mu multiplies the skip path; mu = 0 is a plain MLP). Options left at None take the model's critical point,
chi_J* = 1: for the MLP-ResNet from the infinite-width recursion of its block (zoo.diagnostics.mean_field; it
reproduces the closed forms, e.g. ReLU sigma_w^2 = 2, erf sigma_w^2 = pi/4 at sigma_b = 0, pre-LN
sigma_b / sigma_w = sqrt(E phi'^2 - E phi^2)); mu defaults to 1 with LayerNorm in the block (then every
(sigma_w, sigma_b) is critical, Thm 1.3) and to 0 without. The transformers and the Mixer are pre-LN with mu = 1:
sigma_w = 1, sigma_b = 0. `report` gives chi, the correlation length and the predicted trainable depth.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.param.base import SP_TABLE, Parametrization
from zoo.param.tags import Tag


@dataclasses.dataclass(frozen=True)
class Critical(Parametrization):
    name = "critical"
    table = SP_TABLE

    sigma_w: Any = None
    sigma_b: Any = None
    mu: Any = None

    def __post_init__(self):
        for option in ("sigma_w", "sigma_b", "mu"):
            value = getattr(self, option)
            if isinstance(value, str):  # from the command line
                try:
                    object.__setattr__(self, option, float(value))
                except ValueError:
                    raise ValueError(f"option {option} of 'critical' must be a number, got {value!r}") from None

    def init_std(self, tag: Tag, std0: float) -> Any:
        weight = tag.kind == "hidden" or (tag.kind == "scalar" and not tag.role.endswith("_bias"))
        if weight:
            return _given(self.sigma_w, "sigma_w") * tag.fan_in**-0.5
        if tag.branch and tag.role.endswith("_bias") and tag.role != "norm_bias":
            return _given(self.sigma_b, "sigma_b")
        return super().init_std(tag, std0)

    def skip_multiplier(self) -> Any:
        return _given(self.mu, "mu")

    def for_model(self, model_name: str, cfg: Any) -> Critical:
        if all(v is not None for v in (self.sigma_w, self.sigma_b, self.mu)):
            return self
        residual_ln = getattr(cfg, "pre_ln", True)  # the transformers and the Mixer are pre-LN
        mu = self.mu if self.mu is not None else (1.0 if residual_ln else 0.0)
        sigma_b = self.sigma_b if self.sigma_b is not None else 0.0
        sigma_w = self.sigma_w
        if sigma_w is None:
            if residual_ln and float(mu) == 1.0:
                sigma_w = 1.0
            elif model_name == "mlp_resnet":
                from zoo.diagnostics import mean_field

                block = mean_field.Block.of(cfg, float(self.branch_multiplier(cfg.depth, cfg.base_depth or cfg.depth)))
                sigma_w = mean_field.critical_sigma_w(block, float(sigma_b), float(mu))
            else:
                raise ValueError(f"the critical point of {model_name!r} with mu={mu} has no closed form; give "
                                 "sigma_w, or find it with `python -m zoo.criticality --find sigma_w`")
        return dataclasses.replace(self, sigma_w=sigma_w, sigma_b=sigma_b, mu=mu)

    def report(self, model_name: str, cfg: Any, measure: bool = True, **estimate: Any) -> dict[str, float]:
        """sigma_w, sigma_b, mu; for the MLP-ResNet the infinite-width chi at its last block; with measure, chi_hat
        (one-block APJN at the last block, Monte Carlo) and its standard error, the correlation length
        xi = 1 / |ln chi_hat| and the trainable depth ~ 28 xi (the paper's App. L)."""
        from zoo.diagnostics import jacobian

        bound = self.for_model(model_name, cfg)
        out = {"sigma_w": float(bound.sigma_w), "sigma_b": float(bound.sigma_b), "mu": float(bound.mu)}
        if model_name == "mlp_resnet":
            from zoo.diagnostics import mean_field

            block = mean_field.Block.of(cfg, float(bound.branch_multiplier(cfg.depth, cfg.base_depth or cfg.depth)))
            chis, _ = mean_field.recursion(block, out["sigma_w"], out["sigma_b"], out["mu"], cfg.depth)
            out["chi_infinite_width"] = float(chis[-1])
        if measure:
            chi, err = jacobian.chi_hat(model_name, cfg, bound, **estimate)
            xi = jacobian.correlation_length(chi)
            out.update(chi=chi, chi_stderr=err, xi=xi, trainable_depth=28.0 * xi)
        return out


def _given(value: Any, option: str) -> Any:
    if value is None:
        raise ValueError(f"critical: {option} is unset; build the model with zoo.models.create (which fills in the "
                         f"model's critical point) or pass {option}")
    return value
