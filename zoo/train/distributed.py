"""Multi-host: JAX's own distributed runtime (`jax.distributed.initialize`), from flags or the environment.

One program runs over every host's devices; process 0 writes logs and plots; every process takes part in
checkpoints (orbax writes each process's shards). On CPU, collectives go through gloo.
"""

from __future__ import annotations

import os

import jax

ENV = {"coordinator": "JAX_COORDINATOR_ADDRESS", "num_processes": "JAX_NUM_PROCESSES",
       "process_id": "JAX_PROCESS_ID"}


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None) -> None:
    """Join the run's processes when a coordinator is named (flag or JAX_COORDINATOR_ADDRESS); else do nothing."""
    given = {"coordinator": coordinator, "num_processes": num_processes, "process_id": process_id}
    for name, var in ENV.items():
        if given[name] is None and os.environ.get(var):
            raw = os.environ[var]
            try:
                given[name] = raw if name == "coordinator" else int(raw)
            except ValueError:
                raise ValueError(f"{var}={raw!r} is not an integer") from None
    if given["coordinator"] is None:
        if given["num_processes"] not in (None, 1):
            raise ValueError("--num-processes needs --coordinator HOST:PORT (or JAX_COORDINATOR_ADDRESS)")
        return
    n, i = given["num_processes"], given["process_id"]
    if n is None or i is None:
        raise ValueError("multi-host needs --num-processes and --process-id with --coordinator")
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"--process-id must be in [0, {n}), got {i}")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU devices only; GPUs use NCCL
    jax.distributed.initialize(coordinator_address=given["coordinator"], num_processes=n, process_id=i)


def is_main() -> bool:
    """Process 0: the one that writes logs, plots and the run's files (checkpoints are written by all)."""
    return jax.process_index() == 0
