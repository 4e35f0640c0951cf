"""Multi-host: JAX's own distributed runtime (`jax.distributed.initialize`), from flags or the environment.

One program runs over every host's devices; process 0 writes logs and plots; every process takes part in
checkpoints (orbax writes each process's shards). On CPU, collectives go through gloo.

Joining waits until all processes have reached the coordinator; it says so, and gives up after a timeout with
one line. A join blocked in JAX's runtime cannot be interrupted from Python (the runtime aborts the process with a
stack dump at its own deadline), so giving up ends the process itself: `error: ...` on stderr, exit status 1.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import json
import math
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from zoo.schema import INT32_MAX, digits, to_float, to_int

ENV = {"coordinator": "JAX_COORDINATOR_ADDRESS", "num_processes": "JAX_NUM_PROCESSES",
       "process_id": "JAX_PROCESS_ID", "timeout_s": "ZOO_COORDINATOR_TIMEOUT"}
TIMEOUT_S = 300.0  # JAX's own default wait for every process to join
GRACE_S = 30  # JAX's deadline is set this much later than ours, so ours gives up first, in one line
JOINED: dict[str, int] = {}  # the process count this process was started with (--num-processes), once joined


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def initialize(coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None,
               timeout_s: float | None = None, report: Callable[[str], None] = _stderr) -> None:
    """Join the run's processes when a coordinator is named (flag or JAX_COORDINATOR_ADDRESS); else do nothing.

    timeout_s (or ZOO_COORDINATOR_TIMEOUT; default 300): how long to wait for every process to reach the
    coordinator before giving up."""
    given = {"coordinator": coordinator, "num_processes": num_processes, "process_id": process_id,
             "timeout_s": timeout_s}
    for name, var in ENV.items():
        if given[name] is None and os.environ.get(var):
            raw = os.environ[var]
            try:
                given[name] = raw if name == "coordinator" else to_float(raw) if name == "timeout_s" else to_int(raw)
            except ValueError:
                raise ValueError(f"{var}={raw!r} is not {'a number' if name == 'timeout_s' else 'an integer'}") \
                    from None
    if given["coordinator"] is None:
        check_single(given["num_processes"], given["process_id"], timeout_s)
        return
    n, i, address = given["num_processes"], given["process_id"], given["coordinator"]
    if n is None or i is None:
        raise ValueError("multi-host needs --num-processes and --process-id with --coordinator")
    if not 1 <= n <= INT32_MAX:  # JAX's runtime takes it as an int32
        raise ValueError(f"--num-processes must be in [1, 2^31), got {n}")
    if not 0 <= i < n:
        raise ValueError(f"--process-id must be in [0, {n}), got {i}")
    timeout = TIMEOUT_S if given["timeout_s"] is None else given["timeout_s"]
    if not (math.isfinite(timeout) and 0 < timeout <= INT32_MAX - GRACE_S - 1):  # JAX's runtime: int32 seconds
        raise ValueError(f"the coordinator timeout must be a positive number of seconds below 2^31 - {GRACE_S + 1}, "
                         f"got {timeout:g}")
    port = _port(address)
    _check_host(address)
    if i == 0 and not os.environ.get("JAX_COORDINATOR_BIND_ADDRESS"):
        _check_free(port)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU devices only; GPUs use NCCL
    report(f"process {i}: waiting for all {n} processes at the coordinator {address} (up to {timeout:g} s: "
           f"--coordinator-timeout or {ENV['timeout_s']})")
    gave_up = (f"gave up after {timeout:g} s waiting for all {n} processes at the coordinator {address}: start "
               f"every process with the same --coordinator and --num-processes, or wait longer "
               f"(--coordinator-timeout)")
    with _give_up_after(timeout, gave_up):
        jax.distributed.initialize(coordinator_address=address, num_processes=n, process_id=i,
                                   initialization_timeout=int(math.ceil(timeout)) + GRACE_S)
    JOINED["num_processes"] = n  # the coordinator's count may differ: process 0's (check_same_settings)


def check_single(num_processes: int | None, process_id: int | None, timeout_flag: float | None) -> None:
    """Without a coordinator the run is one process: a multi-host flag that says otherwise is refused (--process-id
    1 and --coordinator-timeout were ignored silently)."""
    if num_processes not in (None, 1):
        raise ValueError("--num-processes needs --coordinator HOST:PORT (or JAX_COORDINATOR_ADDRESS)")
    if process_id not in (None, 0):
        raise ValueError(f"--process-id {process_id} needs --coordinator HOST:PORT and --num-processes (or "
                         "JAX_COORDINATOR_ADDRESS): without them this is the only process, 0")
    if timeout_flag is not None:
        raise ValueError("--coordinator-timeout is how long to wait at a --coordinator; without one there is nothing "
                         "to wait for: leave it out")


def _port(address: str) -> int:
    """The port of HOST:PORT (a bracketed IPv6 host allowed)."""
    host, _, port = address.rpartition(":")
    if not host or not digits(port) or not 1 <= int(port) <= 65535:
        raise ValueError(f"--coordinator must be HOST:PORT with a port in 1..65535, got {address!r}")
    return int(port)


def _check_host(address: str) -> None:
    """The coordinator's host has an address: a name the resolver says does not exist waited out the whole timeout
    (a resolver that cannot answer now, EAI_AGAIN, is left to JAX's retries)."""
    host = address.rpartition(":")[0].strip("[]")
    try:
        socket.getaddrinfo(host, None)
    except socket.gaierror as e:
        if e.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
            raise ValueError(f"--coordinator {address}: the host {host!r} has no address ({e.strerror})") from None


def _check_free(port: int) -> None:
    """Process 0 serves the coordinator on every address at `port` ([::]:port, as JAX binds it, or 0.0.0.0 where
    there is no IPv6): one line when the port is taken or privileged."""
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server does: TIME_WAIT is no conflict
                s.bind((host, port))
            return
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                raise ValueError(f"process 0 cannot serve the coordinator on port {port} ({e.strerror}); pick a free "
                                 "port in --coordinator") from None


@contextlib.contextmanager
def _give_up_after(seconds: float, message: str) -> Iterator[None]:
    """Ends the process with `error: message` if the block has not finished after `seconds`."""
    def give_up() -> None:
        sys.stdout.flush()
        print(f"error: {message}", file=sys.stderr, flush=True)
        os._exit(1)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def is_main() -> bool:
    """Process 0: the one that writes logs, plots and the run's files (checkpoints are written by all)."""
    return jax.process_index() == 0


def barrier(name: str) -> None:
    """Every process waits here for all the others (a no-op in one process): what one process reads on disk
    before `name` no other process has changed yet."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


def check_same_settings(settings: dict[str, Any], local: tuple[str, ...] = ()) -> None:
    """Every process was started with the same `settings` (a run's, by flat name; `local` ones, such as a host's own
    data folder, may differ): a process given another --lr or --seed joined, its gradients were averaged with the
    others', and the run trained as neither's, silently; another --steps or --eval-every ended in a collective
    mismatch and a C++ abort; one given another --num-processes (with an id below process 0's count) joined process
    0's run. On every process, one line naming the first setting that differs, before anything is written (a no-op
    in one process)."""
    if not jax.distributed.is_initialized() or jax.process_count() == 1:  # one process: no backend started here
        return
    check_same_devices()  # the gathers below lay the devices out as processes x devices
    settings = {k: v for k, v in settings.items() if k not in local} | JOINED
    mine = np.frombuffer(json.dumps(dict(sorted(settings.items())), default=str).encode(), np.uint8)
    lengths = multihost_utils.process_allgather(np.array([mine.size], np.int64)).reshape(-1)
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[:mine.size] = mine
    every = multihost_utils.process_allgather(padded)
    first, *others = (json.loads(bytes(row[:n])) for row, n in zip(every, lengths, strict=True))
    for i, other in enumerate(others, 1):
        differ = sorted(k for k in set(first) | set(other) if first.get(k) != other.get(k))
        if differ:
            k, more = differ[0], f"; also {', '.join(differ[1:])}" if len(differ) > 1 else ""
            raise ValueError(f"process {i} was started with other settings than process 0 ({k} {other.get(k)!r} "
                             f"there, {first.get(k)!r} in process 0{more}); start every process with the same flags")


def check_same_devices() -> None:
    """Every process has as many devices (checked as the backend starts, zoo.train.backend, from the global device
    list every process sees): JAX lays the devices out as processes x their devices (the first barrier over 3 + 2 of
    them failed in JAX as 'cannot reshape array of size 5 into shape (2,3)', after the batch was refused as split 5
    ways)."""
    counts = collections.Counter(d.process_index for d in jax.devices())
    if len(set(counts.values())) > 1:
        each = ", ".join(f"{counts[i]}" for i in sorted(counts))
        raise ValueError(f"the {len(counts)} processes have {each} devices (process 0, 1, ...): every process needs "
                         "the same number (on CPU, the same --xla_force_host_platform_device_count in XLA_FLAGS)")
