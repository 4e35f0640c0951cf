"""The optimizer builder (design.md section 4): one optax chain from the plugin and the parameter tags.

    g -> g * m^d r^alpha            faithful gradient pre-scale (= Adam epsilon * m^-d r^-alpha; TP IVb Def 2.2.1)
      -> [clip global norm]         on the faithful gradients (entries Theta(1)), the threshold scaled with the
                                    square root of the parameter count against the base width and depth's
      -> base                       adam | sgd | momentum | lion | adafactor (entrywise Q of TP IVb 2.1), or muon:
                                    optax's scale_by_muon on the parameters routed to the spectral family, one
                                    matrix per stacked layer, and adam on the rest (optax.partition)
      -> [clip update RMS]          per-parameter RMS threshold, width-independent (TP IVb 2.10.2); on Muon's O,
                                    whose RMS depends on its rank, a cap on its singular values (zoo.muon)
      -> * m^-c r^-gamma            per-parameter LR multiplier of the parameter's family (Muon: c - k/2)
      -> + wd * w                   decoupled weight decay: a per-step shrink lr*wd, width-independent (2.10.1)
      -> * -lr * schedule(t)        the global learning rate, kept in the optimizer state (vmappable)

Each width and depth factor is applied once, by the plugin's LR multiplier. Muon's update is the Newton-Schulz output
O (singular values about 1) times one constant per matrix taken at the *base* shape, muon_rms * sqrt(max(fan_in0,
fan_out0)): Moonlight's RMS matching (an update RMS of muon_rms = 0.2, AdamW's, so one LR serves the Muon and the
Adam parameters), frozen at the base width so that it adds no width factor of its own (docs/muon.md gives the factor
between zoo's LR and Keller Jordan's, Moonlight's and optax's conventions). Under Muon the entrywise part is Adam
with b1, b2, eps; Muon has its own momentum muon_beta and uses eps in its Frobenius pre-normalisation G / (||G||_F +
eps). The gradient pre-scale makes that the same in every gauge, but not width-independent: G's entries are Theta(1),
so ||G||_F grows like m^(k/2) (k width axes; the MLP-ResNet's hidden matrix under muP: 3.2 at width 48, 24 at 400)
and Muon's eps weighs m^-(k/2) less at width m, which matters only where eps is near ||G||_F (not at 1e-8).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from zoo.muon import Route, base_side, clip_by_natural_rms
from zoo.param import families
from zoo.param.base import Parametrization, check_plugin
from zoo.param.tags import Tag
from zoo.schedule import COOLDOWN, SCHEDULES, WARMUP_PEAKS, last_step, schedule_shape
from zoo.schema import BETA, FRACTION, NON_NEGATIVE, POSITIVE, check_settings, setting

OPTIMIZERS = families.OPTIMIZERS


# optax unrolls Newton-Schulz in the compiled step: 100 iterations compile in ~8 s on CPU, 100000 never end; 5 is Muon's
NS_STEPS = (lambda v: 1 <= v <= 100, "must be in [1, 100] (each iteration is unrolled into the compiled step)")

@dataclasses.dataclass(frozen=True)
class OptimConfig:
    """The optimizer part of a run's config (its flags: --optimizer, --lr, ...). The schedule's horizon is the run's
    length, given to `build`."""

    name: str = setting("adam", "the base optimizer", flag="optimizer", choices=OPTIMIZERS)
    lr: float = setting(1e-3, "peak learning rate at the base width (the plugin scales it per parameter)",
                        check=POSITIVE)
    schedule: str = setting("constant", "LR schedule after --warmup", choices=SCHEDULES)
    warmup: int = setting(0, "linear warmup steps", check=NON_NEGATIVE)
    warmup_peak: str = setting("last", "where the warmup reaches the peak --lr: on its last step W - 1 (ramp (t + 1) "
                               "/ W), or after it, on step W, the decay's first (ramp (t + 1) / (W + 1), nanoGPT's "
                               "get_lr)", choices=WARMUP_PEAKS)
    min_lr_ratio: float = setting(0.0, "final LR / peak LR for cosine, linear and wsd", check=FRACTION)
    cooldown: float | None = setting(None, "the fraction of the run after the warmup that --schedule wsd spends in "
                                     "its final linear decay (warmup, stable, decay)", shown=f"{COOLDOWN}",
                                     check=FRACTION)
    b1: float = setting(0.9, "Adam/Lion beta1", check=BETA)
    b2: float = setting(0.999, "Adam/Lion beta2", check=BETA)
    eps: float | None = setting(None, "epsilon at the base width (the plugin scales it): Adam's, beside sqrt(v) (and "
                                "Muon's, in G / (||G||_F + eps)); Adafactor's, beside g^2",
                                shown="1e-8; 1e-30 for adafactor", check=POSITIVE)
    momentum: float = setting(0.9, "momentum of --optimizer momentum", check=BETA)
    weight_decay: float | None = setting(None, "decoupled per-step shrink lr*wd", shown="0.1 for adamw, else 0",
                                         check=NON_NEGATIVE)
    decay_vectors: bool = setting(False, "weight decay on the biases and norm gains too, at the matrices' lr*wd (as "
                                  "torch's AdamW(model.parameters()) decays every parameter); by default the "
                                  "plugin's rule, which decays the weight matrices only")
    clip_norm: float | None = setting(None, "clip the global norm of the width-faithful gradients at the base width "
                                      "and depth (a threshold that grows as their norm does with width and depth); "
                                      "0: no clipping", shown="none", check=NON_NEGATIVE)
    clip_rms: float | None = setting(None, "clip each parameter's update RMS, width-independent (Muon's matrices: "
                                     "their singular values, at this RMS's at the base shape); 0: no clipping",
                                     shown="none", check=NON_NEGATIVE)
    muon_beta: float = setting(0.95, "Muon's Nesterov momentum", check=BETA)
    muon_rms: float = setting(0.2, "Muon's update RMS at the base shape (Moonlight's: AdamW's, so the Muon and Adam "
                              "parameters share one LR)", check=POSITIVE)
    muon_io: bool = setting(False, "Muon also on the input and output layers (by default Adam's)")
    ns_steps: int = setting(5, "Muon's Newton-Schulz iterations", check=NS_STEPS)

    def __post_init__(self):
        if self.eps is None:
            object.__setattr__(self, "eps", default_eps(self.name))
        check_settings(self)

    def unused(self, given: set[str]) -> list[str]:
        """The settings among `given` that this optimizer and schedule do not read (USED_BY), where they differ from
        their defaults (a run's config.json, read back as a config file, gives every setting); decay_vectors where
        nothing decays."""
        default = OptimConfig(self.name)
        return [k for k in sorted(given) if (k in USED_BY and self.name not in USED_BY[k]
                                              and self.schedule not in SCHEDULE_READS.get(k, ())
                                              and getattr(self, k) != getattr(default, k))
                or (k == "decay_vectors" and self.decay_vectors and not self.decay)]

    @property
    def cooldown_fraction(self) -> float:
        return COOLDOWN if self.cooldown is None else self.cooldown

    @property
    def decay(self) -> float:
        if self.weight_decay is not None:
            return self.weight_decay
        return 0.1 if self.name == "adamw" else 0.0


def default_eps(optimizer: str) -> float:
    """Each optimizer's own epsilon: Adam's 1e-8 beside sqrt(v); Adafactor's eps1 = 1e-30 beside g^2."""
    return 1e-30 if optimizer == "adafactor" else 1e-8


_ADAM_PART = ("adam", "adamw", "muon")  # Muon's vectors, scalars (and io layers) are Adam's
USED_BY = {"b1": (*_ADAM_PART, "lion"), "b2": (*_ADAM_PART, "lion"), "eps": (*_ADAM_PART, "adafactor"),
           "momentum": ("momentum",), "muon_beta": ("muon",), "muon_rms": ("muon",), "muon_io": ("muon",),
           "ns_steps": ("muon",), "min_lr_ratio": (), "cooldown": ()}  # these two: the schedules' (SCHEDULE_READS)
SCHEDULE_READS = {"min_lr_ratio": ("cosine", "linear", "wsd"), "cooldown": ("wsd",)}


class LRState(NamedTuple):
    count: jax.Array
    lr: jax.Array  # the peak LR: state, so a sweep can give each vmapped member its own


def scale_by_lr(lr: float, shape: Callable[[jax.Array], jax.Array]) -> optax.GradientTransformation:
    """u -> -lr * shape(t) * u, with lr held in the state."""

    def init(params):
        del params
        return LRState(jnp.zeros([], jnp.int32), jnp.asarray(lr, jnp.float32))

    def update(updates, state, params=None):
        del params
        f = -state.lr * shape(state.count)
        return jax.tree.map(lambda u: u * f.astype(u.dtype), updates), LRState(state.count + 1, state.lr)

    return optax.GradientTransformation(init, update)


def scale_by_tree(factors: Any) -> optax.GradientTransformation:
    """u -> u * factor, one factor per parameter leaf."""

    def update(updates, state, params=None):
        del params
        return jax.tree.map(lambda u, f: u * jnp.asarray(f, u.dtype), updates, factors), state

    return optax.GradientTransformation(lambda p: optax.EmptyState(), update)


def add_decayed_weights_tree(decay: Any) -> optax.GradientTransformation:
    """u -> u + decay * w, one decay coefficient per parameter leaf."""

    def update(updates, state, params=None):
        return jax.tree.map(lambda u, w, c: u + jnp.asarray(c, u.dtype) * w, updates, params, decay), state

    return optax.GradientTransformation(lambda p: optax.EmptyState(), update)


def per_param(params: Any, fn: Callable[[Tag], Any]) -> Any:
    """A tree shaped like `params` holding fn(tag) for each parameter. `params` is a state of tagged nnx.Params (the
    tag in their metadata) or any pytree of Tags (zoo.param.infer_tags; its None leaves are not parameters)."""

    def one(x):
        if x is None or isinstance(x, Tag):
            return None if x is None else fn(x)
        value = x.get_value()
        return x.replace(fn(value if isinstance(value, Tag) else x.get_metadata()["tag"]))

    return jax.tree.map(one, params, is_leaf=lambda x: x is None or isinstance(x, (nnx.Variable, Tag)))


class Rules(NamedTuple):
    """The per-parameter trees of the chain (numbers, possibly traced): gradient pre-scale, LR multiplier and
    weight-decay multiplier."""

    grad_scale: Any
    lr_mult: Any
    wd_mult: Any


def family_of(cfg: OptimConfig | None, tag: Tag) -> str:
    """The optimizer family of a tagged parameter (zoo.param.families); entrywise when no optimizer is given."""
    return "adam" if cfg is None else families.family(cfg.name, tag.kind, cfg.muon_io)


def rules(plugin: Parametrization, params: Any, cfg: OptimConfig | None = None) -> Rules:
    """The plugin's rules for each parameter under the family `cfg`'s optimizer puts it in (the LR multiplier is
    the family's, times Muon's base-shape constant on spectral leaves; the pre-scale and the weight decay are the
    same for every family; `decay_vectors` decays the vectors and scalars, width-independently, as TP IVb 2.10.1
    decays the matrices). A frozen kind's gradient is scaled by 0, so it adds nothing to the global norm that
    --clip-norm clips, as a parameter that does not train adds nothing in PyTorch."""
    def lr_mult(tag: Tag) -> Any:
        family = family_of(cfg, tag)
        mult = plugin.lr_mult(tag, family)
        return mult * spectral_constant(cfg, tag) if family == "spectral" else mult

    def grad_scale(tag: Tag) -> Any:
        return 0.0 if plugin.frozen(tag) else plugin.grad_scale(tag)

    def wd_mult(tag: Tag) -> Any:
        every = cfg is not None and cfg.decay_vectors and not plugin.frozen(tag)
        return 1.0 if every and tag.kind in ("vector", "scalar") else plugin.wd_mult(tag)

    return Rules(per_param(params, grad_scale), per_param(params, lr_mult), per_param(params, wd_mult))


def spectral_constant(cfg: OptimConfig, tag: Tag) -> float:
    """muon_rms * sqrt(max(fan_in0, fan_out0)) at the base shape: Muon's update RMS equals muon_rms there (a full-rank
    O of shape p x q has RMS 1/sqrt(max(p, q))); no width factor, the plugin's LR multiplier has them all."""
    return cfg.muon_rms * base_side(tag)


def routes(cfg: OptimConfig, params: Any, plugin: Parametrization | None = None) -> Any:
    """A Route per parameter of `params` (tagged nnx.Params or a pytree of Tags); the kinds `plugin` freezes do not
    train; refused where it freezes them all (the run would end as it began, its loss never moving)."""
    frozen = jax.tree.leaves(per_param(params, plugin.frozen)) if plugin is not None else []
    if frozen and all(frozen):
        raise ValueError(f"freeze={plugin.freeze} freezes every parameter of the model: nothing would train; leave a "
                         "kind out of the list")
    return per_param(params, lambda tag: Route.of(tag, family_of(cfg, tag), plugin is None or not plugin.frozen(tag)))


# optax factors Adafactor's second moment only where two axes have 128 entries or more, so a kernel changed its
# rule as the width crossed 128 (muP's coordinate check under Adafactor at widths 48, 96, 192: slopes up to +0.19
# against 0; flat on either side): zoo factors every matrix, at every width.
FACTOR_ALL = 1


def entrywise_transform(cfg: OptimConfig, route: Any = None) -> optax.GradientTransformation:
    if cfg.name in ("adam", "adamw", "muon"):
        return optax.scale_by_adam(b1=cfg.b1, b2=cfg.b2, eps=cfg.eps)
    if cfg.name == "momentum":
        return optax.trace(decay=cfg.momentum)
    if cfg.name == "lion":
        return optax.scale_by_lion(b1=cfg.b1, b2=cfg.b2)
    if cfg.name == "adafactor":
        return adafactor(cfg.eps, route)
    return optax.identity()


def adafactor(eps: float, route: Any = None) -> optax.GradientTransformation:
    """Adafactor's second-moment scaling with every parameter of 2+ axes factored (Shazeer & Stern's rule, whatever
    its size), then its update clipped at block RMS 1, both on each stacked layer alone (Route.stacked_axes): optax
    factors over a leaf's two largest axes, so a stack [L, out, in] deeper than it is wide was factored across its
    layers (at width 48, depth 64 an update 0.70 away, in relative norm, from the per-layer one the same layers get
    at depth 48), and the block RMS was the stack's. The state is optax's FactoredState, one count, its trees shaped
    like the parameters'."""
    rms = optax.scale_by_factored_rms(epsilon=eps, min_dim_size_to_factor=FACTOR_ALL)
    tx = optax.chain(rms, optax.clip_by_block_rms(1.0))
    if route is None:
        return tx

    def layered(fn, leaf, r):
        for _ in range(r.stacked_axes(leaf.shape)):
            fn = jax.vmap(fn)
        return fn

    def init(params):
        leaves, tree = jax.tree.flatten(params)
        states = [layered(rms.init, p, r)(p) for p, r in zip(leaves, tree.flatten_up_to(route), strict=True)]
        fields = (tree.unflatten([getattr(s, f) for s in states]) for f in ("v_row", "v_col", "v"))
        return optax.FactoredState(jnp.zeros([], jnp.int32), *fields), optax.EmptyState()

    def update(updates, state, params=None):
        leaves, tree = jax.tree.flatten(updates)
        count, parts = state[0].count, [tree.flatten_up_to(getattr(state[0], f)) for f in ("v_row", "v_col", "v")]

        def one(u, v_row, v_col, v, p):
            out, (s, _) = tx.update(u, (optax.FactoredState(count, v_row, v_col, v), optax.EmptyState()), p)
            return out, s.v_row, s.v_col, s.v

        out = [layered(one, u, r)(u, *vs, p) for u, r, p, *vs in
               zip(leaves, tree.flatten_up_to(route), tree.flatten_up_to(params), *parts, strict=True)]
        fields = (tree.unflatten([o[i] for o in out]) for i in (1, 2, 3))
        return tree.unflatten([o[0] for o in out]), (optax.FactoredState(optax.safe_increment(count), *fields),
                                                    optax.EmptyState())

    return optax.GradientTransformation(init, update)


def base_transform(cfg: OptimConfig, route: Any = None) -> optax.GradientTransformation:
    """The optimizer proper (the chain's `base` line); under muon, Muon on the spectral routes and Adam on the rest."""
    if cfg.name not in families.SPECTRAL:
        return entrywise_transform(cfg, route)
    if route is None:
        raise ValueError("muon needs each parameter's route (zoo.optim.routes): which leaves are matrices, and their "
                         "axes")

    def axes(updates):
        def one(u, r):
            return optax.MaskedNode() if isinstance(u, optax.MaskedNode) else r.matrix_axes(u.shape)

        return jax.tree.map(one, updates, route, is_leaf=lambda x: isinstance(x, optax.MaskedNode))

    muon = optax.contrib.scale_by_muon(ns_steps=cfg.ns_steps, beta=cfg.muon_beta, eps=cfg.eps,
                                       weight_dimension_numbers=axes)
    labels = jax.tree.map(lambda r: r.family, route, is_leaf=lambda x: isinstance(x, Route))
    return optax.partition({"spectral": muon, "adam": entrywise_transform(cfg)}, labels)


def build(cfg: OptimConfig, plugin: Parametrization, params: Any, horizon: int | None = None
          ) -> optax.GradientTransformation:
    """The optax chain for `params` under `plugin`: a state of tagged nnx.Params (possibly abstract) or a pytree of
    Tags (zoo.param.infer_tags, for a model zoo did not build); `horizon`: the run's length (decaying schedules)."""
    check_plugin("zoo.optim.build", plugin)
    return chain(cfg, *rules(plugin, params, cfg), route=routes(cfg, params, plugin), horizon=horizon)


def chain(cfg: OptimConfig, grad_scale: Any, lr_mult: Any, wd_mult: Any, route: Any = None,
          horizon: int | None = None, decayed: Any = None) -> optax.GradientTransformation:
    """The chain from its per-parameter trees (see `rules`; their leaves may be traced arrays), for muon the
    parameters' routes (see `routes`), and the run's length (decaying schedules). `decayed`: each parameter's
    decay coefficient, in place of cfg.decay * wd_mult (possibly traced; whether the chain decays at all is cfg's)."""
    parts = [scale_by_tree(grad_scale)]
    if cfg.clip_norm:
        parts.append(clip_by_faithful_norm(cfg.clip_norm, route))
    parts.append(base_transform(cfg, route))
    if cfg.clip_rms:
        parts.append(clip_by_natural_rms(cfg.clip_rms, route))
    parts.append(scale_by_tree(lr_mult))
    if cfg.decay:
        parts.append(add_decayed_weights_tree(jax.tree.map(lambda w: cfg.decay * w, wd_mult) if decayed is None
                                              else decayed))
    parts.append(scale_by_lr(cfg.lr, schedule_shape(cfg, last_step(horizon))))
    return optax.chain(*parts)


def clip_by_faithful_norm(max_norm: float, route: Any = None) -> optax.GradientTransformation:
    """Global-norm clipping of the faithful (pre-scaled) gradients with the threshold max_norm * sqrt(N / N0), N the
    number of entries and N0 their number at the base width and depth (each parameter's entries times m^-k, k its
    width axes, and times L0/L inside the residual branches: `Route.base_fraction`). The faithful gradients' entries
    are Theta(1) in width and, with the branch pre-scale r^alpha, in depth, so their global norm grows like sqrt(N)
    and this threshold keeps the clip factor width- and depth-independent, as TP IVb 2.10.2 asks of clipping (a fixed
    threshold would clip harder as the model widens or deepens: Adam's epsilon, SGD's LR, would shrink with size).
    Only the parameters that train count (`Route.trains`): a frozen kind's gradient is 0 (zoo.optim.rules), so
    counting its entries made the threshold grow as they do, not as the norm (freeze=input,output: a 300-input
    layer's n x 300 entries grew the threshold like m^(1/2) while the hidden layers' norm grew like m). Without routes
    (no tags) the threshold is max_norm."""

    def update(updates, state, params=None):
        del params
        scale = 1.0
        if route is not None:
            sizes = jax.tree.leaves(jax.tree.map(lambda u, r: (u.size * r.trains, u.size * r.trains * r.base_fraction),
                                                 updates, route))
            scale = math.sqrt(sum(sizes[0::2]) / sum(sizes[1::2])) if sum(sizes[1::2]) else 1.0
        return optax.clip_by_global_norm(max_norm * scale).update(updates, state)

    return optax.GradientTransformation(lambda p: optax.EmptyState(), update)


def set_lr(opt_state: Any, lr: jax.Array) -> Any:
    """The optimizer state with its peak learning rate replaced (used by vmapped sweeps)."""
    return optax.tree_utils.tree_set(opt_state, lr=jnp.asarray(lr, jnp.float32))
