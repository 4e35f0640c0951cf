"""The audit's parts, each on its own: measurements against numpy, kinds from shapes, theory's laws, verdicts, and
the command line (zoo.audit; issue 18)."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_utils import clean_error, run_train
from optax.contrib._muon import orthogonalize_via_newton_schulz

import zoo.param as P
from zoo.audit import ZooRun, judge, laws, measure, shapes
from zoo.audit.rundir import saved_families
from zoo.cli.audit import main
from zoo.config import RunConfig
from zoo.optim import OptimConfig, Route
from zoo.param.tags import Tag
from zoo.train import memory


def test_spectral_norm_per_stacked_layer_is_numpys():
    """Power iteration on each layer of a (3, 20, 30) stack: the mean of numpy's largest singular values (1e-4),
    for both layouts (out_in: the (30, 20) transposes)."""
    w = np.asarray(jax.random.normal(jax.random.key(0), (3, 20, 30)))
    want = np.mean([np.linalg.norm(m, 2) for m in w])
    got = measure.spectral_norm(jnp.asarray(w), Route("spectral", 20, "in_out"), jax.random.key(1))
    assert math.isclose(float(got), want, rel_tol=1e-4)
    got = measure.spectral_norm(jnp.asarray(w.transpose(0, 2, 1)), Route("spectral", 20, "out_in"), jax.random.key(1))
    assert math.isclose(float(got), want, rel_tol=1e-4)


@pytest.mark.parametrize("power", [1, 2, 3])
def test_multiplier_power_is_the_power_the_forward_pass_applies(power):
    x = jax.random.normal(jax.random.key(0), (4, 5))

    def f(w, c):
        return (x @ w["a"]) * c["m"] ** power + x @ w["b"]

    w = {"a": jax.random.normal(jax.random.key(1), (5, 3)), "b": jnp.ones((5, 3))}
    c = {"m": jnp.asarray(0.5)}
    tw = {"a": w["a"], "b": jnp.zeros_like(w["b"])}
    assert math.isclose(float(measure.multiplier_power(f, w, c, tw, c)), power, rel_tol=1e-5)


def test_spectral_step_is_the_step_per_unit_of_newton_schulz_output():
    """An update -0.3 NS(g) of a stack of two matrices has step 0.3, whatever NS's top singular value."""
    g = jax.random.normal(jax.random.key(0), (2, 16, 24))
    route = Route("spectral", 16, "in_out")
    o = orthogonalize_via_newton_schulz(g, jnp.asarray(measure.NS_COEFFS), 5, dimension_numbers=route.matrix_axes(
        g.shape))
    assert math.isclose(float(measure.spectral_step(-0.3 * o, g, route, 5)), 0.3, rel_tol=1e-5)


def test_shrink_and_rms():
    w = jnp.arange(1.0, 7.0).reshape(2, 3)
    assert math.isclose(float(measure.shrink(-0.3 * w, w)), 0.3, rel_tol=1e-6)
    assert math.isclose(float(measure.rms(jnp.full((3, 4), -2.0))), 2.0)


@pytest.mark.parametrize("small, large, layout, kind", [
    ((8, 32), (8, 128), "in_out", "input"), ((32, 4), (128, 4), "in_out", "output"),
    ((32, 128), (128, 512), "in_out", "hidden"), ((32,), (128,), "in_out", "vector"), ((4,), (4,), "in_out", "scalar"),
    ((4, 32), (4, 128), "out_in", "output"), ((32, 8), (128, 8), "out_in", "input")])
def test_kinds_from_shapes(small, large, layout, kind):
    assert shapes.kind_from_shapes(small, large, layout) == kind


def test_stacked_axes_are_not_part_of_the_kind():
    """A stack (L, n, n) of hidden matrices and (L, n) of norm gains: the core shapes are (n, n) and (n,); a leading
    axis that grows with depth marks a residual branch."""
    assert shapes.core_shape((4, 32, 32), Tag("hidden", 32, 32)) == (32, 32)
    assert shapes.core_shape((4, 32), Tag("vector", 1, 32)) == (32,)
    assert shapes.kinds({"w": ((4, 32, 32), (4, 128, 128))}, {"w": Tag("hidden", 128, 128)}) == {"w": "hidden"}
    assert shapes.branches({"w": ((2, 8, 8), (8, 8, 8)), "e": ((3, 8), (3, 8))}) == {"w": True, "e": False}


def facts(kind, family, m=4.0, branch=False, depth=1):
    return laws.Facts(Tag(kind, 64, 64, width_mult=m, branch=branch, depth=depth, base_depth=1), kind, family, branch)


@pytest.mark.parametrize("plugin, quantity, kind, family, slope", [
    ("mup", "update_rms", "hidden", "adam", -1.0),  # Adam LR m^-1
    ("mup", "update_spectral", "hidden", "spectral", 0.0),  # the spectral map: Muon LR m^0
    ("mup", "update_rms", "output", "adam", -1.0),  # multiplier m^-1, LR m^0
    ("sp", "update_spectral", "hidden", "spectral", 0.0),  # one global LR
    ("mup", "step_size", "hidden", "sgd", 0.0),  # SGD LR m^(d-c) = m^0
    ("mup", "step_size", "input", "sgd", 1.0),  # SGD LR m^1 on the input layer
    ("mup", "eps_scale", "hidden", "adam", -1.0),  # epsilon m^-d
    ("mup", "init_rms", "hidden", "adam", -0.5),
    ("ntk", "update_spectral", "hidden", "spectral", -0.5),  # multiplier m^-1/2, Muon LR m^0
])
def test_width_laws(plugin, quantity, kind, family, slope):
    f = facts(kind, family)
    assert math.isclose(laws.log_law(quantity, P.get(plugin), f) / math.log(4.0), slope, abs_tol=1e-12)


def test_depth_laws_and_folds():
    """Depth-muP branch parameters: update r^-1/2 under every family, SGD step r^0 (alpha - gamma), epsilon
    r^-1/2; a folded multiplier enters the init once, SGD's step twice and the epsilon to the power -1."""
    plugin, f = P.get("depth_mup"), facts("hidden", "adam", m=1.0, branch=True, depth=4)
    assert math.isclose(laws.log_law("update_rms", plugin, f) / math.log(4.0), -0.5)
    assert math.isclose(laws.log_law("step_size", plugin, facts("hidden", "sgd", 1.0, True, 4)), 0.0, abs_tol=1e-12)
    assert math.isclose(laws.log_law("eps_scale", plugin, f) / math.log(4.0), -0.5)
    folded = laws.Facts(f.tag, "hidden", "sgd", True, fold=0.3)
    unfolded = laws.Facts(f.tag, "hidden", "sgd", True)
    for q, power in (("init_rms", 1), ("step_size", 2), ("eps_scale", -1)):
        assert math.isclose(laws.log_law(q, plugin, folded) - laws.log_law(q, plugin, unfolded), 0.3 * power)


def test_which_quantities_are_judged():
    assert laws.judged("update_rms", facts("hidden", "adam"), "adam")
    assert not laws.judged("update_rms", facts("hidden", "sgd"), "sgd")  # carries the gradient's size: reported
    assert laws.has_law("update_rms", facts("hidden", "sgd"), "sgd")
    assert laws.judged("eps_scale", facts("vector", "adam"), "muon") and not laws.judged(
        "eps_scale", facts("vector", "adam"), "lion")


def test_verdicts():
    xs, flat = [32, 128], [0.0, 0.0]
    assert judge.check("wd_shrink", xs, [0.0, 0.0], flat, 0.1).passed is True  # no decay at any width
    assert judge.check("wd_shrink", xs, [0.0, 1e-3], flat, 0.1).passed is False  # decay at one width only
    c = judge.check("update_rms", xs, [1.0, 0.25], [0.0, -math.log(4)], 0.1)
    assert c.passed and math.isclose(c.measured, -1.0) and math.isclose(c.expected, -1.0)
    assert judge.check("update_rms", xs, [1.0, 0.5], [0.0, -math.log(4)], 0.1).passed is False
    assert judge.check("init_rms", xs, [None, None], flat, 0.1, "zero init").passed is None
    assert judge.null_directions({"a": 1.0, "b": 1e-9, "c": 1e-3}) == {"b"}


def test_init_rms_allows_for_its_sampling_noise():
    """A realized init's RMS is a sample: log RMS over N Gaussian draws has standard error 1/sqrt(2N), so a ViT's
    1 x n class token drawn at one std at n = 24 and 48 gives slopes with standard deviation 0.26 (at 64..256, 0.07).
    Over 400 seeds, a tol of 0.1 alone fails 70% (15%) of these correct inits; with the sampling slack (3 standard
    errors) under 1%, as theory's 0.3%. A slack does not hide a real exponent: a 64-wide readout table whose std
    goes like n^-1/2 (slope -0.5, theory 0) still fails at widths 32, 128."""
    rng = np.random.default_rng(0)
    for xs, want_plain in (([24, 48], 0.6), ([64, 128, 256], 0.1)):
        logs, slack = [0.0] * len(xs), judge.sampling_slack(xs, xs)
        plain = noisy = 0
        for _ in range(400):
            values = [float(np.sqrt(np.mean(rng.normal(0.0, 0.02, n) ** 2))) for n in xs]
            plain += not judge.check("init_rms", xs, values, logs, 0.1).passed
            noisy += not judge.check("init_rms", xs, values, logs, 0.1, slack=slack).passed
        assert plain / 400 > want_plain and noisy / 400 < 0.01, (xs, plain, noisy)
    xs = [32, 128]
    values = [float(np.sqrt(np.mean(rng.normal(0.0, n**-0.5, (n, 10)) ** 2))) for n in xs]
    assert not judge.check("init_rms", xs, values, [0.0, 0.0], 0.1, slack=judge.sampling_slack(xs, [320, 1280])).passed


@pytest.mark.slow
def test_cli_passes_a_correct_run_and_writes_json(tmp_path, capsys):
    out = tmp_path / "audit.json"
    with pytest.raises(SystemExit) as e:
        main(["--model", "mlp_resnet", "--model-opt", "in_shape=8", "--model-opt", "num_classes=4", "--widths",
              "16,64", "--depth", "1", "--optimizer", "muon", "--batch-size", "8", "--json", str(out)])
    assert e.value.code == 0, capsys.readouterr()
    result = json.loads(out.read_text())
    assert result["passed"] and set(result["axes"]["width"]["params"]) == {"embed/kernel", "stack/blocks/w1/kernel",
                                                                            "head/kernel", "stack/blocks/branch"}
    assert "PASS" in capsys.readouterr().out


@pytest.mark.parametrize("argv, status, message", [
    (["--model", "nope"], 2, "unknown model 'nope'"), (["--optimizer", "rmsprop"], 2, "rmsprop"),
    (["--param", "nope"], 2, "unknown parametrization"),
    (["--widths", "64", "--model-opt", "in_shape=8"], 2, "at least two"),
    (["--widths", "6x"], 2, "comma-separated integers"), (["--tol", "0"], 2, "argument --tol: expected a positive"),
    (["--tol", "-1"], 2, "error: argument --tol: expected a positive number, got '-1'"),
    (["--widths", "64"], 2, "error: an audit needs at least two different positive --widths, each once; got [64]"),
    (["--widths", "32,64,32"], 2, "error: an audit needs at least two different positive --widths, each once; got "
                                  "[32, 64, 32]"),
    (["--depths", "3"], 2, "error: an audit needs at least two different positive --depths, each once; got [3]"),
    (["--depths", "2,4", "--depth", "3"], 2, "error: --depth 3 is the width sweep's depth, but --depths alone runs "
                                             "none"),
    (["RUN", "--model", "gpt"], 2, "error: a run dir brings its own settings; --model is not taken with it"),
])
def test_bad_input_is_one_line(argv, status, message, capsys):
    """One line, before any model is built; a bad command line exits 2, not the 1 of a failed audit (a script reads
    1 as a parameter that fails): --tol -1, one width, a run dir with --model exited 1 (ValueError). --depth with
    --depths alone was taken and ignored (the depth sweep measures at --depths); a repeated width was measured twice
    and weighed twice in the fit."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == status and err.count("\n") == 1 and err.startswith("error: ") and message in err, err


def test_an_unwritable_json_or_a_probe_that_cannot_fit_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    """--json is checked before the audit runs; the probe is compiled and its memory checked against what the machine
    has free before any of it is allocated."""
    with pytest.raises(SystemExit) as e:
        main(["--json", str(tmp_path), "--widths", "16,64"])
    assert "--json" in clean_error(e.value.code, capsys.readouterr().err)
    monkeypatch.setattr(memory, "free_memory", lambda: 1000)
    with pytest.raises(SystemExit) as e:
        main(["--model", "mlp_resnet", "--model-opt", "in_shape=8", "--widths", "16,64", "--depth", "1",
              "--json", str(tmp_path / "a.json")])
    line = clean_error(e.value.code, capsys.readouterr().err)
    assert "the compiled audit probe needs" in line and "audit smaller --widths" in line, line
    assert not (tmp_path / "a.json").exists()


def test_a_saved_state_that_gives_a_vector_to_muon_fails():
    """A run dir's optimizer state as the checkpoint holds it (nested dicts): a norm gain under the `spectral` part of
    the Muon chain contradicts theory (vectors are Adam's); a matrix there does not."""
    gain, w = np.zeros((2, 8)), np.zeros((2, 8, 8))
    opt = [None, {"inner_states": {"spectral": {"inner_state": {"mu": {"blocks": {"gain": {"value": gain},
                                                                                    "w": {"value": w}}}}}}}]
    tags = {"blocks/gain": Tag("vector", 1, 8), "blocks/w": Tag("hidden", 8, 8)}
    cfg = RunConfig.from_flat({"optimizer": "muon"})
    assert saved_families(opt, tags, cfg) == ["saved state blocks/gain: Muon's state holds it; theory: adam"]


@pytest.mark.slow
def test_a_run_dir_is_audited_with_its_own_settings(tmp_path, capsys):
    """`python -m zoo.audit RUN_DIR`: the run's model, plugin and optimizer, at its base width and width (and its
    base depth and depth: depth_mup scales with depth); a flag that describes another run is refused."""
    run = tmp_path / "run"
    proc = run_train(["--model", "mlp_resnet", "--param", "depth_mup", "--width", "32", "--base-width", "16",
                      "--depth", "2", "--base-depth", "1", "--batch-size", "8", "--data", "synthetic", "--steps", "1",
                      "--optimizer", "muon", "--run-dir", str(run)])
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(SystemExit) as e:
        main([str(run), "--json", str(tmp_path / "a.json")])
    assert e.value.code == 0, capsys.readouterr()
    result = json.loads((tmp_path / "a.json").read_text())
    assert result["run"]["optimizer"] == "muon" and result["run"]["run_dir"] == str(run)
    assert result["axes"]["width"]["sizes"] == [16, 32] and result["axes"]["depth"]["sizes"] == [1, 2]
    with pytest.raises(SystemExit) as e:
        main([str(run), "--optimizer", "adam"])
    assert "--optimizer is not taken" in clean_error(e.value.code, capsys.readouterr().err)


@pytest.mark.parametrize("power", [1.0, 2.0, -1.0])
def test_output_power_is_the_power_the_logits_carry(power):
    g = jnp.arange(1.0, 7.0).reshape(2, 3)
    c = {"m": jnp.asarray(0.7)}
    p = measure.output_power(lambda t: t["m"] ** power * g, c, c)
    assert float(p) == pytest.approx(power, rel=1e-5)


@pytest.mark.parametrize("size,base,want", [(1, 1, [1, 2]), (1, None, [1, 2]), (2, 2, [1, 2]), (6, 6, [3, 6]),
                                            (5, 3, [3, 5])])
def test_a_run_at_size_1_is_audited_at_1_and_2(size, base, want):
    """A run dir of depth_mup at depth 1 = its base depth was audited at depths [max(1, 1 // 2), 1] = [1, 1] and
    refused ('an audit needs at least two different positive depths, got [1, 1]'), depths the user never gave; a
    size with no half is measured at it and twice it."""
    from zoo.audit.rundir import around

    assert around(size, base) == want


def test_a_runs_model_options_give_its_default_size():
    """An audit without widths or depths measures at the sizes the run's model options give: a one-block GPT is
    audited at depth 1 (it was audited at the GPT's default 6 unrolled blocks), else the model's defaults."""
    adam = OptimConfig("adam", lr=1e-3)
    assert ZooRun("gpt", P.get("mup"), adam, {"depth": 1, "width": 32}, batch_size=2).default_size() == (32, 1)
    assert ZooRun("gpt", P.get("mup"), adam, {}, batch_size=2).default_size() == (384, 6)


def test_an_update_that_is_not_finite_fails_its_check():
    """`zoo.audit --lr 1e30`: every update RMS was inf, the checks went unjudged ('zero or negative at some size'),
    and the audit said PASS with exit status 0. A judged quantity that is not finite at some size fails now; one that
    is 0 keeps its note and no verdict (a null direction, no decay)."""
    diverged = judge.check("update_rms", [16, 32], [math.inf, math.inf], [0.0, 0.0], 0.1)
    assert diverged.passed is False and "not finite at some size, the step diverged" in diverged.note
    assert judge.failures([diverged]) == ["update_rms slope n/a, theory +0.00 (not finite at some size, the step "
                                          "diverged: give a smaller --lr)"]
    zero = judge.check("update_rms", [16, 32], [0.0, 1e-3], [0.0, 0.0], 0.1)
    assert zero.passed is None and zero.note == "zero or negative at some size"
    assert judge.check("update_rms", [16, 32], [math.nan, 1.0], [0.0, 0.0], 0.1, judged=False).passed is None


def test_a_context_length_for_a_model_without_one_is_refused(tmp_path, capsys):
    """`zoo.audit --model mlp_resnet --seq-len 8` audited the image model and ignored the flag; train.py refuses it."""
    with pytest.raises(SystemExit) as e:
        main(["--model", "mlp_resnet", "--seq-len", "8", "--json", str(tmp_path / "a.json")])
    assert "--seq-len is the context length of a language model, but mlp_resnet has none" in clean_error(
        e.value.code, capsys.readouterr().err)
    assert not (tmp_path / "a.json").exists()


def test_the_audits_record_names_the_decay_of_vectors():
    """The audit's record of the run (its JSON's "run") names every optimizer setting a rule depends on: it named
    the weight decay but not --decay-vectors, which decides whether the biases and norm gains shrink."""
    for every in (False, True):
        run = ZooRun("mlp_resnet", P.get("mup"), OptimConfig(name="adamw", decay_vectors=every))
        assert run.describe()["decay_vectors"] is every and run.describe()["weight_decay"] == 0.1


def test_the_audit_measures_the_step_against_the_steps_own_gradient():
    """The audit read Muon's step per unit of the Newton-Schulz output of a gradient taken without the ViT's drop
    path, which the step's own gradient had: its attention matrices stepped 7% 'short' at width 32 (a slope +0.11 to
    +0.16 from width 32, a FAIL). Program.gradients is the step's own gradient: under plain SGD (lr 1) the update is
    exactly minus it, dropout and label smoothing included."""
    from flax import nnx

    import zoo.models
    from zoo.train.step import build_program

    plugin = P.get("sp")
    cfg = zoo.models.config("gpt", width=32, depth=1, head_dim=16, seq_len=8, vocab_size=11, dropout=0.3)
    prog = build_program(lambda r: zoo.models.create("gpt", cfg, plugin, r), plugin,
                         OptimConfig("sgd", lr=1.0, weight_decay=0.0), label_smoothing=0.1)
    state = prog.init(jax.random.key(0))
    x = jax.random.randint(jax.random.key(1), (4, 8), 0, 11)
    batch = {"x": x, "y": jnp.roll(x, -1, 1)}
    new, _ = prog.train_step(state, batch)
    step = jax.tree.map(lambda a, b: a - b, nnx.to_pure_dict(new["params"]), nnx.to_pure_dict(state["params"]))
    grads = nnx.to_pure_dict(prog.gradients(state, batch))
    for (path, u), g in zip(jax.tree_util.tree_leaves_with_path(step), jax.tree.leaves(grads), strict=True):
        np.testing.assert_allclose(u, -g, rtol=1e-5, atol=1e-7, err_msg=jax.tree_util.keystr(path))


@pytest.mark.slow
def test_a_vits_muon_step_is_flat_in_width_from_the_smallest_width(tmp_path):
    """The ViT's options (drop path 0.1) under muP and Muon at widths 32 and 48: every hidden matrix's step per unit
    of Newton-Schulz output equal at both widths (it failed at +0.16 before)."""
    report = tmp_path / "audit.json"
    with pytest.raises(SystemExit) as done:
        main(["--model", "vit", "--param", "mup", "--optimizer", "muon", "--widths", "32,48", "--depth", "2",
              "--json", str(report)])
    assert done.value.code == 0
    params = json.loads(report.read_text())["axes"]["width"]["params"]
    steps = {p: v["checks"]["spectral_step"]["values"] for p, v in params.items() if "spectral_step" in v["checks"]}
    assert len(steps) == 6, steps  # q, k, v, o, fc1, fc2
    for path, (small, large) in steps.items():
        assert math.isclose(small, large, rel_tol=2e-3), (path, small, large)
