"""Train the members (LR x seed) of one shape: as ONE program over shared batches, or one by one.

Both paths run the same `Program.train_step` inside a jitted `fori_loop` over chunks of steps, batches
gathered on the device from `Dataset.device_arrays` with `Dataset.gather`. The members are split over the devices
(a `members` mesh; padded with copies of the last member to a multiple of the devices), and each device trains its
members in groups of `group`: a group's members vmapped, the groups one after another through the whole chunk of
steps, so a group's state stays in the cache across its steps (one group per device on an accelerator; on a CPU,
as many members as its share of the cache holds: `default_group`). The states are kept group by group, and one
program trains a group (`group` members on every device), called once per group: its compile does not depend on
the member count (a loop over the groups inside the program took XLA about 1.3x as long to compile, and slicing
each group out of stacked states about 1.2x: bench/sweep.py's members on a 2-core CPU). Each member's peak LR is a
traced value in its optimizer state (`Program.init(key, lr)`); its init and step RNG come from its seed, so members
with one seed share their initial weights across learning rates. Members may also differ in the options of their
plugin (design.md section 3: plugin scalars may be traced): given a family `options -> Program` instead of a
Program, each member's options are traced values kept in its state, and its program is built from them inside
the compiled step, so one program trains, e.g., Depth-muP and (alpha, gamma) = (1/2, 0) side by side; a Program
built with its plugin's numbers as data (zoo.train.step.Numbers) trains as the family of them, so no LR, seed or
plugin number is a constant of its programs and every plugin and grid of a shape shares them. The programs compile
ahead of time, from shapes alone and side by side (`prepare`, zoo.sweeps.programs), timed apart from steady-state
running (a persistent-cache hit counts as a compile).
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

from zoo.sweeps.programs import Programs, key_of
from zoo.train.step import Batch, Program, State, flops_of, run_once_options

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

    prog: a Program, or a family options -> Program (options: a dict of traced scalars, e.g. plugin options). A
    Program with its plugin's `numbers` trains as the family of them (`Program.with_numbers`), each member holding
    them: its programs hold no plugin number, LR or seed as a constant.
    vmapped=True: states hold all members group by group (a list of states with leading axis devices x group, K
    members in all, padded to a multiple of devices x group: `member`, `held`) and losses are [steps, K];
    vmapped=False: one member per call (lrs and seeds of length 1; states a list of its one state) and losses are
    [steps]. group: members vmapped together on a device (default: `default_group`). fast_compile: every program
    compiles with run_once_options() (XLA's backend optimisation off: a fraction of the compile time, slower steps),
    as a Program of a short run's train and eval programs do (`Program.compile_options`): for runs of a few steps.
    """

    def __init__(self, prog: Program | Callable[[Options], Program], data: Any, batch_size: int, *,
                 eval_batch_size: int | None = None, vmapped: bool = True, chunk: int = 100, data_seed: int = 0,
                 fast_compile: bool = False, group: int | None = None):
        self.prog, self.data, self.batch_size, self.vmapped = prog, data, batch_size, vmapped
        self.fast_compile, self.group = fast_compile, group
        self.eval_batch_size = eval_batch_size or batch_size
        self.chunk, self.data_seed = max(1, chunk), data_seed
        self.run_s = 0.0
        self.members, self._group = 1, 1  # the members asked for (states may hold more: padding), their groups
        self.programs = Programs(ADVICE)
        self._abstract: dict[Any, Any] = {}  # the states' shapes, by the init program's key
        self._state_bytes: int | None = None
        self._mesh: Any = None
        if not vmapped:
            self._use_devices(1)  # vmapped members take up to every device (init)
        # a program with its plugin's numbers (zoo.train.step.Numbers) trains as the family of those numbers: they
        # enter its programs as arguments, so every plugin, LR grid and seed of a shape shares one compiled program
        self._numbers = prog.numbers.values if isinstance(prog, Program) and prog.numbers is not None else None
        self._options: dict[str, Any] | None = None  # the train and eval programs' (set by `_short_run`)
        step, evaluate, init_one = _member_functions(prog if self._numbers is None else prog.with_numbers)
        gather = data.gather

        def steps(state, arrays, idx, count, step, members=()):
            """The first `count` steps of the chunk's batch indices `idx` [chunk, batch], in a loop whose trip count
            is a traced value (a shorter last chunk runs the same program; a switched-off step under a `cond`
            made XLA copy the whole state every step) and whose carry is updated in place. members: the shape of
            the step's loss, () or (group,) (float32: Program's loss; the step is traced once, in the loop)."""
            def body(i, carry):
                s, losses = carry
                s, metrics = step(s, gather(arrays, idx[i]))
                return s, losses.at[i].set(metrics["loss"])

            losses = jnp.zeros((idx.shape[0], *members), jnp.float32)
            return jax.lax.fori_loop(0, count, body, (state, losses))

        def group_steps(group, arrays, idx, count, g):
            """A device's g members of a group [g, ...] through all of the chunk's steps."""
            if g > 1:
                return steps(group, arrays, idx, count, jax.vmap(step, in_axes=(0, None)), (g,))  # the batch shared
            new, losses = steps(jax.tree.map(lambda a: a[0], group), arrays, idx, count, step)  # the unbatched step
            return jax.tree.map(lambda a: a[None], new), losses[:, None]

        def train_chunk(group, arrays, idx, count, g, mesh):
            """The chunk's steps of one group (vmapped: g members on every device) or of the one member."""
            if not vmapped:
                return steps(group, arrays, idx, count, step)
            return jax.shard_map(functools.partial(group_steps, g=g), mesh=mesh,
                                 in_specs=(P("members"), P(), P(), P()), out_specs=(P("members"), P(None, "members")),
                                 check_vma=False)(group, arrays, idx, count)

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
            lambda g, mesh: jax.jit(functools.partial(train_chunk, g=g, mesh=mesh), donate_argnums=0))
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

    @property
    def compile_s(self) -> float:
        """Seconds spent compiling (tracing, lowering, XLA or the persistent cache), every program so far."""
        return self.programs.compile_s

    def _job(self, name: str, fn: Any, args: tuple, fast_compile: bool = False) -> tuple:
        """A compile job for Programs: its key (the name, the mesh and the arguments' shapes), the function, the
        arguments, the compiler options (fast_compile: run_once_options(), for init; the train program's set by its
        run's length and cost, `_short_run`, and the eval's follow them)."""
        if fast_compile or self.fast_compile:
            options = run_once_options()
        else:
            options = self._short_run if name == self._train_name() else lambda _: self._options
        return (*key_of(name, args), self._mesh.size), fn, args, options

    def _short_run(self, lowered: jax.stages.Lowered) -> dict[str, Any] | None:
        """The train program's compiler options: a Program's for its horizon and one member's step (the chunk's loop
        body counts one step of a group of members), as train.py's (`Program.compile_options`)."""
        if isinstance(self.prog, Program):
            self._options = self.prog.compile_options(lambda: flops_of(lowered, self._group))
        return self._options

    def _call(self, name: str, fn: Any, *args: Any, fast_compile: bool = False) -> Any:
        """fn(*args), compiled ahead of time once per argument shapes (unless `prepare` did); run time accumulated."""
        key, *_ = job = self._job(name, fn, args, fast_compile)
        self.programs.lower(*job)
        self.programs.compile()
        program = self.programs.get(key, name, args)
        t0 = time.perf_counter()
        out = jax.block_until_ready(program(*args))
        self.run_s += time.perf_counter() - t0
        return out

    def prepare(self, lrs: np.ndarray, seeds: np.ndarray, steps: int, options: Options | None = None,
                evaluate: bool = True, eval_limit: int | None = None) -> None:
        """Compile every program `train_members` runs for these members (init, the train chunk, eval) from their
        shapes alone, nothing allocated on the device, side by side (`Programs.compile_all`): for a sweep's next
        shape while the current one trains, or for this one's programs at once."""
        every = self._init_args(lrs, seeds, options)
        args = self._group_args(every, 0)
        init = self._job("init", self._init, args, fast_compile=True)
        shapes = self.programs.lower(*init)
        if shapes is not None or init[0] not in self._abstract:  # the states' shapes, as the init program gives them
            shapes = shapes or jax.eval_shape(self._init, *args)
            sharding = self._states_sharding()
            self._abstract[init[0]] = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding),
                                                   shapes)
        states = self._abstract[init[0]]
        if steps > 0:
            idx = jax.ShapeDtypeStruct((min(self.chunk, steps), self.batch_size), jnp.int32)
            self.programs.lower(*self._job(self._train_name(), self._train_chunk(self._group, self._mesh),
                                           (states, self._train_arrays, idx, jax.ShapeDtypeStruct((), jnp.int32))))
        if evaluate:
            rows = self._eval_rows(self._group_members(), eval_limit)
            self.programs.lower(*self._job("eval", self._eval_sums, (states, self._eval_arrays, *rows)))
        self.programs.compile()

    def _states_sharding(self) -> NamedSharding | None:
        """Where a vmapped group lives: split over the `members` mesh (one member's: where its init put it)."""
        return NamedSharding(self._mesh, P("members")) if self.vmapped else None

    def _train_name(self) -> str:
        return f"train (groups of {self._group})"

    def init(self, lrs: np.ndarray, seeds: np.ndarray, options: Options | None = None) -> list[State]:
        """Initial states, group by group (a list of states [devices x group, ...] vmapped, of one state not); the
        member with seed s gets jax.random.PRNGKey(s) (as train.py --seed s) and its LR, and with a program family,
        `options[k][i]` for each option k (arrays as long as lrs). Vmapped members are split over up to every device
        (no more devices than members), padded with copies of the last one to a multiple of devices x group; member
        i is row i % (devices x group) of group i // (devices x group)."""
        every = self._init_args(lrs, seeds, options)
        groups = [self._call("init", self._init, *self._group_args(every, j), fast_compile=True)
                  for j in range(every[1].shape[0] // self._group_members())]
        return groups if not self.vmapped else jax.device_put(groups, self._states_sharding())

    def _group_members(self) -> int:
        """Members in a group's states: `group` on each device (one, not vmapped)."""
        return self._mesh.size * self._group if self.vmapped else 1

    def _group_args(self, args: tuple, j: int) -> tuple:
        """Group j's part of the init program's arguments."""
        size = self._group_members()
        return jax.tree.map(lambda a: a[j * size:(j + 1) * size], args)

    def member(self, states: list[State], i: int) -> State:
        """Member i's state (its arrays unbatched)."""
        if not self.vmapped:
            return states[0]
        size = self._group_members()
        return jax.tree.map(lambda a: a[i % size], states[i // size])

    def held(self, states: list[State]) -> int:
        """The members the states hold: the members asked for and the padding."""
        return sum(int(group["step"].shape[0]) for group in states) if self.vmapped else 1

    def _init_args(self, lrs: np.ndarray, seeds: np.ndarray, options: Options | None) -> tuple:
        """The init program's arguments (keys, LRs, options, padded); sets the members, the mesh and the group."""
        if isinstance(self.prog, Program) != (options is None):
            raise ValueError("options go with a program family (options -> Program), and a family needs options")
        if self._numbers is not None:
            options = jax.tree.map(lambda v: np.repeat(np.asarray(v, np.float32)[None], len(lrs), 0), self._numbers)
        else:
            options = {k: np.asarray(v, np.float32) for k, v in (options or {}).items()}
        self.members = len(lrs)
        if self.vmapped:
            self._use_devices(min(jax.device_count(), len(lrs)))
        n = self._mesh.size
        if self._state_bytes is None:  # one member's state and gradients
            one = jax.eval_shape(self._init_one, jax.random.PRNGKey(0), jnp.float32(1),
                                 jax.tree.map(lambda v: v[0], options))
            self._state_bytes = _nbytes(one) + _nbytes(one["params"])
        per_device = -(-len(lrs) // n)
        self._group = min(self.group or default_group(self._state_bytes, per_device), per_device)
        pad = np.r_[np.arange(len(lrs)), np.full(-len(lrs) % (n * self._group), len(lrs) - 1)] if self.vmapped \
            else np.arange(len(lrs))
        keys = jax.vmap(jax.random.PRNGKey)(jnp.asarray(np.asarray(seeds)[pad], jnp.int32))
        lrs = jnp.asarray(np.asarray(lrs)[pad], jnp.float32)
        return keys, lrs, jax.tree.map(lambda v: jnp.asarray(v[pad]), options)

    def batch_indices(self, start: int, count: int) -> np.ndarray:
        """The train indices of steps start .. start+count-1, shape [count, batch]."""
        return np.stack([np.asarray(self.data.indices("train", t, self.batch_size, self.data_seed))
                         for t in range(start, start + count)])

    def train(self, states: list[State], steps: int, start: int = 0) -> tuple[list[State], np.ndarray]:
        """`steps` train steps from step `start`; the per-step train losses.

        Steps run in chunks of `chunk` (one compiled loop), group after group through each; a last, shorter chunk
        runs the same program for fewer steps, so one shape compiles one train program.
        """
        chunk = min(self.chunk, steps)
        program = self._train_chunk(self._group, self._mesh)
        losses = []
        for t in range(start, start + steps, chunk):
            n = min(chunk, start + steps - t)
            idx = self.batch_indices(t, n)
            args = (self._train_arrays, jnp.asarray(np.concatenate([idx, np.repeat(idx[-1:], chunk - n, 0)])),
                    jnp.asarray(n, jnp.int32))
            trained = [self._call(self._train_name(), program, group, *args) for group in states]
            states = [group for group, _ in trained]
            loss = np.concatenate([np.asarray(loss).reshape(chunk, -1) for _, loss in trained], 1)[:n]
            losses.append(loss[:, :self.members] if self.vmapped else loss[:, 0])
        return states, np.concatenate(losses) if losses else np.zeros((0,))

    def evaluate(self, states: list[State], limit: int | None = None) -> dict[str, np.ndarray]:
        """Eval loss and accuracy over the eval split, or a fixed random subset of `limit` of its examples (eval
        sets may be sorted by class) (per member when vmapped): the sums of `Program.eval_sums` over the batches
        divided by their count, the reduction train.py's eval makes (zoo.train.compiled), padding rows weighted 0.

        A group's M vmapped members see eval_batch_size // M examples each per eval step, so an eval step holds one
        run's eval activations, not M of them.
        """
        rows = self._eval_rows(self._group_members(), limit)
        sums = [self._call("eval", self._eval_sums, group, self._eval_arrays, *rows) for group in states]
        totals = {k: np.concatenate([np.asarray(s[k], np.float64) for s in sums], -1).sum(0) for k in sums[0]}
        count = totals.pop("count")
        return {k: (v / count)[:self.members] if self.vmapped else v / count for k, v in totals.items()}


    def _eval_rows(self, members: int, limit: int | None) -> tuple[jax.Array, jax.Array]:
        """The eval's example indices and row weights [batches, rows] for `members` states (padding weighted 0)."""
        every = np.concatenate(self.data.eval_indices(self.eval_batch_size)).astype(np.int32)
        if limit is not None:
            every = np.sort(np.random.default_rng(0).permutation(every)[:limit])
        rows = max(1, min(self.eval_batch_size // members, len(every)))  # padding beyond the set is memory only
        pad = -len(every) % rows
        idx = np.concatenate([every, np.zeros(pad, np.int32)]).reshape(-1, rows)
        weight = np.concatenate([np.ones(len(every), np.float32), np.zeros(pad, np.float32)]).reshape(-1, rows)
        return jnp.asarray(idx), jnp.asarray(weight)


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
