"""A stop signal is never an error (issue 41, item 6): SIGTERM's stop was an Exception, so a checkpoint reader's
`except Exception` took it for a file that cannot be read: a resume moved its good newest checkpoint to corrupt/ and
trained on from an older one, a fork read an older step, an export said 'no checkpoint can be read'. Now it is a
BaseException (Stopped) that no reader swallows, sent again where it lands in a callback, and the command exits 143.

One subprocess sends itself SIGTERM at 22 moments spread over a resume's restore and a reader's reads (a fork's and
an export's: config, metadata, arrays), then once more inside a command's boundary, which must exit 143 at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from cli_utils import ROOT, child_env

from zoo.cli import boundary
from zoo.errors import Stopped, sigterm_stops

MOMENTS = 11  # per read, spread evenly over its unperturbed duration

CHILD = r"""
import json, os, shutil, signal, sys, threading, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from cli_utils import saved_run
from zoo.cli import boundary
from zoo.errors import Stopped, sigterm_stops
from zoo.train.checkpoint import Checkpoints
from zoo.train.load import read_config, recorded_meta

work, moments = Path(sys.argv[1]), int(sys.argv[3])
src = saved_run(work / "src", steps=(2, 4, 6))
sys.unraisablehook = lambda hook: boundary._background_failed(hook.exc_value)  # as every command's boundary
reports = []


def resume():  # a run's own restore, which moves what it cannot read to corrupt/
    with Checkpoints(src, keep=3) as ckpts:
        return ckpts.restore_latest(report=reports.append)[2]


def read():  # what --fork-from and zoo.export read of a run: its config, its metadata, its newest state
    read_config(src)
    with Checkpoints(src, read_only=True) as ckpts:
        recorded_meta(ckpts, None)
        return ckpts.restore_at(None, report=reports.append)[2]


def kill_after(delay, sent):  # started by the caller: a signal landing inside this call left no timer to join
    def kill():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGTERM)
    return threading.Timer(delay, kill)


for name, op in (("resume", resume), ("read", read)):
    op()
    t = time.perf_counter()
    op()
    took = time.perf_counter() - t
    for i in range(moments):
        sent, reports[:] = [], []
        outcome, got = "ran on", None
        timer = kill_after(took * (i + 0.5) / moments, sent)
        try:
            with sigterm_stops():
                timer.start()
                got = op()
                deadline = time.perf_counter() + 2
                while time.perf_counter() < deadline:  # a stop that lands after the read (or is sent again)
                    time.sleep(0.001)
        except Stopped:
            outcome = "stopped"
        except BaseException as e:
            outcome = f"{type(e).__name__}: {e}"
        timer.join()
        print(json.dumps({"read": name, "moment": i, "outcome": outcome, "late_s": time.perf_counter() - sent[0],
                          "step": got, "reports": reports, "corrupt": (src / "corrupt").exists(),
                          "steps": sorted(p.name for p in (src / "checkpoints").iterdir())}), flush=True)

sent = []
kill_after(took / 2, sent).start()
def command():
    read()
    time.sleep(5)
try:
    boundary.boundary(command)()
finally:
    print(json.dumps({"command": "ran on"}), flush=True)
"""


@pytest.mark.slow
def test_sigterm_at_any_moment_of_a_read_stops_and_never_loses_a_checkpoint(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(ROOT / "tests"), str(MOMENTS)],
                          cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    moments = [r for r in rows if "read" in r]
    assert len(moments) == 2 * MOMENTS, proc.stdout + proc.stderr
    for r in moments:
        assert r["outcome"] == "stopped" and r["late_s"] < 1.0, r  # stopped, within a second of the signal
        assert not r["reports"] and not r["corrupt"], r  # no checkpoint called unreadable, none moved
        assert r["steps"] == ["2", "4", "6"], r
        assert r["step"] in (None, 6), r  # a read that ended before the signal read the newest
    # most signals landed inside the reads (each moment is placed by the read's duration measured once, unperturbed;
    # under a loaded CI a read can run faster or slower than that: 17 of 22 landed once, against 18 asked before)
    assert sum(r["step"] is None for r in moments) >= MOMENTS, moments
    assert proc.returncode == 143 and proc.stderr.strip().splitlines()[-1] == "stopped by SIGTERM", proc.stderr
    assert {"command": "ran on"} not in rows


def test_a_stop_that_lands_in_a_callback_is_sent_again():
    """A stop raised where Python cannot raise it (a finalizer, JAX's GC callback) reaches the hook for unraisable
    errors; it is sent again, to land in the command's own code (it was written to a failure file and lost)."""
    with sigterm_stops("stopped"):
        try:
            boundary._background_failed(Stopped(signal.SIGTERM, "stopped"))
            deadline = time.perf_counter() + 2
            while time.perf_counter() < deadline:
                time.sleep(0.001)
        except Stopped as e:
            assert e.signum == signal.SIGTERM
        else:
            raise AssertionError("the stop was lost")
    assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()]


def test_a_stop_a_library_swallowed_stops_the_training_loop():
    """A stop raised where a library keeps it (its own `except BaseException`; a Ctrl-C during the compile once
    trained on) is still known: the training loop, which starts after, stops at its first step with it."""
    from zoo.errors import forget_stops
    from zoo.train.guard import StopSignals

    try:
        with sigterm_stops():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(2)
            except Stopped:
                pass  # a library swallowing it
            signals = StopSignals()
            signals.restore()
    finally:
        forget_stops()
    assert signals.requested and signals.signum == signal.SIGTERM


def swallowed_ctrl_c(then: str = "") -> subprocess.CompletedProcess:
    """A command whose Ctrl-C a library swallows (`except BaseException: pass`), which then runs `then` (its end)."""
    script = ("import os, signal, time\nfrom zoo.cli.boundary import boundary\n"
              "@boundary(interrupted='interrupted (Ctrl-C)')\ndef main():\n    try:\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n        time.sleep(2)\n    except BaseException:\n"
              f"        pass\n{then}main()\nprint('exited 0')\n")
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                          timeout=120)


def test_a_command_whose_stop_was_swallowed_still_stops_with_its_status():
    proc = swallowed_ctrl_c()
    assert proc.returncode == 130 and proc.stderr.strip() == "interrupted (Ctrl-C)", (proc.returncode, proc.stderr)
    assert "exited 0" not in proc.stdout


def test_a_swallowed_stop_outranks_the_commands_own_exit_status():
    """zoo.coord_check ends with SystemExit(0 or 1, its verdict), which the boundary let through as it was: a Ctrl-C
    that a library swallowed in the last second left the command exiting 1 with no line. A stop received is the
    status, SystemExit or not."""
    proc = swallowed_ctrl_c("    raise SystemExit(1)\n")
    assert proc.returncode == 130 and proc.stderr.strip() == "interrupted (Ctrl-C)", (proc.returncode, proc.stderr)


STOP_DURING_COMPUTE = """
import sys, time
import jax, jax.numpy as jnp
from zoo.cli.boundary import boundary, interruptible

@jax.jit
def endless(x):  # XLA work that never returns (sin keeps v below 10), as a coordinate check of a million steps
    return jax.lax.while_loop(lambda v: v < 10.0, jnp.sin, x)

@boundary
def main(argv=None):
    print("computing", flush=True)
    interruptible(lambda: float(endless(jnp.ones(()))))

main()
"""


def test_a_stop_during_a_long_computation_is_heard_at_once(tmp_path):
    """zoo.criticality and zoo.coord_check heard SIGTERM only once XLA returned (191 s late at an APJN over 50000
    inputs; a million-step check never), since Python runs handlers in the main thread, which waited on the
    computation. They compute in a worker now (`interruptible`) while the main thread waits in short joins: a
    computation that never ends stops with 143 within seconds of the signal."""
    script = tmp_path / "stop.py"
    script.write_text(STOP_DURING_COMPUTE)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "computing"
        time.sleep(1.0)  # inside the XLA call
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143 and "stopped by SIGTERM" in err, err
        assert time.monotonic() - sent < 30  # the loop alone never ends
    finally:
        proc.kill()
        proc.communicate()


def test_interruptible_returns_its_value_and_raises_its_error():
    from zoo.cli.boundary import interruptible

    assert interruptible(lambda a, b=0: a + b, 2, b=3) == 5
    with pytest.raises(ValueError, match="in the worker"):
        interruptible(lambda: (_ for _ in ()).throw(ValueError("in the worker")))
