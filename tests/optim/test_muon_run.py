"""Muon runs through train.py (issue 18): resumed bit-identically after SIGKILL, forked, and exported to SP form with
the run's logits. The MLP-ResNet with pre-LN and biases, so the optimizer state holds Muon's per-layer momenta, Adam's
moments of the stacked vectors, and optax's masked placeholders between them."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from cli_utils import (
    SMALL,
    TINY_RUN,
    assert_same_params,
    exported_model,
    final_params,
    kill_after_checkpoint,
    run_main_many,
)

from zoo.diagnostics.inputs import random_inputs
from zoo.export import export
from zoo.train.load import read_config
from zoo.train.setup import setup
from zoo.train.step import run_once_options
from zoo.tree import key_path

MUON = [*SMALL, "--param", "mup", "--base-width", "16", "--optimizer", "muon", "--lr", "1e-2", "--weight-decay",
        "0.1", "--model-opt", "pre_ln=true", "--model-opt", "bias=true"]


@pytest.mark.slow
def test_sigkill_then_rerun_equals_uninterrupted(tmp_path):
    """Kill -9 part-way, rerun the same command: the final params equal an uninterrupted run's bit for bit."""
    args = [*MUON, "--steps", "40", "--ckpt-every", "10"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    kill_after_checkpoint(args, cut, 10)
    (code, err), (resumed, resumed_err) = run_main_many([[*args, "--run-dir", str(run)] for run in (whole, cut)])
    assert code == 0, err
    assert resumed == 0 and "resumed" in resumed_err, resumed_err
    assert_same_params(final_params(whole), final_params(cut))


@pytest.mark.slow
def test_a_muon_run_forks_and_exports_with_its_logits(tmp_path):
    """A Muon run forked into another LR continues from its state; the fork, exported to SP form (every multiplier
    folded into its weights), gives the run's logits (f32, rtol 1e-5 normwise)."""
    first, fork, out = tmp_path / "first", tmp_path / "fork", tmp_path / "out"
    (code, err), (forked, fork_err) = run_main_many([  # in order: the fork reads the finished first run
        [*MUON, "--steps", "10", "--ckpt-every", "10", "--run-dir", str(first)],
        [*MUON, "--steps", "20", "--lr", "3e-3", "--fork-from", str(first), "--run-dir", str(fork)]])
    assert code == 0, err
    assert forked == 0 and f"forked {first} at step 10" in fork_err, fork_err
    export(fork, out, echo=lambda _: None)
    run, loaded = setup(read_config(fork)), final_params(fork)
    key = jax.random.key(0)
    state = jax.jit(run.program.init).lower(key).compile(compiler_options=run_once_options())(key)
    flat, treedef = jax.tree_util.tree_flatten_with_path(state["params"])
    state["params"] = jax.tree_util.tree_unflatten(treedef, [loaded[key_path(p)] for p, _ in flat])
    _, sp_logits, sp_params, _, meta = exported_model(out)
    assert meta["step"] == 20
    x = random_inputs(run.model_cfg, 8, jax.random.key(3))
    both = jax.jit(lambda state, params, x: (run.program.model(state)(x)[0], sp_logits(params, x)))
    want, got = map(np.asarray, both.lower(state, sp_params, x).compile(compiler_options=run_once_options())(
        state, sp_params, x))
    assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)


def test_a_fork_between_adamw_and_muon_keeps_the_adam_moments_both_hold():
    """Muon keeps Adam's moments of the vectors and embeddings in optax.partition's dict of states by label, which the
    fork's names did not look into: adamw -> muon started every Adam moment fresh ('PartitionState.inner_states started
    fresh'). They carry over both ways now; muon's own momenta start fresh, and the way back says which share of
    Adam's moments (the matrices', which muon kept none of) did."""
    from zoo.config import resolve
    from zoo.train.state import _named, _transplant_opt

    def opt_state(optimizer, fill):
        cfg = resolve({**TINY_RUN, "model_opt": {"pre_ln": True, "bias": True}, "optimizer": optimizer})
        opt = setup(cfg).program.init(jax.random.key(0))["opt"]
        return jax.tree.map(lambda x: jax.numpy.full_like(x, fill), opt)

    adamw, muon = opt_state("adamw", 3.0), opt_state("muon", 0.0)
    carried, fresh = _transplant_opt(muon, adamw)
    names = dict(_named(carried))
    adam = [k for k in names if k[0] in ("ScaleByAdamState.mu", "ScaleByAdamState.nu")]
    assert adam and all(np.all(np.asarray(names[k]) == 3.0) for k in adam)
    assert fresh == ["MuonState.count", "MuonState.mu", "MuonState.ns_coeffs"]
    back, fresh = _transplant_opt(opt_state("adamw", 0.0), opt_state("muon", 5.0))
    moments = [v for k, v in _named(back) if k[0] == "ScaleByAdamState.mu"]
    kept = sum(bool(np.all(np.asarray(v) == 5.0)) for v in moments)
    assert 0 < kept < len(moments)
    assert fresh[0] == f"ScaleByAdamState.mu ({len(moments) - kept} of its {len(moments)} parameters' state)"
