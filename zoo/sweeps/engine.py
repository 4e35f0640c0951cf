"""Train the members (LR x seed) of one shape: as ONE vmapped program over shared batches, or one by one.

Both paths run the same `Program.train_step` inside a jitted `fori_loop` over chunks of steps, batches
gathered on the device from `Dataset.device_arrays` with `Dataset.gather`. Each member's peak LR is a traced
value in its optimizer state (`Program.init(key, lr)`); its init and step RNG come from its seed, so members
with one seed share their initial weights across learning rates. Members may also differ in the options of their
plugin (design.md section 3: plugin scalars may be traced): given a family `options -> Program` instead of a
Program, each member's options are traced values kept in its state, and its program is built from them inside
the compiled step, so one program trains, e.g., Depth-muP and (alpha, gamma) = (1/2, 0) side by side. With
several devices, the members are split over a `data` mesh (each device trains K / devices of them; the data is
replicated). Compile time (ahead-of-time lowering, which also covers persistent-cache hits) is timed apart from
steady-state running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from zoo.train import memory
from zoo.train.step import RUN_ONCE, Batch, Program, State

Options = dict[str, Any]

ADVICE = "sweep fewer --lrs (members) at once, or a smaller model or --batch-size"


def per_member_batch(step: Callable[[State, Any], Any]) -> Callable[[State, Any], Any]:
    """A vmapped step fed the shared batch as one copy per member. A batch left unbatched makes XLA:CPU contract
    it against all members' weights at once, transposing the weight-sized (members, in, out) stack to
    (in, members * out) and back every step; K copies of the batch keep K plain products instead."""

    def run(states: State, batch: Any) -> Any:
        members = jax.tree.leaves(states)[0].shape[0]
        return step(states, jax.tree.map(lambda a: jnp.broadcast_to(a, (members, *a.shape)), batch))

    return run


class MemberTrainer:
    """init(lrs, seeds[, options]) -> states; train(states, steps) -> (states, losses); evaluate(states) -> metrics.

    prog: a Program, or a family options -> Program (options: a dict of traced scalars, e.g. plugin options).
    vmapped=True: states hold all members (leading axis K) and losses are [steps, K]; vmapped=False: one
    member per call (lrs and seeds of length 1) and losses are [steps]. fast_compile: every program compiles without
    XLA's backend optimisation (about half the compile time, slower steps): for runs of a few steps.
    """

    def __init__(self, prog: Program | Callable[[Options], Program], data: Any, batch_size: int, *,
                 eval_batch_size: int | None = None, vmapped: bool = True, chunk: int = 100, data_seed: int = 0,
                 fast_compile: bool = False):
        self.prog, self.data, self.batch_size, self.vmapped = prog, data, batch_size, vmapped
        self.fast_compile = fast_compile
        self.eval_batch_size = eval_batch_size or batch_size
        self.chunk, self.data_seed = max(1, chunk), data_seed
        self.compile_s, self.run_s = 0.0, 0.0
        self._compiled: dict[Any, Callable] = {}
        self._train_arrays = data.device_arrays("train")
        self._eval_arrays = data.device_arrays(data.eval_split)
        step, evaluate, init_one = _member_functions(prog)
        if vmapped:
            step = per_member_batch(jax.vmap(step))
            evaluate = jax.vmap(evaluate, in_axes=(0, None, None))
        gather = data.gather

        def train_chunk(states, arrays, idx, count):
            """The first `count` steps of the chunk's batch indices `idx` [chunk, batch], in a loop whose trip count
            is a traced value (a shorter last chunk runs the same program; a switched-off step under a `cond`
            made XLA copy the whole state every step) and whose carry is updated in place."""
            def body(i, carry):
                s, losses = carry
                s, metrics = step(s, gather(arrays, idx[i]))
                return s, losses.at[i].set(metrics["loss"])

            loss = jax.eval_shape(lambda s: step(s, gather(arrays, idx[0]))[1]["loss"], states)
            losses = jnp.zeros((idx.shape[0], *loss.shape), loss.dtype)
            return jax.lax.fori_loop(0, count, body, (states, losses))

        def eval_sums(states, arrays, idx, weight):
            """Program.eval_sums of each batch of indices idx [batches, rows] with its row weights."""
            def body(carry, batch):
                i, w = batch
                return carry, evaluate(states, gather(arrays, i), w)

            return jax.lax.scan(body, None, (idx, weight))[1]

        def init(keys, lrs, options):
            if vmapped:
                return jax.vmap(init_one)(keys, lrs, options)
            return init_one(keys[0], lrs[0], jax.tree.map(lambda o: o[0], options))

        self._train_chunk = jax.jit(train_chunk, donate_argnums=0)
        self._eval_sums = jax.jit(eval_sums)
        self._init = jax.jit(init)

    def _call(self, name: str, fn: Callable, *args: Any, fast_compile: bool = False) -> Any:
        """fn(*args), compiled ahead of time once per argument shapes; compile and run time accumulated.

        fast_compile: XLA backend optimisation off (RUN_ONCE), for programs that run once (init).
        """
        key = (name, jax.tree.structure(args), tuple(np.shape(a) for a in jax.tree.leaves(args)))
        if key not in self._compiled:
            t0 = time.perf_counter()
            options = RUN_ONCE if fast_compile or self.fast_compile else None
            compiled = fn.lower(*args).compile(compiler_options=options)
            free = memory.free_memory()  # the arguments already on the device count as free for their program
            resident = sum(a.nbytes for a in jax.tree.leaves(args) if isinstance(a, jax.Array))
            memory.check_compiled(compiled, f"sweep's {name} program", ADVICE, free and free + resident)
            self._compiled[key] = compiled
            self.compile_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        out = jax.block_until_ready(self._compiled[key](*args))
        self.run_s += time.perf_counter() - t0
        return out

    def init(self, lrs: np.ndarray, seeds: np.ndarray, options: Options | None = None) -> State:
        """Initial states; the member with seed s gets jax.random.PRNGKey(s) (as train.py --seed s) and its LR, and
        with a program family, options[k][i] for each option k (arrays as long as lrs). Vmapped members are split
        over the devices when their number divides evenly."""
        if isinstance(self.prog, Program) != (options is None):
            raise ValueError("options go with a program family (options -> Program), and a family needs options")
        keys = jax.vmap(jax.random.PRNGKey)(jnp.asarray(seeds, jnp.int32))
        options = {k: jnp.asarray(v, jnp.float32) for k, v in (options or {}).items()}
        states = self._call("init", self._init, keys, jnp.asarray(lrs, jnp.float32), options, fast_compile=True)
        n = jax.device_count()
        if self.vmapped and n > 1 and len(lrs) % n == 0:
            mesh = jax.make_mesh((n,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
            states = jax.device_put(states, NamedSharding(mesh, P("data")))
        return states

    def batch_indices(self, start: int, count: int) -> np.ndarray:
        """The train indices of steps start .. start+count-1, shape [count, batch]."""
        return np.stack([np.asarray(self.data.indices("train", t, self.batch_size, self.data_seed))
                         for t in range(start, start + count)])

    def train(self, states: State, steps: int, start: int = 0) -> tuple[State, np.ndarray]:
        """`steps` train steps from step `start`; the per-step train losses.

        Steps run in chunks of `chunk` (one compiled loop); a last, shorter chunk runs the same program for fewer
        steps, so one shape compiles one train program.
        """
        chunk = min(self.chunk, steps)
        losses = []
        for t in range(start, start + steps, chunk):
            n = min(chunk, start + steps - t)
            idx = self.batch_indices(t, n)
            idx = np.concatenate([idx, np.repeat(idx[-1:], chunk - n, 0)])
            states, loss = self._call("train", self._train_chunk, states, self._train_arrays, jnp.asarray(idx),
                                      jnp.asarray(n, jnp.int32))
            losses.append(np.asarray(loss)[:n])
        return states, np.concatenate(losses) if losses else np.zeros((0,))

    def evaluate(self, states: State, limit: int | None = None) -> dict[str, np.ndarray]:
        """Eval loss and accuracy over the eval split, or a fixed random subset of `limit` of its examples (eval
        sets may be sorted by class) (per member when vmapped): the sums of `Program.eval_sums` over the batches
        divided by their count, the reduction train.py's eval makes (zoo.train.compiled), padding rows weighted 0.

        K vmapped members see eval_batch_size // K examples each per eval step, so an eval step holds one
        run's eval activations, not K of them.
        """
        members = int(states["step"].shape[0]) if self.vmapped else 1
        rows = max(1, self.eval_batch_size // members)
        every = np.concatenate(self.data.eval_indices(rows)).astype(np.int32)
        if limit is not None:
            every = np.sort(np.random.default_rng(0).permutation(every)[:limit])
        pad = -len(every) % rows
        idx = np.concatenate([every, np.zeros(pad, np.int32)]).reshape(-1, rows)
        weight = np.concatenate([np.ones(len(every), np.float32), np.zeros(pad, np.float32)]).reshape(-1, rows)
        sums = self._call("eval", self._eval_sums, states, self._eval_arrays, jnp.asarray(idx), jnp.asarray(weight))
        totals = {k: np.asarray(v, np.float64).sum(0) for k, v in sums.items()}
        count = totals.pop("count")
        return {k: v / count for k, v in totals.items()}


def _member_functions(prog: Program | Callable[[Options], Program]) -> tuple[Callable, Callable, Callable]:
    """(train_step, eval_sums, init(key, lr, options)) of one member. For a family, the member's options live in its
    state under "options" and its program is built from them wherever it is traced."""
    if isinstance(prog, Program):
        return prog.train_step, prog.eval_sums, lambda key, lr, options: prog.init(key, lr)

    def split(state: State) -> tuple[Program, State]:
        return prog(state["options"]), {k: v for k, v in state.items() if k != "options"}

    def train_step(state: State, batch: Batch) -> tuple[State, dict]:
        member, rest = split(state)
        new, metrics = member.train_step(rest, batch)
        return {**new, "options": state["options"]}, metrics

    def eval_sums(state: State, batch: Batch, weight: jax.Array) -> dict:
        member, rest = split(state)
        return member.eval_sums(rest, batch, weight)

    def init(key: jax.Array, lr: jax.Array, options: Options) -> State:
        return {**prog(options).init(key, lr), "options": options}

    return train_step, eval_sums, init
