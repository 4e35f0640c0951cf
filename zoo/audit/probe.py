"""One size of a run, measured: init, one real training step (the run's optax chain, gradient accumulation,
precision and mesh), one step of the same chain from a fresh state with zero gradients (pure weight decay), and the
optimizer's second moment. Everything runs in one program jitted with the run's shardings; what comes out is a few
numbers per parameter, replicated.

Per parameter (raw: the audit multiplies by the realized multiplier afterwards):
    init_rms, init_spectral       of w_0 (spectral: mean over stacked layers of the largest singular value)
    update_rms, update_spectral   of the step's gradient-driven part w_1 - w_0 - (-lambda w_0)
    spectral_step                 that part per unit of Muon's Newton-Schulz output of the gradient (matrices)
    wd_shrink                     lambda of the zero-gradient update -lambda w_0 (the chain adds its decay after
                                  the optimizer, so the step's decay part is exactly this update)
    small_step_rms                the chain's first update of TINY times the gradient at w = 0 (no decay part), per
                                  TINY: the step the chain takes before any global-norm clipping
    small_sqrt_v_rms              RMS of sqrt(v_hat) after that update, per TINY (Adam's epsilon without the clip)
    grad_rms                      of the step's own gradient (dropout and drop path off) (zero: a null direction such
                                  as the key bias, whose gradient is rounding noise: not judged)
    sqrt_v_rms                    RMS of sqrt(v_hat) in Adam's state after the step (absent without Adam's v)
    b2                            Adam's realised beta2: its v after a zero-gradient update over its v before (the
                                  small step's; absent without Adam's v)
    in_spectral, in_adam          1 when Muon's momentum, or Adam's second moment, holds the parameter in the chain's
                                  state (the family the run really gives it)
    mult, power                   the multiplier variable beside it (mean over layers) and the power p with which
                                  the forward pass applies it (measure.multiplier_power; 1 when applied once)

and per forward multiplier that sits on no parameter (a multiplier with `rule` metadata: free_multipliers) its mult
(mean over layers); a tied readout's also the power with which the logits carry it (measure.output_power). A branch
multiplier or an attention scale enters the logits through every block, so no Euler relation isolates its power:
its value is what is judged.

Where the init holds a zero weight matrix (zero_init's readout or query), the other parameters' first gradient is
0, and their step's numbers say nothing of their rules: the step is measured again at `nonzero`'s drawn matrices
(its numbers prefixed REDRAWN), where the rules the audit judges (Adam's update, SGD's step per unit gradient,
epsilon, Muon's step) do not depend on the gradient's size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from optax.contrib._muon import MuonState

from zoo.audit import measure
from zoo.optim import OptimConfig, Route
from zoo.param.families import MATRIX_KINDS
from zoo.param.tags import Tag
from zoo.train import memory
from zoo.train.mesh import MeshPlan
from zoo.train.step import Program, prepare_inputs, run_once_options
from zoo.tree import key_path

Numbers = dict[str, dict[str, float]]
TINY = 1e-6  # a gradient this many times the real one is never clipped
REDRAWN = "redrawn_"  # prefix of a step's numbers measured again with the zero matrices drawn (`nonzero`)


def paths(tree: Any) -> dict[str, Any]:
    """Parameter path ("stack/blocks/attn/q/kernel") -> leaf (an nnx.Variable or an array)."""
    flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]
    return {key_path(p): v for p, v in flat}


def multiplier_of(path: str, rest: dict[str, Any]) -> str | None:
    """The path of the forward multiplier beside a parameter (zoo's Dense and Embed keep it as `mult`)."""
    sibling = path.rsplit("/", 1)[0] + "/mult" if "/" in path else "mult"
    return sibling if sibling in rest else None


def second_moments(opt_state: Any) -> dict[str, jax.Array]:
    """Path -> Adam's second moment v of that parameter, wherever a ScaleByAdamState sits in the chain."""
    found = {}
    for _, nu in optax.tree_utils.tree_get_all_with_path(opt_state, "nu"):
        for p, v in paths(nu).items():
            v = v.get_value() if isinstance(v, nnx.Variable) else v
            if hasattr(v, "shape"):  # not a leaf another transform of a partition holds (optax.MaskedNode)
                found[p] = v
    return found


def optimizer_families(opt_state: Any) -> dict[str, str]:
    """Path -> the family whose state holds the parameter: spectral (a Muon momentum), adam (Adam's second moment);
    parameters neither holds are left out. Read from the state's structure, so an abstract state does."""
    out = {p: "adam" for p in second_moments(opt_state)}
    muon = [x for x in jax.tree.leaves(opt_state, is_leaf=lambda x: isinstance(x, MuonState))
            if isinstance(x, MuonState)]
    for state in muon:
        for p, v in paths(state.mu).items():
            if hasattr(v.get_value() if isinstance(v, nnx.Variable) else v, "shape"):
                out[p] = "spectral"
    return out


def probe(prog: Program, plan: MeshPlan, batch: dict[str, jax.Array], cfg: OptimConfig, key: jax.Array) -> Numbers:
    """The numbers of the module docstring for every parameter of `prog`'s model, measured under `plan`'s mesh."""
    abstract = jax.eval_shape(prog.init, key)
    plan.check_run(abstract, int(batch["x"].shape[0]), prog.grad_accum)  # a mesh train.py would refuse, refused
    shardings = plan.state_shardings(abstract)
    placed = jax.tree.map(lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), abstract, shardings)
    batch = jax.device_put(batch, plan.batch)
    tags = {p: v.get_metadata()["tag"] for p, v in paths(abstract["params"]).items()}
    rest = paths(abstract["rest"])
    mults = {p: m for p in tags if (m := multiplier_of(p, rest)) is not None}
    free = free_multipliers(abstract["rest"])
    tied = [p for p, rule in free.items() if rule["rule"] == "tied"]

    def logits(params, rest_state, x):
        return nnx.merge(prog.graphdef, params, rest_state)(prepare_inputs(x, prog.dtype))[0]

    def step_numbers(st, b):
        new, _ = prog.train_step(st, b)
        grads = prog.gradients(st, b)  # the step's own: its keys, augmentation and label smoothing, if any
        fresh = prog.tx.init(st["params"])
        decay, _ = prog.tx.update(jax.tree.map(jnp.zeros_like, grads), fresh, st["params"])
        # a parameter that starts at 0 (every bias) shows no decay there, and read 'no decay' whatever the chain did:
        # the shrink is read at ones in its place (the decay is linear in w)
        at = jax.tree.map(lambda w: jnp.where(jnp.any(w != 0), w, jnp.ones_like(w)), st["params"])
        decay_at, _ = prog.tx.update(jax.tree.map(jnp.zeros_like, grads), fresh, at)
        # at w = 0: the chain reads the parameters only in its decay, lr wd w (zoo.optim.chain), whose ~1e-5 beside
        # a step of TINY times the gradient (~1e-15) would leave the float32 difference little but rounding
        zeros = jax.tree.map(jnp.zeros_like, st["params"])
        small, small_opt = prog.tx.update(jax.tree.map(lambda x: x * TINY, grads), fresh, zeros)
        _, decayed_opt = prog.tx.update(zeros, small_opt, zeros)  # v -> b2 v
        v, v_small, v_decayed = (second_moments(o) for o in (new["opt"], small_opt, decayed_opt))
        w0, w1, g, u, du = (paths(t) for t in (st["params"], new["params"], grads, decay, small))
        shrink_at, u_at = paths(at), paths(decay_at)
        keys = jax.random.split(jax.random.fold_in(key, 1), len(tags))
        out = {}
        for (path, tag), k in zip(tags.items(), keys, strict=True):
            a, dw = w0[path][...], w1[path][...] - w0[path][...] - u[path][...]  # without the decay part
            out[path] = {"init_rms": measure.rms(a), "update_rms": measure.rms(dw),
                         "wd_shrink": measure.shrink(u_at[path][...], shrink_at[path][...]),
                         "grad_rms": measure.rms(g[path][...]),
                         "small_step_rms": measure.rms(du[path][...]) / TINY}
            if tag.kind in MATRIX_KINDS and a.ndim >= 2:
                route = Route("spectral", tag.fan_in, tag.layout, out_axes=tag.out_axes)
                out[path]["init_spectral"] = measure.spectral_norm(a, route, k)
                out[path]["update_spectral"] = measure.spectral_norm(dw, route, k)
                out[path]["spectral_step"] = measure.spectral_step(dw, g[path][...], route, cfg.ns_steps)
            if path in v:
                out[path]["sqrt_v_rms"] = measure.rms(jnp.sqrt(v[path] / (1.0 - cfg.b2)))
                out[path]["small_sqrt_v_rms"] = measure.rms(jnp.sqrt(v_small[path] / (1.0 - cfg.b2))) / TINY
                out[path]["b2"] = jnp.sum(v_decayed[path]) / jnp.maximum(jnp.sum(v_small[path]), 1e-38)
        return out

    room = memory.free_memory()  # before anything of the probe is allocated

    def init(k):
        state = prog.init(k)
        return state, jnp.any(jnp.stack([jnp.all(w[...] == 0) for p, w in paths(state["params"]).items()
                                         if tags[p].kind in MATRIX_KINDS] or [jnp.bool_(False)]))

    state, zero_matrix = jax.jit(init, out_shardings=(shardings, plan.replicated)).lower(key).compile(
        compiler_options=run_once_options())(key)
    redraw = bool(zero_matrix)

    def run(st, b):
        out = step_numbers(st, b)
        if redraw:  # a zero_init readout or query stops the others' first gradient: measured again at a drawn one
            again = step_numbers({**st, "params": nonzero(st["params"], tags, jax.random.fold_in(key, 3))}, b)
            for path, numbers in again.items():
                out[path].update({REDRAWN + k: v for k, v in numbers.items()})
        at = nonzero(st["params"], tags, jax.random.fold_in(key, 2))
        for path, p in powers(logits, at, st["rest"], b["x"], mults).items():
            out[path]["power"] = p
        for path in tied:
            out[path] = {"power": measure.output_power(lambda c: logits(st["params"], c, b["x"]), st["rest"],
                                                       one_hot(st["rest"], path))}
        return out

    program = jax.jit(run, in_shardings=(shardings, plan.batch), out_shardings=plan.replicated)
    program = program.lower(placed, batch).compile(compiler_options=run_once_options())
    memory.check_compiled(program, "audit probe", "audit smaller --widths or --depths, or a smaller --batch-size",
                          room)
    numbers = program(state, batch)  # runs once
    numbers = jax.device_get(numbers)
    for path, family in optimizer_families(jax.eval_shape(prog.tx.init, abstract["params"])).items():
        numbers[path]["in_" + family] = 1.0
    rest_values = paths(state["rest"])
    for path, m in {**mults, **{f: f for f in free}}.items():
        numbers.setdefault(path, {})["mult"] = float(np.mean(np.asarray(rest_values[m][...])))
    for path in free:
        numbers[path].setdefault("power", 1.0)  # a branch multiplier's or attention scale's value is judged
    return {p: {k: float(v) for k, v in d.items()} for p, d in numbers.items()}


def powers(logits: Callable, params: Any, rest: Any, x: jax.Array, mults: dict[str, str]) -> dict[str, jax.Array]:
    """Parameter path -> the power p for each parameter with a multiplier, the JVPs of every parameter batched in
    one vmap (tangent k: the k-th parameter itself along w, its multiplier itself along c)."""
    if not mults:
        return {}
    chosen = list(mults)

    def f(w, c):
        return logits(w, c, x).astype(jnp.float32)

    tw, tc = one_hots(params, chosen), one_hots(rest, [mults[p] for p in chosen])
    p = jax.vmap(lambda a, b: measure.multiplier_power(f, params, rest, a, b))(tw, tc)
    return {path: p[i] for i, path in enumerate(chosen)}


def nonzero(params: Any, tags: dict[str, Tag], key: jax.Array) -> Any:
    """`params` with each weight matrix that is 0 everywhere (a zero_init readout or query) drawn from N(0, 1/fan_in):
    where a multiplier c enters as f = g(c^p w), Euler's relation gives its power p at every w, but reads 0/0 at
    w = 0, and a zero readout or query zeroes the other parameters' directional derivatives as well (a correct muP run
    with zero_init read its readout's m^-1 as m^0 and failed). Biases keep their zeros: a bias beside a kernel's
    multiplier does not carry it (power 0), which a drawn bias would blur with the kernel's term."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(params)
    keys = jax.random.split(key, len(flat))

    def one(path: Any, w: jax.Array, k: jax.Array) -> jax.Array:
        tag = tags.get(key_path(path))
        if tag is None or tag.kind not in MATRIX_KINDS:
            return w
        return jnp.where(jnp.any(w != 0), w, jax.random.normal(k, w.shape, w.dtype) * tag.fan_in**-0.5)

    return jax.tree_util.tree_unflatten(treedef, [one(p, w, k) for (p, w), k in zip(flat, keys, strict=True)])


def one_hot(tree: Any, name: str) -> Any:
    """The tangent tree holding the leaf `name` itself and zeros elsewhere."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return jax.tree_util.tree_unflatten(treedef, [leaf if key_path(p) == name else jnp.zeros_like(leaf)
                                                  for p, leaf in flat])


def one_hots(tree: Any, names: list[str]) -> Any:
    """The one_hot trees of `names`, stacked (a leading axis to vmap over)."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *[one_hot(tree, n) for n in names])


RULE_KEYS = ("rule", "depth", "base_depth", "head_dim", "base_head_dim", "tag", "ties")


def free_multipliers(rest: Any) -> dict[str, dict[str, Any]]:
    """Path -> the stated rule of each forward multiplier in a model's non-parameter state that sits on no parameter
    of its own: its metadata `rule` (branch, attention or tied) and what that rule reads (zoo.audit.laws.
    free_multiplier_law; zoo.models.layers.Scale sets them)."""
    out = {}
    for path, v in paths(rest).items():
        meta = v.get_metadata() if isinstance(v, nnx.Variable) else {}
        if "rule" in meta:
            out[path] = {k: meta[k] for k in RULE_KEYS if k in meta}
    return out
