"""The run's programs: the train step jitted with the state's and the batch's shardings and the state donated,
compiled ahead of time (so its memory is checked before it runs); eval as weighted sums over fixed-size batches;
and `check_fits`, everything about the step that can be checked before a run dir is written."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from zoo.train import memory
from zoo.train.input import MemoryInput, StreamInput, replicate
from zoo.train.mesh import MeshPlan
from zoo.train.setup import Setup
from zoo.train.step import flops_of, on_leaves

# A text run's eval loss in bits (loss / ln 2), named by what its tokens are: bits per character for a char
# tokenizer, per byte for a byte-level one, per token for BPE (whose tokens span several characters).
BITS = {"char": "bpc", "byte": "bits_per_byte", "bpe": "bits_per_token"}


def _flash(s: Setup) -> bool:
    return s.cfg.loop.precision == "bf16" and jax.default_backend() == "gpu"


def abstract_batch(s: Setup) -> dict[str, jax.ShapeDtypeStruct]:
    """The shapes and dtypes of one train batch."""
    example = s.data.read("train", np.arange(1))
    return {k: jax.ShapeDtypeStruct((s.cfg.loop.batch_size, *v.shape[1:]), v.dtype) for k, v in example.items()}


def check_fits(s: Setup, plan: MeshPlan, abstract_state: Any, forward_bytes: int) -> None:
    """The batch splits over the mesh, a tensor axis divides the model, and the forward pass's activations
    (`forward_bytes`: memory.forward_bytes of the run, whose trace a bad model option fails; without the attention
    logits where a flash kernel never materialises them) fit the devices; nothing compiled or allocated."""
    plan.check_run(abstract_state, s.cfg.loop.batch_size, s.cfg.loop.grad_accum)
    needed = memory.activation_bytes(s.program, abstract_state, abstract_batch(s), True) if _flash(s) else forward_bytes
    memory.check_activations(kept_activations(s, needed, plan.batch_ways))


def kept_activations(s: Setup, needed: int, ways: int = 1) -> float:
    """`memory.per_device` for this run's --grad-accum and --remat."""
    loop = s.cfg.loop
    return memory.per_device(needed, ways, loop.grad_accum, s.model_cfg.depth if loop.remat == "block" else 1)


class Compiled:
    """train(leaves, args) -> (leaves, metrics) on the state's flat list of arrays (`flatten`, `unflatten`);
    evaluate(state) -> eval metrics; loss_at(state, step).

    The train step takes the leaves, not the state (`on_leaves`), and the plugin's numbers as an argument where the
    program has them (Program.with_numbers): the step a sweep's member takes, bit for bit, and one program for every
    plugin of the shape (XLA folds constants, (x * c1) * c2 into x * (c1 c2), where it cannot fold arguments)."""

    def __init__(self, s: Setup, plan: MeshPlan, batches: MemoryInput | StreamInput, state: Any,
                 say: Callable[[str], None], trains: bool = True):
        prog = s.program
        state_sh = jax.tree.map(lambda x: x.sharding, state)
        self.treedef = jax.tree.structure(state)
        leaves_sh = self.flatten(state_sh)
        numbers = {} if prog.numbers is None else prog.numbers.values
        numbers_sh = jax.tree.map(lambda _: plan.replicated, numbers)
        self._numbers = jax.tree.map(lambda v: replicate(np.asarray(v), plan.replicated), numbers)

        def step(st: Any, args: Any, values: Any) -> Any:
            return (prog if prog.numbers is None else prog.with_numbers(values)).train_step(st, batches.batch(args))

        train = jax.jit(on_leaves(step, self.treedef), in_shardings=(leaves_sh, batches.shardings, numbers_sh),
                        out_shardings=(leaves_sh, plan.replicated), donate_argnums=0)
        mesh = ",".join(f"{k}={v}" for k, v in plan.sizes.items() if v > 1) or "data=1"
        t0 = time.perf_counter()
        lowered = train.lower(self.flatten(state), batches.args_at(0), self._numbers)
        options = prog.compile_options(lambda: flops_of(lowered))  # the evals' too
        self._train = None  # a run resumed at its last step (killed before its summary) trains nothing
        if trains:
            say(f"compiling the train step (batch {s.cfg.loop.batch_size} on {jax.device_count()} "
                f"{jax.devices()[0].platform} device(s), mesh {mesh})")
            self._train = lowered.compile(options)
            used = memory.check_compiled(self._train)
            say(f"compiled in {time.perf_counter() - t0:.1f} s" +
                (f"; {used / memory.GB:.2f} GB per device (XLA's estimate)" if used else ""))
        self._eval = jax.jit(lambda st, args: prog.eval_sums(st, batches.batch(args), args["weight"]),
                             in_shardings=(state_sh, batches.eval_shardings), out_shardings=plan.replicated,
                             compiler_options=options)
        self._loss = jax.jit(lambda st, args: prog.eval_step(st, batches.batch(args)),
                             in_shardings=(state_sh, batches.shardings), out_shardings=plan.replicated,
                             compiler_options=options)
        self.batches = batches
        self.bits = BITS[s.data.tokenizer.meta()["kind"]] if s.data.kind == "text" else None

    def train(self, leaves: list[Any], args: Any) -> tuple[list[Any], Any]:
        """One train step on the state's leaves and the step's batch arguments."""
        return self._train(leaves, args, self._numbers)

    def flatten(self, state: Any) -> list[Any]:
        return self.treedef.flatten_up_to(state)

    def unflatten(self, leaves: list[Any]) -> Any:
        return self.treedef.unflatten(leaves)

    def loss_at(self, state: Any, step: int) -> dict[str, float]:
        """The loss of `state` on step `step`'s batch (no dropout): checked before a state is saved."""
        return jax.device_get(self._loss(state, self.batches.args_at(step)))

    def batch_loss(self, state: Any, args: dict[str, Any]) -> dict[str, jax.Array]:
        """The loss and accuracy of `state` on a batch of the training batch size (no dropout), on the device."""
        return self._loss(state, args)

    def evaluate(self, state: Any, stop: Callable[[], bool] = lambda: False) -> dict[str, float] | None:
        """The eval split's mean loss and accuracy (and bits); None where `stop()` turned true before its end."""
        totals: dict[str, float] = {}
        for args in self.batches.eval_args():
            if stop():
                return None
            for k, v in jax.device_get(self._eval(state, args)).items():
                totals[k] = totals.get(k, 0.0) + float(v)
        count = totals.pop("count")
        out = {k: v / count for k, v in totals.items()}
        if self.bits:
            out[self.bits] = out["loss"] / math.log(2)
        return out
