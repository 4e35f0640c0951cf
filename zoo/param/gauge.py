"""A plugin's multiplier-free form: every forward multiplier moved into its parameter (TP-V's "Table 3" form, for
every parameter), so a model written in SP form trains under the plugin through its init and optimizer alone.

TP IVb Prop 2.2.3: a forward multiplier c on a parameter W with init std s, Adam LR multiplier l and gradient
pre-scale g trains exactly like W' = c W with init std c s, pre-scale g c, LR multiplier l c and the same decoupled
weight decay, for SGD, every entrywise optimizer and Muon (the optimizer sees the pre-scaled gradient g c dL/dW either
way, so its output Q is the same, and w' moves by l c Q = c times w's move; Adam's and Muon's epsilons move along
through the pre-scale; the spectral normalisation only sets the size of Q, not where c enters). In abcd
terms it is the gauge shift (a, b, c, d) -> (a + t, b - t, c - t, d + t) with t = -a. Here c is everything the
plugin multiplies W by in the forward pass:

    m^-a                      (times readout_mult on the output layer)
    * branch_mult (L/L0)^-alpha   on a branch_output leaf: the branch is linear in the matrix (and bias) ending it
    * s(d, d0) sqrt(d)        on a query leaf: the plugin's attention-logit scale over SP's 1/sqrt(d)

    free = multiplier_free(zoo.param.get("depth_mup"), tags)          # tags: zoo.param.infer_tags
    params = rescale_init(params, tags, free)                          # the model's own SP init, rescaled
    tx = zoo.optim.build(OptimConfig(lr=3e-3), free, tags)             # the optax chain every zoo model uses

The skip multiplier mu of `critical` multiplies the residual stream itself, which is no parameter: refused. A readout
tied to an input table has no multiplier-free form either: the table also feeds the embedding, so the readout's
multiplier (Parametrization.tied_multiplier, muP's m^-1) must stay in the model's forward pass, f = m^-e h E^T;
without it, muP's tied logits grow like m.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from zoo.param.base import Parametrization
from zoo.param.mup import shift
from zoo.param.sp import SP
from zoo.param.tags import Tag

BRANCH_OUTPUT, QUERY = "branch_output", "query"
# a residual-branch bias whose SP std0 is 0: a plugin that gives it a std of its own (critical's sigma_b) draws it
BIAS_PROBE = Tag("vector", 1, 1, branch=True, depth=2, base_depth=1, role="branch_bias")


@dataclasses.dataclass(frozen=True)
class MultiplierFree(Parametrization):
    """`plugin` with each parameter shifted to a = 0. Forward: no multipliers, SP's attention scale 1/sqrt(d)."""

    name = "multiplier_free"
    plugin: Parametrization | None = None
    head_dim: int | None = None  # attention head dim d and its base-width value d0 (for query leaves)
    base_head_dim: int | None = None

    def __post_init__(self):
        if isinstance(self.plugin, MultiplierFree) or not isinstance(self.plugin, Parametrization):
            what = "its own form (it is multiplier-free already)" if isinstance(self.plugin, MultiplierFree) else \
                type(self.plugin).__name__
            raise TypeError(f"multiplier_free takes a plugin (zoo.param.get(name)), not {what}")
        try:
            mu = float(self.plugin.skip_multiplier())
        except ValueError:
            mu = None
        if mu != 1.0:  # None: mu is the model's to give (critical without pre_ln), and then not 1 in general
            value = "" if mu is None else f" ({mu:g})"
            raise ValueError(f"{self.plugin.name}: the skip multiplier mu{value} scales the residual stream, which "
                             "is no parameter to fold it into: this plugin has no multiplier-free form")
        bias = self.plugin.init_std(BIAS_PROBE, 0.0)
        if not isinstance(bias, jax.Array) and float(bias) != 0.0:
            raise ValueError(f"{self.plugin.name} draws residual-branch biases with std {float(bias):g}, which "
                             "rescaling the model's own (zero) biases cannot give: set it to 0 (critical: sigma_b=0)")

    def folded(self, tag: Tag) -> Any:
        """c: the product of the forward multipliers the plugin puts on this parameter."""
        c = self.plugin.multiplier(tag)
        if tag.role == BRANCH_OUTPUT:
            c = c * self.plugin.branch_multiplier(tag.depth, tag.base_depth)
        if tag.role == QUERY:
            if self.head_dim is None or self.base_head_dim is None:
                raise ValueError("a 'query' parameter needs the head dims: multiplier_free(plugin, tags, "
                                 "head_dim=d, base_head_dim=d0)")
            sp = SP().attn_scale(self.head_dim, self.base_head_dim)
            c = c * self.plugin.attn_scale(self.head_dim, self.base_head_dim) / sp
        return c

    def abcd(self, tag: Tag) -> tuple:
        """The plugin's exponents shifted to a = 0 (the width part of `folded`)."""
        exps = self.plugin.abcd(tag)
        return shift(exps, -exps[0])

    def multiplier(self, tag: Tag) -> Any:
        return 1.0

    def init_std(self, tag: Tag, std0: float) -> Any:
        return self.plugin.init_std(tag, std0) * self.folded(tag)

    def lr_exponent(self, tag: Tag, family: str = "adam") -> Any:
        return self.plugin.lr_exponent(tag, family) + self.plugin.abcd(tag)[0]

    def lr_mult(self, tag: Tag, family: str = "adam") -> Any:
        return self.plugin.lr_mult(tag, family) * self.folded(tag)

    def frozen_kinds(self) -> tuple[str, ...]:
        return self.plugin.frozen_kinds()

    @property
    def global_lr(self) -> bool:  # type: ignore[override]
        """The plugin's: one global LR under every optimizer family (sp) stays one in every gauge."""
        return self.plugin.global_lr

    def grad_scale(self, tag: Tag) -> Any:
        return self.plugin.grad_scale(tag) * self.folded(tag)

    def wd_mult(self, tag: Tag) -> Any:
        return self.plugin.wd_mult(tag)

    def branch_multiplier(self, depth: int, base_depth: int) -> Any:
        return 1.0

    def attn_scale(self, d_head: int, base_d_head: int) -> Any:
        return SP().attn_scale(d_head, base_d_head)

    def init_factor(self, tag: Tag) -> Any:
        """This form's init std over SP's, both with SP's std0 = base fan-in^-1/2: what rescale_init multiplies by."""
        std0 = tag.base_fan_in**-0.5
        return self.init_std(tag, std0) / SP().init_std(tag, std0)

    def expected_slopes(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        """The plugin's own predictions: the same training in another gauge."""
        return self.plugin.expected_slopes(*args, **kwargs)

    def describe(self) -> str:
        return f"multiplier-free form of {self.plugin.describe()}"

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "options": {"plugin": self.plugin.spec(), "head_dim": self.head_dim,
                                               "base_head_dim": self.base_head_dim}}


def tag_leaves(tags: Any) -> list[Tag]:
    """The Tags of a tag pytree (infer_tags' output)."""
    return [t for t in jax.tree.leaves(tags, is_leaf=lambda x: isinstance(x, Tag)) if isinstance(t, Tag)]


def multiplier_free(plugin: Parametrization, tags: Any = None, *, head_dim: int | None = None,
                    base_head_dim: int | None = None) -> MultiplierFree:
    """The multiplier-free form of `plugin`; with `tags`, checked to have a place for every multiplier: a branch
    multiplier other than 1 needs branch_output leaves, queries need the head dims."""
    free = MultiplierFree(plugin=plugin, head_dim=head_dim, base_head_dim=base_head_dim)
    leaves = tag_leaves(tags) if tags is not None else []
    branch = [t for t in leaves if t.branch]
    if branch and not any(t.role == BRANCH_OUTPUT for t in branch):
        beta = float(plugin.branch_multiplier(branch[0].depth, branch[0].base_depth))
        if beta != 1.0:
            raise ValueError(f"{plugin.name}'s branch multiplier ({beta:.4g}) has no parameter to fold into: mark the "
                             "matrix that ends each residual branch (and its bias) with a 'branch_output' rule")
    if any(t.role == QUERY for t in leaves):
        free.folded(next(t for t in leaves if t.role == QUERY))  # head dims given?
    return free


def rescale_init(params: Any, tags: Any, plugin: Parametrization) -> Any:
    """The model's own SP init (fan-in std for hidden and output matrices, width-independent for the rest) turned
    into the multiplier-free plugin's: W' = c * (plugin std / SP std) * W, leaf by leaf (non-tagged leaves kept)."""
    free = plugin if isinstance(plugin, MultiplierFree) else multiplier_free(plugin, tags)
    return scale_leaves(params, jax.tree.map(free.init_factor, tags, is_leaf=lambda x: isinstance(x, Tag)))


def scale_leaves(params: Any, factors: Any) -> Any:
    """params * factors leaf by leaf, where `factors` mirrors `params` (None: leave the leaf alone); the factors may
    be traced arrays."""
    def one(f, w):
        return w if f is None else w * jnp.asarray(f, w.dtype)

    return jax.tree.map(one, factors, params, is_leaf=lambda x: x is None)
