"""A referee's checks of the criticality and diversity diagnostics at settings the other tests do not use, each a
regression test for a bug found there (seed_partial_jacobians.md; seed_depth_mup.md)."""

from __future__ import annotations

import numpy as np
import pytest

import zoo.models as M
import zoo.param as P
from zoo.diagnostics import jacobian
from zoo.param import mean_field_theory as theory


def mlp(**opts):
    """The paper's MLP: the MLP-ResNet without mean subtraction, on a small input."""
    return M.config("mlp_resnet", **{"mean_subtract": False, "in_shape": (16,), **opts})


def test_a_grid_over_sigma_b_holds_the_default_sigma_w_fixed():
    """An erf MLP (mu = 0) with sigma_w left unset: a grid over sigma_b holds sigma_w at the model's critical point
    sqrt(pi / 4), so chi_hat is the recursion's chi^12 at sigma_b = 0.1 and 1 (0.866 and 0.387; measured 0.820 and
    0.357 at width 128, 8 seeds: within 0.08). It took sigma_w on the critical line at the grid's first sigma_b
    (1.056 at 0.1), so the diagram sat at another sigma_w than the plugin's (measured 0.947 and 0.470)."""
    cfg = mlp(width=128, depth=12, activation="erf", bias=True)
    chi, err = jacobian.chi_grid("mlp_resnet", cfg, {"sigma_b": [0.1, 1.0]}, base=P.get("critical", mu=0.0),
                                 seeds=8, batch=4, probes=1)
    block = theory.Block.of(cfg)
    expect = [theory.recursion(block, (np.pi / 4) ** 0.5, sb, 0.0, 12)[0][-1] for sb in (0.1, 1.0)]
    assert expect[1] < 0.7 and np.all(np.abs(chi - expect) < 0.08), (chi, err, expect)


def test_find_sigma_b_at_the_default_sigma_w_finds_the_pre_ln_ratio():
    """Pre-LN without a residual (erf, pre_nonlin, mu = 0): the plugin's default point is sigma_w = 1 on the line
    sigma_b / sigma_w = 0.324; `find_critical` of sigma_b with sigma_w unset holds sigma_w = 1 and finds 0.324
    (0.313 at width 96, depth 6: within 0.04). It re-derived sigma_w = sigma_b / 0.324 at every trial value, so
    chi_hat was 1 everywhere and the bisection returned noise (here 'the same sign at both ends')."""
    cfg = mlp(width=96, depth=6, activation="erf", pre_ln=True, pre_nonlin=True, bias=True)
    found = jacobian.find_critical("mlp_resnet", cfg, "sigma_b", 0.05, 1.0, tol=0.01, fixed={"mu": 0.0}, seeds=6,
                                   batch=4, probes=2)
    assert abs(found - 0.324) <= 0.04, found


@pytest.mark.parametrize("grid, why", [((("sigma_w", [1.0, 2.0]), ("sigma_w", [1.0, 2.0])), "must differ"),
                                       ((("sigma_w", [0.0, 1.0]), ("mu", [0.0, 0.5])), "must be > 0")])
def test_a_refused_experiment_writes_nothing(tmp_path, grid, why):
    """`python -m zoo.criticality --profile` with a grid refused (the same axis twice, or sigma_w = 0 on it): one
    ValueError and `out` left absent. The APJN profile's figure used to be written into `out` before the grid
    failed (and the same axis twice was found only after the report and profile were measured)."""
    from zoo.diagnostics.criticality import CriticalitySpec, criticality

    spec = CriticalitySpec(width=16, depth=3, seeds=1, batch=2, probes=1, profile=True, grid=grid)
    with pytest.raises(ValueError, match=why):
        criticality(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_out_inside_a_file_is_refused_first(tmp_path, monkeypatch):
    """--out naming a file (or a path below one) is one line before anything is measured; it used to measure the
    report and then fail on mkdir with 'File exists'."""
    from zoo.diagnostics import criticality as experiment

    monkeypatch.setattr(experiment, "run_report", lambda *a, **k: pytest.fail("measured before refusing --out"))
    (tmp_path / "f").write_text("")
    for out in (tmp_path / "f", tmp_path / "f" / "sub"):
        with pytest.raises(ValueError, match=f"--out {out}: {tmp_path / 'f'} is a file, not a directory"):
            experiment.criticality(experiment.CriticalitySpec(width=16, depth=3), out)


def test_a_model_too_large_is_refused_before_any_theory_or_measurement(tmp_path, monkeypatch):
    """--depth 100000000 at width 16 (129 GB) is one line naming the size and the memory free, before the report:
    the infinite-width recursion alone used to run 1.1e9 Python steps (130 us each) for the run report's note, then
    the model would not fit. The extrapolation from depths 2 and 3 is exact: at depth 7 it equals the shapes'
    bytes of the MLP-ResNet and of a GPT (unrolled blocks). Width 3 x 10^9 (1.8e19 weights a block) wrapped the
    int64 product of the shapes negative and passed, and XLA aborted the process (status 134)."""
    from zoo.diagnostics import criticality as experiment

    monkeypatch.setattr(experiment, "run_report", lambda *a, **k: pytest.fail("measured a model that cannot fit"))
    monkeypatch.setattr(experiment.jacobian.memory, "free_memory", lambda: 20 * 10**9)
    spec = experiment.CriticalitySpec(width=16, depth=10**8, seeds=1, batch=2, probes=1)
    line = (r"mlp_resnet at width 16 and depth 100000000 needs at least 1[0-9]{2}\.\d GB \(its parameters and one "
            r"forward pass of 2 inputs\), more than the 20\.0 GB free here")
    with pytest.raises(ValueError, match=line):
        experiment.criticality(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    wide = experiment.CriticalitySpec(width=3 * 10**9, depth=2, seeds=1, batch=2, probes=1)
    with pytest.raises(ValueError, match="mlp_resnet at width 3000000000 and depth 2 needs at least 72,000,0"):
        experiment.criticality(wide, tmp_path / "out")  # 1.8e19 weights: np.prod wrapped past 2^63 (XLA aborted)
    for name, opts in (("mlp_resnet", {}), ("gpt", {"seq_len": 8, "head_dim": 16})):
        at = [jacobian._model_bytes(name, M.config(name, width=32, depth=d, **opts), 4) for d in (2, 3, 7)]
        assert at[2] == at[0] + 5 * (at[1] - at[0]) > at[1] > at[0], at


@pytest.mark.parametrize("values, line", [
    ({"sigma_w": [1.0, 0.0, -1.0]}, "option sigma_w of 'critical' must be > 0, got 0.0"),
    ({"sigma_b": [0.5, -0.5]}, "option sigma_b of 'critical' must be >= 0, got -0.5"),
    ({"mu": [0.0, 1e300]}, "option mu of 'critical' 1e\\+300 is beyond float32's largest number"),
    ({"sigma_w": [1.0, 1e-45]}, "option sigma_w of 'critical' 1e-45 is below float32's smallest normal number")])
def test_every_grid_value_is_in_the_plugins_range(values, line):
    """A grid's values are checked as the plugin's options are, each of them: a grid sigma_w = 1:-1:3 measured
    sigma_w = 0 (chi_hat 0) and -1 (the init of +1) silently, while 0:1:3 was refused (only the first value, bound
    into the plugin, was checked); mu = 1e300 is inf in the float32 network (chi_hat nan)."""
    cfg = mlp(width=16, depth=3, bias=True)
    with pytest.raises(ValueError, match=line):
        jacobian.chi_grid("mlp_resnet", cfg, values, base=P.get("critical", sigma_w=1.0, sigma_b=0.0, mu=0.0),
                          seeds=1, batch=2, probes=1)


def test_bad_numbers_on_the_command_line_are_one_line(tmp_path, capsys):
    """--param-opt sigma_w=1e300 ended in an OverflowError with a traceback file (sigma_w^2 in the recursion), a
    grid axis of 10^10 points built a Python list for minutes, an axis 1:1:3 measured one point three times and drew
    zero-width cells, --probes 3000000000 ended in JAX's OverflowError (and 10^8 ran for hours), and --find's bound
    beyond float32 was measured: now one line each, status 1 or 2, nothing written."""
    from zoo.cli.criticality import main

    small = ["--width", "16", "--depth", "3", "--seeds", "1", "--batch", "2", "--probes", "1"]
    for args, line in ((["--param-opt", "sigma_w=1e300"], "1e+300 is beyond float32's largest number 3.4e+38"),
                       (["--grid", "sigma_w=0.1:1:10000000000", "--grid", "mu=0:1:2"],
                        "a grid axis takes 2 to 1024 points"),
                       (["--grid", "sigma_w=1:1:3", "--grid", "mu=0:1:2"], "a grid axis needs lo != hi"),
                       (["--probes", "3000000000"], "argument --probes: must be at most 1024"),
                       (["--find", "sigma_w=0.1:1e300"], "1e+300 is beyond float32's largest number")):
        with pytest.raises(SystemExit) as code:
            main([*small, *args, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code.value.code in (1, 2) and len(err) == 1 and line in err[0], err
        assert not (tmp_path / "out").exists()


def test_the_skip_multiplier_enters_as_mu_squared():
    """chi = mu^2 + beta^2 sigma_w^2 E phi'^2 c_N (eqs. 21-22): the sign of mu does not decide criticality.
    mu = -1 with pre-LN is everywhere critical like mu = 1 (Thm 1.3): the plugin takes the sigma_w that doubles the
    stream's variance over the stack (without mean subtraction here, where the stream's mean alternates in sign), and
    chi_hat there is the recursion's (width 128, depth 12, 6 seeds: within 4 standard errors + 0.01). It was refused
    with 'no critical sigma_b ... chi* goes from 1 to 1'; mu = -1 without LayerNorm is refused for the right reason
    (it cited the sigma_b > 0 points' 0 <= mu < 1), as is mu = 1.5 with LayerNorm ('chi* goes from 2.25 to 2.25')."""
    cfg = mlp(width=128, depth=12, pre_ln=True)
    bound = P.get("critical", mu=-1.0).for_model("mlp_resnet", cfg)
    m, q = 0.0, 1.0
    for _ in range(12):
        _, m, q = theory.step(theory.Block.of(cfg), bound.sigma_w, 0.0, -1.0, m, q)
    assert q - m**2 == pytest.approx(2.0, rel=1e-3)  # Var(x^L) = 2 Var(x^0)
    chis = bound.infinite_width_chis("mlp_resnet", cfg, 12)
    chi, err = jacobian.chi_hat("mlp_resnet", cfg, bound, seeds=6, batch=4, probes=2)
    assert 1.0 < chis[-1] < 1.1 and abs(chi - chis[-1]) < 4 * err + 0.01, (chi, err, chis[-1])
    for mu, opts in ((-1.0, {}), (1.5, {"pre_ln": True})):
        with pytest.raises(ValueError, match=f"no critical sigma_w for mu={mu}.*: chi = mu\\^2 \\+ beta\\^2"):
            P.get("critical", mu=mu).for_model("mlp_resnet", mlp(width=16, depth=4, **opts))


def test_a_stream_that_overflows_float32_measures_nan_not_zero():
    """A ReLU MLP (mu = 0) at sigma_w = 10, depth 60: the stream grows like 50^(l/2) and is inf in float32 by block
    45, and the jvp through inf gave J = 0, so chi_hat read 0 (the chaotic phase, chi = 50, drawn as deeply ordered
    on a phase diagram; --find took it for chi < 1). Now chi_hat is NaN there (a grey cell), --find says it cannot
    measure there, and the run report says why; at sigma_w = 1 chi_hat is still sigma_w^2 / 2 (width 64: within 0.1)."""
    from zoo.diagnostics import run_report

    cfg = mlp(width=64, depth=60)
    base = P.get("critical", sigma_b=0.0, mu=0.0)
    chi, err = jacobian.chi_grid("mlp_resnet", cfg, {"sigma_w": [1.0, 10.0]}, base=base, seeds=4, batch=4, probes=1)
    assert abs(chi[0] - 0.5) < 0.1 and np.isnan(chi[1]), (chi, err)  # 0.516 +- 0.032
    with pytest.raises(ValueError, match="chi_hat cannot be measured at sigma_w=10: the float32 forward pass"):
        jacobian.find_critical("mlp_resnet", cfg, "sigma_w", 1.0, 10.0, fixed={"sigma_b": 0.0, "mu": 0.0}, seeds=4,
                               batch=4, probes=1)
    report = run_report("mlp_resnet", cfg, P.get("critical", sigma_w=10.0, sigma_b=0.0, mu=0.0), seeds=4, batch=4,
                        probes=1)
    assert np.isnan(report["chi"]) and report["note"].startswith("chi_hat is nan: the stream overflows float32")


@pytest.mark.parametrize("lam", [0.29, 0.57, 0.58])
def test_diversity_blocks_round_alike_at_every_depth_fraction(lam):
    """A straight path x^l = (l / L) v has d(eps) = eps |v| / sqrt(n): slope 1 at every depth fraction (Claim 7.4's
    limit). At L = 100 and lambda = 0.29, 0.57 or 0.58, lambda L rounds below its integer in floating point
    (28.999999999999996), so the start block was one too early while each eps = k/L end was not: every step spanned
    k + 1 blocks, and the slope read 0.776."""
    from zoo.diagnostics.diversity import default_eps, feature_diversity

    depth = 100
    line = np.linspace(0, 1, depth + 1)[:, None, None] * np.random.default_rng(1).standard_normal((1, 4, 32))
    d, slope = feature_diversity(line, lam, default_eps(depth, lam))
    assert slope == pytest.approx(1.0, abs=1e-9)
    assert d[0] == pytest.approx(np.mean(np.linalg.norm(line[1, :, :], axis=-1)) / np.sqrt(32))  # one block apart


@pytest.mark.parametrize("diverged", ["embed", "pre.0"])
def test_the_coordinate_check_lr_counts_a_diverged_layer(diverged):
    """choose_lr's linear regime: a layer whose change is NaN (its steps diverged) is beyond any limit. Python's max
    over the layers kept or dropped a NaN by its place: second, it was dropped and lr 1e-3 accepted with a diverged
    layer; first, the search stopped with 'no ... layer is nonzero at init'. Now both lower the LR to 1e-7 and
    say that none keeps the change within the limit."""
    from zoo.diagnostics.coord import Changes
    from zoo.diagnostics.coord_lr import choose_lr, linear_change

    total = {"embed": np.full((2, 3), 0.05), "pre.0": np.full((2, 3), 0.05)}
    total[diverged] = np.full((2, 3), np.nan)
    changes = Changes(total=total, branch={}, init={"embed": np.ones(2), "pre.0": np.ones(2)})
    assert linear_change(changes) == np.inf
    with pytest.raises(ValueError, match="no learning rate down to 1e-07 keeps every activation's change within 0.1"):
        choose_lr(lambda lr: changes)


def test_chi_hat_measures_the_plugins_branch_multiplier():
    """The critical plugin with a branch multiplier beta (branch_mult, or alpha with a base depth) takes sigma_w with
    beta^2 sigma_w^2 E phi'^2 = 1 (ReLU MLP, beta = 2: sigma_w = 0.707); chi_hat must measure that network. The grid
    program rebuilt each point as Critical(sigma_w, sigma_b, mu), dropping beta, and run_report measured
    sigma_w^2 / 2 = 0.25 where theory says 1 (width 96, depth 8, 6 seeds: now within 0.1). A grid under
    --param-opt branch_mult keeps it too: chi_hat = beta^2 sigma_w^2 / 2."""
    cfg = mlp(width=96, depth=8)
    bound = P.get("critical", branch_mult=2.0).for_model("mlp_resnet", cfg)
    assert bound.sigma_w == pytest.approx(0.5**0.5, rel=1e-3)
    chi, err = jacobian.chi_hat("mlp_resnet", cfg, bound, seeds=6, batch=4, probes=1)
    assert abs(chi - 1.0) < 0.1, (chi, err)
    chi, err = jacobian.chi_grid("mlp_resnet", cfg, {"sigma_w": [0.5, 0.6]}, seeds=6, batch=4, probes=1,
                                 base=P.get("critical", branch_mult=2.0, sigma_b=0.0, mu=0.0))
    assert np.all(np.abs(chi - 2 * np.array([0.5, 0.6]) ** 2) < 0.1), (chi, err)


def test_plugin_options_reach_the_experiment_typed(tmp_path):
    """--param-opt values are typed by the plugin: zero_init=true (which leaves the stack's APJN as it is) was
    refused with 'could not convert string to float: 'true'', and branch_mult=abc with the same bare line; now the
    first runs and the second names the option."""
    from zoo.diagnostics.criticality import CriticalitySpec, criticality

    small = dict(width=16, depth=3, seeds=1, batch=2, probes=1)
    record = criticality(CriticalitySpec(param_opt={"zero_init": "true"}, **small), tmp_path / "a")
    assert record["report"]["chi"] > 0
    with pytest.raises(ValueError, match="option branch_mult of 'critical' must be a number, got 'abc'"):
        criticality(CriticalitySpec(param_opt={"branch_mult": "abc"}, **small), tmp_path / "b")


def test_pre_ln_sigma_w_is_refused_where_the_stream_cannot_double():
    """With LayerNorm and mu = 1 the plugin takes the sigma_w that doubles the stream's variance over the stack. A
    bounded phi adds at most beta^2 a block, so with erf, beta = 0.5 (branch_mult) and 4 blocks no sigma_w does:
    the bisection returned its bracket's end, sigma_w = 100, silently (chi_hat in the hundreds: A grows with
    sigma_w, B does not). Now one line that says so and asks for sigma_w; where the stream can double (8 blocks)
    the point is still found (the growth 2 checked on the recursion)."""
    cfg = mlp(width=16, depth=4, activation="erf", pre_ln=True)
    with pytest.raises(ValueError, match=r"grows by less than 2.0 over 4 blocks at every sigma_w up to 100 \(erf is "
                                         r"bounded, branch multiplier 0.5\); give sigma_w"):
        P.get("critical", branch_mult=0.5).for_model("mlp_resnet", cfg)
    cfg = mlp(width=16, depth=8, activation="erf", pre_ln=True)
    bound = P.get("critical", branch_mult=0.5).for_model("mlp_resnet", cfg)
    block = theory.Block.of(cfg, 0.5)
    m, q = 0.0, 1.0
    for _ in range(8):
        _, m, q = theory.step(block, bound.sigma_w, 0.0, 1.0, m, q)
    assert bound.sigma_w < 10 and q - m**2 == pytest.approx(2.0, rel=1e-3), bound.sigma_w


def test_the_coordinate_check_lr_search_reaches_its_lowest_lr():
    """choose_lr tries FIRST_LR / sqrt(10)^k down to LOWEST_LR = 1e-7, nine rates. Dividing by sqrt(10) eight times
    gives 9.999999999999994e-08, below 1e-7, so the search stopped at 3.16e-7 and said that no rate 'down to 1e-07'
    kept the changes linear without trying 1e-7; a model linear only there is now measured at it."""
    from zoo.diagnostics.coord import Changes
    from zoo.diagnostics.coord_lr import LOWEST_LR, choose_lr

    tried = []

    def measure(lr):
        tried.append(lr)
        change = 0.05 if lr < 2 * LOWEST_LR else 1.0
        return Changes(total={"embed": np.full((1, 3), change)}, branch={}, init={"embed": np.ones(1)})

    lr, _, change = choose_lr(measure)
    assert lr == pytest.approx(LOWEST_LR, rel=1e-9) and change == pytest.approx(0.05) and len(tried) == 9


def test_diversity_slope_is_fitted_against_the_blocks_each_eps_spans():
    """eps off the block grid (1.5, 3 and 6 blocks at L = 100) measures the steps floor rounds them to (1, 3 and 6
    blocks): fitted against those, a straight path's slope is 1 and a random walk's 1/2 (within 0.05 over 256
    inputs); against the nominal eps the straight path read 1.29."""
    from zoo.diagnostics.diversity import feature_diversity

    depth, rng = 100, np.random.default_rng(2)
    line = np.linspace(0, 1, depth + 1)[:, None, None] * rng.standard_normal((1, 4, 32))
    walk = np.concatenate([np.zeros((1, 256, 32)), np.cumsum(rng.standard_normal((depth, 256, 32)), 0)])
    eps = [0.015, 0.03, 0.06]
    assert feature_diversity(line, 0.5, eps)[1] == pytest.approx(1.0, abs=1e-9)
    assert feature_diversity(walk, 0.5, eps)[1] == pytest.approx(0.5, abs=0.05)
