"""Pure functions of a run (init, train step, eval step) for one model, plugin and optimizer.

The state is a plain pytree {params, rest, opt, step, key}: params are the tagged nnx.Params, rest every
other model variable (forward multipliers, ...). The same step serves train.py (jit with shardings) and the
sweeps (vmapped over members that differ in LR and seed).

With `grad_accum` K the batch of B examples is split into K microbatches (example i goes to microbatch i mod K,
so each device's shard splits locally) whose gradients are averaged in a `lax.scan`: the same mean gradient as
the whole batch, at 1/K of the activation memory (dropout masks are drawn per microbatch).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from zoo import optim
from zoo.data.augment import unit_range
from zoo.param import scalars
from zoo.param.base import Parametrization
from zoo.param.tags import Tag
from zoo.train.loss import cross_entropy, soft_cross_entropy
from zoo.tree import key_path

State = dict[str, Any]
Batch = dict[str, jax.Array]


def run_once_options() -> dict[str, Any]:
    """Compiler options for programs that run once (init, a checkpoint's checksums, the audit's probe).

    XLA's backend optimisation off compiles them about twice as fast, and their run time does not matter. On CPU,
    XLA's elemental fusion emitters in place of its MLIR ones halve that again (a tiny GPT's train step 3.5 -> 1.3
    CPU-s; the numbers agree to float32 rounding); that option is the CPU compiler's alone, and a GPU's refuses it
    ("No such compile option"), so it is asked for only where the default backend is the CPU."""
    options: dict[str, Any] = {"xla_backend_optimization_level": 0}
    if jax.default_backend() == "cpu":
        options["xla_cpu_use_fusion_emitters"] = False
    return options


def jit_run_once(fn: Callable) -> Callable:
    """`fn` jitted with run_once_options(), made at its first call: asking for the backend starts it, which a module's
    import must not do (jax.distributed.initialize and the CPU's inline steps come before any backend starts)."""
    jitted: list[Callable] = []

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not jitted:
            jitted.append(jax.jit(fn, compiler_options=run_once_options()))
        return jitted[0](*args, **kwargs)

    return call


# A short run of a small model (at most SHORT_RUN steps of at most SMALL_STEP_FLOPS each, as XLA counts the lowered
# step) compiles its train and eval programs with run_once_options() too: it would spend more time compiling than
# stepping. Measured on the 2-core CPU: a tiny GPT's step (2e9 by that count) compiles in 1.3 instead of 10 CPU-s, then
# takes 46 instead of 14 ms (these options pay up to about 250 steps); a width-64 MLP-ResNet's (6e7) in 0.3 instead of
# 1.5 s, then 7.7 instead of 2.9 ms (about 150 steps); the ViT default's at batch 64 (7e10) in 6 instead of 12 s, then
# 3.2 instead of 1.8 s (4 steps). XLA counts a loop's body once (scanned blocks, microbatches), so the count is a size's
# floor, and the step limit stays well below every break-even measured.
SHORT_RUN, SMALL_STEP_FLOPS = 20, 1e10


def prepare_inputs(x: jax.Array, dtype: Any) -> jax.Array:
    """uint8 images -> [-1, 1] in the compute dtype; token ids pass through."""
    if x.dtype == jnp.uint8:
        return unit_range(x).astype(dtype)
    if jnp.issubdtype(x.dtype, jnp.floating):
        return x.astype(dtype)
    return x


def per_example(model: nnx.Module, batch: Batch, key: jax.Array | None, train: bool,
                dtype: Any = jnp.float32, smoothing: float = 0.0) -> tuple[jax.Array, jax.Array]:
    """Cross-entropy and accuracy per example (B,), averaged over the tokens of a language model's window; the
    accuracy against the labels y (with mixed images: each image's own)."""
    logits, _ = model(prepare_inputs(batch["x"], dtype), key=key, train=train)
    if "target" in batch or smoothing:  # mixed or smoothed labels
        ce, correct = soft_cross_entropy(logits, batch["y"], batch.get("target"), smoothing)
    else:
        ce, correct = cross_entropy(logits, batch["y"])  # the logits in their own dtype (zoo.train.loss)
    acc = correct.astype(jnp.float32)
    axes = tuple(range(1, ce.ndim))
    return ce.mean(axes), acc.mean(axes)


def loss_and_metrics(model: nnx.Module, batch: Batch, key: jax.Array | None, train: bool,
                     dtype: Any = jnp.float32, smoothing: float = 0.0) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Mean cross-entropy (per example, or per token for language models) and accuracy."""
    ce, acc = per_example(model, batch, key, train, dtype, smoothing)
    return ce.mean(), {"loss": ce.mean(), "accuracy": acc.mean()}


@dataclasses.dataclass(frozen=True)
class Numbers:
    """A program's plugin numbers as data (zoo.param.scalars), and how to rebuild the program around traced ones.

    `values`: {"model": the answers to the model's `questions`, "grad_scale", "lr_mult": the optimizer's rules
    (zoo.optim.rules), "decayed": each parameter's weight decay (the run's times the plugin's wd_mult), as lists in
    the parameters' leaf order}, float32 numbers.
    """

    questions: tuple[scalars.Question, ...]
    zeros: frozenset  # the questions answered with the constant 0 (scalars.zero_stds)
    values: dict[str, Any]
    model_of: Callable[[Any, nnx.Rngs], nnx.Module]
    plugin: Parametrization
    params: Any  # the parameters' tree structure, for the rules' lists
    chain: Callable[..., optax.GradientTransformation]  # (grad_scale, lr_mult, wd_mult, decayed=) -> the optimizer

    def tree(self, values: list[Any]) -> Any:
        """A list in the parameters' leaf order as their tree."""
        return jax.tree.unflatten(jax.tree.structure(self.params), values)


@dataclasses.dataclass(frozen=True)
class Program:
    """init(key) -> state; train_step(state, batch) -> (state, metrics); eval_step(state, batch) -> metrics.
    `augment(key, batch) -> batch` (zoo.data.augment) and label smoothing act in training only.

    `numbers` (a program built from a model that takes its plugin, `build_program(model_of=...)`): the plugin's
    numbers, and `with_numbers` the same program around other (traced) ones. `horizon`: the run's length in steps
    (with a step's cost, it sets `compile_options`)."""

    graphdef: Any
    tx: optax.GradientTransformation
    make_model: Callable[[nnx.Rngs], nnx.Module]
    dtype: Any = jnp.float32
    augment: Callable[[jax.Array, Batch], Batch] | None = None
    grad_accum: int = 1
    label_smoothing: float = 0.0
    numbers: Numbers | None = None
    horizon: int | None = None

    def compile_options(self, step_flops: Callable[[], float | None]) -> dict[str, Any] | None:
        """The compiler options of the run's train and eval programs, given one train step's floating-point operations
        as XLA counts them (`step_flops()`, asked only for a short run: `flops_of`; the microbatches' loop counts one
        of `grad_accum`): run_once_options() for a short run of a small model (SHORT_RUN, SMALL_STEP_FLOPS), train.py
        and a sweep's members by the same rule, so a member's losses are its train.py run's."""
        if self.horizon is None or self.horizon > SHORT_RUN:
            return None
        flops = step_flops()
        return run_once_options() if flops is not None and flops * self.grad_accum <= SMALL_STEP_FLOPS else None

    def with_numbers(self, values: dict[str, Any]) -> Program:
        """This program with the plugin numbers `values` (shaped as `numbers.values`; traced arrays inside a jit): its
        init builds the model from them and its optimizer applies them, so a program traced so holds no plugin
        number as a constant (one program serves every plugin, LR and seed of a shape)."""
        n = self.numbers
        if n is None:
            raise ValueError("this program was built without its plugin's numbers (build_program(model_of=...))")
        plugin = scalars.replay(n.plugin, n.questions, values["model"], n.zeros)
        tx = n.chain(n.tree(values["grad_scale"]), n.tree(values["lr_mult"]), None, decayed=n.tree(values["decayed"]))
        return dataclasses.replace(self, make_model=functools.partial(n.model_of, plugin), tx=tx)

    def init(self, key: jax.Array, lr: jax.Array | None = None) -> State:
        init_key, run_key = jax.random.split(key)
        _, params, rest = nnx.split(self.make_model(nnx.Rngs(init_key)), nnx.Param, ...)
        opt = self.tx.init(params)
        if lr is not None:
            opt = optim.set_lr(opt, lr)
        return {"params": params, "rest": rest, "opt": opt, "step": jnp.zeros([], jnp.int32), "key": run_key}

    def model(self, state: State) -> nnx.Module:
        return nnx.merge(self.graphdef, state["params"], state["rest"])

    def train_step(self, state: State, batch: Batch) -> tuple[State, dict[str, jax.Array]]:
        (_, metrics), grads = self._grads(state, *self._step_inputs(state, batch))
        updates, opt = self.tx.update(grads, state["opt"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        metrics = {**metrics, "grad_norm": optax.global_norm(grads)}
        return {**state, "params": params, "opt": opt, "step": state["step"] + 1}, metrics

    def gradients(self, state: State, batch: Batch) -> Any:
        """The gradient the train step takes at `state` from `batch`: after its augmentation, under its dropout keys
        and label smoothing (zoo.audit compares the step's update with it)."""
        return self._grads(state, *self._step_inputs(state, batch))[1]

    def _step_inputs(self, state: State, batch: Batch) -> tuple[Batch, jax.Array]:
        """The batch as the step at state["step"] trains on it (augmented), and its dropout key."""
        aug_key, drop_key = jax.random.split(jax.random.fold_in(state["key"], state["step"]))
        return (batch if self.augment is None else self.augment(aug_key, batch)), drop_key

    def _grads(self, state: State, batch: Batch, key: jax.Array) -> tuple[tuple[jax.Array, dict], Any]:
        """(loss, metrics) and the gradient of the batch mean, over `grad_accum` microbatches."""

        def loss_fn(params, micro, k):
            model = nnx.merge(self.graphdef, params, state["rest"])
            return loss_and_metrics(model, micro, k, True, self.dtype, self.label_smoothing)

        value_and_grad = jax.value_and_grad(loss_fn, has_aux=True)
        k = self.grad_accum
        if k == 1:
            return value_and_grad(state["params"], batch, key)
        micro = jax.tree.map(lambda a: a.reshape(a.shape[0] // k, k, *a.shape[1:]).swapaxes(0, 1), batch)

        def body(total, xs):
            i, mb = xs
            out = value_and_grad(state["params"], mb, jax.random.fold_in(key, i))
            return jax.tree.map(jnp.add, total, out), None

        zero = jax.tree.map(jnp.zeros_like, jax.eval_shape(value_and_grad, state["params"],
                                                           jax.tree.map(lambda a: a[0], micro), key))
        total, _ = jax.lax.scan(body, zero, (jnp.arange(k), micro))
        return jax.tree.map(lambda t: t / k, total)

    def eval_step(self, state: State, batch: Batch) -> dict[str, jax.Array]:
        return loss_and_metrics(self.model(state), batch, None, False, self.dtype)[1]

    def eval_sums(self, state: State, batch: Batch, weight: jax.Array) -> dict[str, jax.Array]:
        """Weighted sums of the per-example loss and accuracy, and the weight (padding rows have weight 0)."""
        ce, acc = per_example(self.model(state), batch, None, False, self.dtype)
        return {"loss": jnp.sum(ce * weight), "accuracy": jnp.sum(acc * weight), "count": jnp.sum(weight)}


def on_leaves(step: Callable[..., tuple[State, Any]], treedef: Any) -> Callable[..., tuple[list[Any], Any]]:
    """step(state, *args) -> (state, out) as a function of the state's flat list of arrays: flattening and rebuilding
    the state's NNX variables in Python costs about 1.7 ms a call (a fifth of a small GPT's step on CPU); a list of
    arrays goes through jit's C++ path."""

    def run(leaves: list[Any], *args: Any) -> tuple[list[Any], Any]:
        new, out = step(treedef.unflatten(leaves), *args)
        return treedef.flatten_up_to(new), out

    return run


def flops_of(lowered: jax.stages.Lowered, per: int = 1) -> float | None:
    """The floating-point operations of a lowered program as XLA's cost analysis counts them (a loop's body once),
    over `per` (the members a sweep's step trains side by side); None where the backend does not count them (JAX
    raises NotImplementedError for a lowered program on a backend behind the PJRT C API)."""
    try:
        flops = (lowered.cost_analysis() or {}).get("flops")
    except NotImplementedError:
        return None
    return None if flops is None else float(flops) / per


def check_tagged(params: nnx.State) -> None:
    """Every parameter carries its Tag (nnx.Param(value, tag=Tag(...)), what its plugin scales it by), one its shape
    fits (Tag.misfit): one without is named, where the optimizer's rules would have failed on a bare missing key,
    and so is one whose tag its shape contradicts, which trained by another kind's rules."""
    flat = jax.tree_util.tree_flatten_with_path(params, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]
    for path, v in flat:
        if not isinstance(v, nnx.Variable):
            continue
        tag = v.get_metadata().get("tag")
        if not isinstance(tag, Tag):
            raise ValueError(f"the model's parameter {key_path(path)} has no tag, which its plugin scales it by: "
                             "create it with zoo.models.layers.tagged_param, or as nnx.Param(value, "
                             "tag=zoo.param.Tag(kind, fan_in, fan_out, ...))")
        if why := tag.misfit(tuple(v.shape)):
            raise ValueError(f"the model's parameter {key_path(path)} {tuple(v.shape)} is tagged {tag.kind}, fan-in "
                             f"{tag.fan_in}, fan-out {tag.fan_out}: {why}; give it the tag its shape has")


def build_program(make_model: Callable[[nnx.Rngs], nnx.Module] | None, plugin: Parametrization,
                  optim_cfg: optim.OptimConfig, dtype: Any = jnp.float32,
                  augment: Callable[[jax.Array, Batch], Batch] | None = None, grad_accum: int = 1,
                  horizon: int | None = None, label_smoothing: float = 0.0, *,
                  model_of: Callable[[Any, nnx.Rngs], nnx.Module] | None = None) -> Program:
    """Builds the optimizer from the abstract model's tags (`horizon`: the run's length, for decaying schedules);
    nothing is materialised. The model: `make_model(rngs)`, or `model_of(plugin, rngs)` (make_model None), which also
    gives the program its plugin `numbers` (Program.with_numbers)."""
    if model_of is None:
        abstract, answers = nnx.eval_shape(lambda: make_model(nnx.Rngs(0))), None
    else:
        make_model = functools.partial(model_of, plugin)
        abstract, answers = scalars.record(lambda p: nnx.eval_shape(lambda: model_of(p, nnx.Rngs(0))), plugin)
    graphdef, params, _ = nnx.split(abstract, nnx.Param, ...)
    check_tagged(params)
    chain = functools.partial(optim.chain, optim_cfg, route=optim.routes(optim_cfg, params, plugin), horizon=horizon)
    rules = optim.rules(plugin, params, optim_cfg)
    numbers = None
    if answers is not None:
        leaves = {k: jax.tree.leaves(getattr(rules, k)) for k in optim.Rules._fields}
        values = {"model": list(answers.values()),
                  **{k: [np.float32(x) for x in leaves[k]] for k in ("grad_scale", "lr_mult")},
                  "decayed": [np.float32(optim_cfg.decay * w) for w in leaves["wd_mult"]]}
        numbers = Numbers(tuple(answers), scalars.zero_stds(answers), values, model_of, plugin, params, chain)
    return Program(graphdef, chain(*rules), make_model, dtype, augment, grad_accum, label_smoothing, numbers, horizon)
