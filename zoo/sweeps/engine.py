"""Train the members (LR x seed) of one shape: as ONE program over shared batches, or one by one.

Both paths run the same `Program.train_step` inside a jitted `fori_loop` over chunks of steps, batches
gathered on the device from `Dataset.device_arrays` with `Dataset.gather`. The members are split over the devices
(a `members` mesh; padded with copies of the last member to a multiple of the devices), and each device trains its
members in groups of `group`: a group's members vmapped, the groups one after another through the whole chunk of
steps, so a group's state stays in the cache across its steps (one group per device on an accelerator; on a CPU,
as many members as its share of the cache holds: `default_group`). Each member's peak LR is a traced value in its
optimizer state (`Program.init(key, lr)`); its init and step RNG come from its seed, so members
with one seed share their initial weights across learning rates. Members may also differ in the options of their
plugin (design.md section 3: plugin scalars may be traced): given a family `options -> Program` instead of a
Program, each member's options are traced values kept in its state, and its program is built from them inside
the compiled step, so one program trains, e.g., Depth-muP and (alpha, gamma) = (1/2, 0) side by side. Compile
time (ahead-of-time lowering, which also covers persistent-cache hits) is timed apart from steady-state running.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
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


def default_group(state_bytes: int, per_device: int) -> int:
    """Members vmapped together on one device. On an accelerator, all of its members (one small member leaves it
    idle). On a CPU, where each core is a device of its own (`zoo.train.backend.cpu_cores_as_devices`), the largest
    divisor of `per_device` whose members' train state (`state_bytes` each: weights, gradients, optimizer moments)
    fits in half of one core's share of the last-level cache, the rest left to the batches and activations: a group
    streams its members' state through every step of a chunk, so a group the cache holds gains from sharing each
    step's op overhead and from wider products, and a group that overflows it waits on memory (bench/sweep.py,
    docs/results/cpu-sweeps.md: for members of 3.4 MB of state on a core with 16 MB, groups of 2 beat groups of 1
    and 4 by 10%)."""
    if jax.default_backend() != "cpu":
        return per_device
    fits = max(1, cache_share_bytes() // 2 // max(1, state_bytes))
    return max(d for d in range(1, per_device + 1) if per_device % d == 0 and d <= fits)


@functools.cache
def cache_share_bytes() -> int:
    """One core's share of the last-level cache: its size over the CPUs sharing it (Linux sysfs; 8 MiB where it
    cannot be read)."""
    levels = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            size = (index / "size").read_text().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
            levels.append((int((index / "level").read_text()), int(size.rstrip("KM")) * scale,
                           _cpu_count((index / "shared_cpu_list").read_text())))
        except (OSError, ValueError):
            continue
    if not levels:
        return 8 << 20
    _, size, sharing = max(levels)
    return size // max(1, sharing)


def _cpu_count(cpu_list: str) -> int:
    """CPUs in a sysfs list such as "0-3,8,10-11"."""
    ranges = [part.split("-") for part in cpu_list.strip().split(",") if part]
    return sum(int(r[-1]) - int(r[0]) + 1 for r in ranges)


class MemberTrainer:
    """init(lrs, seeds[, options]) -> states; train(states, steps) -> (states, losses); evaluate(states) -> metrics.

    prog: a Program, or a family options -> Program (options: a dict of traced scalars, e.g. plugin options).
    vmapped=True: states hold all members (leading axis K, padded to a multiple of devices x group) and losses are
    [steps, K]; vmapped=False: one member per call (lrs and seeds of length 1) and losses are [steps]. group: members
    vmapped together on a device (default: `default_group`). fast_compile: every program compiles without XLA's
    backend optimisation (about half the compile time, slower steps): for runs of a few steps.
    """

    def __init__(self, prog: Program | Callable[[Options], Program], data: Any, batch_size: int, *,
                 eval_batch_size: int | None = None, vmapped: bool = True, chunk: int = 100, data_seed: int = 0,
                 fast_compile: bool = False, group: int | None = None):
        self.prog, self.data, self.batch_size, self.vmapped = prog, data, batch_size, vmapped
        self.fast_compile, self.group = fast_compile, group
        self.eval_batch_size = eval_batch_size or batch_size
        self.chunk, self.data_seed = max(1, chunk), data_seed
        self.compile_s, self.run_s = 0.0, 0.0
        self.members, self._group = 1, 1  # the members asked for (states may hold more: padding), their groups
        self._compiled: dict[Any, Callable] = {}
        self._mesh: Any = None
        if not vmapped:
            self._use_devices(1)  # vmapped members take up to every device (init)
        step, evaluate, init_one = _member_functions(prog)
        gather = data.gather

        def steps(state, arrays, idx, count, step):
            """The first `count` steps of the chunk's batch indices `idx` [chunk, batch], in a loop whose trip count
            is a traced value (a shorter last chunk runs the same program; a switched-off step under a `cond`
            made XLA copy the whole state every step) and whose carry is updated in place."""
            def body(i, carry):
                s, losses = carry
                s, metrics = step(s, gather(arrays, idx[i]))
                return s, losses.at[i].set(metrics["loss"])

            loss = jax.eval_shape(lambda s: step(s, gather(arrays, idx[0]))[1]["loss"], state)
            losses = jnp.zeros((idx.shape[0], *loss.shape), loss.dtype)
            return jax.lax.fori_loop(0, count, body, (state, losses))

        def grouped(states, arrays, idx, count, g):
            """A device's members [k, ...] in groups of g, each group through all of the chunk's steps."""
            k = jax.tree.leaves(states)[0].shape[0]
            if g == 1:  # the members one by one through the unbatched step
                groups, step_g = states, step
            else:
                groups = jax.tree.map(lambda a: a.reshape(k // g, g, *a.shape[1:]), states)
                step_g = jax.vmap(step, in_axes=(0, None))  # the batch shared
            _, (new, losses) = jax.lax.scan(lambda _, s: (None, steps(s, arrays, idx, count, step_g)), None, groups)
            new = jax.tree.map(lambda a: a.reshape(k, *a.shape[2 if g > 1 else 1:]), new)
            return new, jnp.moveaxis(losses.reshape(k, -1) if g == 1 else
                                     jnp.moveaxis(losses, 2, 1).reshape(k, -1), 0, 1)

        def train_chunk(states, arrays, idx, count, group, mesh):
            if not vmapped:
                return steps(states, arrays, idx, count, step)
            return jax.shard_map(functools.partial(grouped, g=group), mesh=mesh,
                                 in_specs=(P("members"), P(), P(), P()), out_specs=(P("members"), P(None, "members")),
                                 check_vma=False)(states, arrays, idx, count)

        def eval_sums(states, arrays, idx, weight):
            """Program.eval_sums of each batch of indices idx [batches, rows] with its row weights."""
            member_eval = jax.vmap(evaluate, in_axes=(0, None, None)) if vmapped else evaluate

            def body(carry, batch):
                i, w = batch
                return carry, member_eval(states, gather(arrays, i), w)

            return jax.lax.scan(body, None, (idx, weight))[1]

        def init(keys, lrs, options):
            if vmapped:
                return jax.vmap(init_one)(keys, lrs, options)
            return init_one(keys[0], lrs[0], jax.tree.map(lambda o: o[0], options))

        self._train_chunk = functools.cache(  # one program per group size and mesh
            lambda group, mesh: jax.jit(functools.partial(train_chunk, group=group, mesh=mesh), donate_argnums=0))
        self._eval_sums = jax.jit(eval_sums)
        self._init, self._init_one = jax.jit(init), init_one

    def _use_devices(self, n: int) -> None:
        """Train on the first n devices (a `members` mesh), the data on each of them."""
        if self._mesh is not None and self._mesh.size == n:
            return
        self._mesh = jax.make_mesh((n,), ("members",), axis_types=(jax.sharding.AxisType.Auto,),
                                   devices=jax.devices()[:n])
        everywhere = NamedSharding(self._mesh, P())
        self._train_arrays = self.data.device_arrays("train", everywhere)
        self._eval_arrays = self.data.device_arrays(self.data.eval_split, everywhere)

    @property
    def group_size(self) -> int:
        """Members vmapped together on a device (set by `init`)."""
        return self._group

    def _call(self, name: str, fn: Callable, *args: Any, fast_compile: bool = False) -> Any:
        """fn(*args), compiled ahead of time once per argument shapes; compile and run time accumulated.

        fast_compile: XLA backend optimisation off (RUN_ONCE), for programs that run once (init).
        """
        key = (name, self._mesh.size, jax.tree.structure(args), tuple(np.shape(a) for a in jax.tree.leaves(args)))
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
        with a program family, `options[k][i]` for each option k (arrays as long as lrs). Vmapped members are split
        over up to every device (no more devices than members), padded with copies of the last one to a multiple of
        devices x group."""
        if isinstance(self.prog, Program) != (options is None):
            raise ValueError("options go with a program family (options -> Program), and a family needs options")
        self.members = len(lrs)
        if self.vmapped:
            self._use_devices(min(jax.device_count(), len(lrs)))
        n = self._mesh.size
        options = {k: np.asarray(v, np.float32) for k, v in (options or {}).items()}
        one = jax.eval_shape(self._init_one, jax.random.PRNGKey(0), jnp.float32(1),
                             {k: v[0] for k, v in options.items()})
        per_device = -(-len(lrs) // n)
        state_bytes = _nbytes(one) + _nbytes(one["params"])  # the state and the gradients
        self._group = min(self.group or default_group(state_bytes, per_device), per_device)
        pad = np.r_[np.arange(len(lrs)), np.full(-len(lrs) % (n * self._group), len(lrs) - 1)] if self.vmapped \
            else np.arange(len(lrs))
        keys = jax.vmap(jax.random.PRNGKey)(jnp.asarray(np.asarray(seeds)[pad], jnp.int32))
        options = {k: jnp.asarray(v[pad]) for k, v in options.items()}
        states = self._call("init", self._init, keys, jnp.asarray(np.asarray(lrs)[pad], jnp.float32), options,
                            fast_compile=True)
        if self.vmapped and n > 1:
            states = jax.device_put(states, NamedSharding(self._mesh, P("members")))
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
            program = self._train_chunk(self._group, self._mesh)
            states, loss = self._call(f"train (groups of {self._group})", program, states, self._train_arrays,
                                      jnp.asarray(idx), jnp.asarray(n, jnp.int32))
            losses.append(np.asarray(loss)[:n, :self.members] if self.vmapped else np.asarray(loss)[:n])
        return states, np.concatenate(losses) if losses else np.zeros((0,))

    def evaluate(self, states: State, limit: int | None = None) -> dict[str, np.ndarray]:
        """Eval loss and accuracy over the eval split, or a fixed random subset of `limit` of its examples (eval
        sets may be sorted by class) (per member when vmapped): the sums of `Program.eval_sums` over the batches
        divided by their count, the reduction train.py's eval makes (zoo.train.compiled), padding rows weighted 0.

        K vmapped members see eval_batch_size // K examples each per eval step, so an eval step holds one
        run's eval activations, not K of them.
        """
        members = int(states["step"].shape[0]) if self.vmapped else 1
        every = np.concatenate(self.data.eval_indices(self.eval_batch_size)).astype(np.int32)
        if limit is not None:
            every = np.sort(np.random.default_rng(0).permutation(every)[:limit])
        rows = max(1, min(self.eval_batch_size // members, len(every)))  # padding beyond the set is memory only
        pad = -len(every) % rows
        idx = np.concatenate([every, np.zeros(pad, np.int32)]).reshape(-1, rows)
        weight = np.concatenate([np.ones(len(every), np.float32), np.zeros(pad, np.float32)]).reshape(-1, rows)
        sums = self._call("eval", self._eval_sums, states, self._eval_arrays, jnp.asarray(idx), jnp.asarray(weight))
        totals = {k: np.asarray(v, np.float64).sum(0) for k, v in sums.items()}
        count = totals.pop("count")
        return {k: (v / count)[:self.members] if self.vmapped else v / count for k, v in totals.items()}


def _nbytes(tree: Any) -> int:
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree))


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
