"""`python -m zoo.coord_check` as a user runs it (its `main`, in-process, so compiled programs are shared across
tests), and the slopes plugins predict (TP IVb section 3, Thm 2.8.12; TP VI section 7; seed_tp4b_adam.md sections 3
and 6, seed_depth_mup.md sections 1.3 and 5)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_utils import ROOT

import zoo.models as M
import zoo.param as P
from zoo.cli.coord_check import main
from zoo.diagnostics import verdict
from zoo.param.mup import MuP
from zoo.param.tags import Tag

# the tanh MLP-ResNet of depth 8 on CIFAR-sized inputs (3072 features), whose input layer's change is large; two
# widths a factor 4 apart (one compiled program each, shared by every plugin and LR)
MLP = ["--model", "mlp_resnet", "--widths", "128,512", "--model-opt", "activation=tanh", "--seeds", "2"]
# GPT with the shapes of test_coord_slopes_models (its compiled programs serve both). The readout term
# V0 . (Delta h) still carries its n^-1/2 random part at these widths, so the muP output slope sits near -0.2 (it
# vanishes with a zero-initialized readout); tol 0.25 leaves SP's +0.3..+1 failing.
GPT = ["--model", "gpt", "--widths", "128,512", "--batch", "8", "--lr", "3e-3", "--seeds", "2", "--tol", "0.25",
       *(f"--model-opt={o}" for o in ("depth=2", "head_dim=16", "seq_len=16", "vocab_size=32", "scale_heads=false",
                                      "base_width=64"))]
DEPTHS = ["--model", "mlp_resnet", "--depths", "8,128", "--width", "64", "--seeds", "2"]


def coord_check(args: list[str], out: Path, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of `python -m zoo.coord_check ARGS --out OUT`."""
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--out", str(out)])
    captured = capsys.readouterr()
    return exit_.value.code, captured.out, captured.err


def record(out: Path, axis: str) -> dict:
    return json.loads((out / f"coord_check_{axis}.json").read_text())


@dataclasses.dataclass(frozen=True)
class SlowHidden(MuP):
    """muP whose optimizer builder gives the hidden matrices' Adam LR an extra 1/m (4x too small at width 512), its
    stated table muP's (issue 41)."""

    name = "mup_slow_hidden"

    def lr_exponent(self, tag: Tag, family: str = "adam") -> float:
        c = super().lr_exponent(tag, family)
        return c + 1 if family == "adam" and tag.kind == "hidden" else c


@pytest.mark.slow
@pytest.mark.parametrize("model_args", [MLP, GPT], ids=["mlp_resnet", "gpt"])
@pytest.mark.parametrize("param, status", [("mup", 0), ("sp", 1)])
def test_verdict_and_exit_status(tmp_path, capsys, monkeypatch, model_args, param, status):
    """muP keeps every layer's change flat in width (PASS, exit 0); SP with a constant Adam LR grows the hidden
    and output changes (r = -1 < 0: unstable), so the check FAILs with exit status 1 and says why, even on the
    MLP whose 3072-feature input layer's width-independent change hides most of the growth at these widths (hidden
    slopes only +0.04..+0.2: the old verdict, against the prediction capped at 0, let such layers pass). A table, a
    PNG and a JSON with the slopes are written either way."""
    code, out, err = coord_check([*model_args, "--param", param], tmp_path, capsys)
    assert code == status, out + err
    assert ("PASS" if status == 0 else "FAIL") in out
    rec = record(tmp_path, "width")
    assert rec["passed"] is (status == 0) and bool(rec["unstable"]) is (status == 1)
    assert (tmp_path / "coord_check_width.png").stat().st_size > 10_000
    hidden = [s for v in rec["layers"].values() if v["group"] in ("hidden", "stream") for s in v["slopes"]]
    if param == "mup":
        assert max(abs(s) for s in hidden) <= 0.15
        assert all(v["passed"] for part in rec["part_layers"].values() for v in part.values())
        if model_args is MLP:
            # the input layer's change is every hidden and stream layer's total, so a hidden LR with an extra 1/m keeps
            # them at muP's n^0 (issue 41); the hidden parameters' own part moves like n^-1 (-1.01..-1.05) and FAILs.
            # The compiled programs are muP's.
            monkeypatch.setitem(P.PLUGINS.entries, SlowHidden.name, SlowHidden)
            code, out, err = coord_check([*model_args, "--param", SlowHidden.name], tmp_path / "slow", capsys)
            slow = record(tmp_path / "slow", "width")
            assert code == 1 and "FAIL (width)" in out and "pre/0 (hidden alone)" in out, out + err
            assert all(v["passed"] for v in slow["layers"].values())
            assert all(-1.15 < s < -0.85 for v in slow["part_layers"]["hidden"].values() for s in v["slopes"])
            assert {v["group"] for v in slow["part_layers"]["hidden"].values()} == {"hidden", "stream"}
            assert [p.name for p in (tmp_path / "slow").glob("*_hidden.png")] == ["coord_check_width_hidden.png"]
            assert not list(tmp_path.glob("coord_check_width_*.png"))  # muP: no part fails, no part's figure
    else:
        assert "unstable by theory" in out and "hidden change grows like width^+1.00" in out
        assert min(hidden) > 0 and max(hidden) >= (0.3 if "gpt" in model_args else 0.1), hidden
        # the FAIL says whether the data show the growth: the logits' (+0.66 +- 0.04 on the MLP) do
        assert "measured: " in out and "output grows in 1 of 1 layers (p < 0.01" in out, out
        assert any(g["significant"] for g in rec["growth"]) and {g["group"] for g in rec["growth"]} >= {"hidden"}


@pytest.mark.slow
@pytest.mark.parametrize("param, status", [("depth_mup", 0), ("mup", 1)])
def test_depth_sweep_verdict(tmp_path, capsys, param, status):
    """Against depth (TP VI section 7, seed_depth_mup.md section 5): Depth-muP's branch multiplier L^-1/2 and branch
    LR L^-1/2 keep every block's change flat in L, the total and the branch parameters' part alike (PASS); muP alone
    (alpha = gamma = 0) is unstable by theory (Claims 7.1-7.2) and its changes grow (FAIL). Only the depth sweep
    runs when --depths comes without --widths."""
    code, out, err = coord_check([*DEPTHS, "--param", param], tmp_path, capsys)
    assert code == status, out + err
    rec = record(tmp_path, "depth")
    assert rec["sizes"] == [8, 128] and not (tmp_path / "coord_check_width.json").exists()
    hidden = [max(v["slopes"]) for v in rec["layers"].values() if v["group"] in ("hidden", "stream")]
    branch = [s for v in rec["branch_layers"].values() for s in v["slopes"]]
    assert {v["group"] for v in rec["branch_layers"].values()} == {"stream", "output"}
    if status == 0:
        assert max(hidden) <= 0.15 and max(abs(s) for s in branch) <= 0.15, (hidden, branch)
    else:
        assert max(hidden) >= 0.5 and "unstable by theory" in out, hidden


@pytest.mark.slow
def test_growth_predicted_by_theory_fails_even_when_the_total_looks_flat(tmp_path, capsys):
    """Depth-muP with gamma = 0 (TP VI: alpha + gamma = 1/2 < 1) predicts updates growing like L^(1/2). At practical
    depths the input and readout layers' Theta(1) change dominates the total, whose slope stays near 0; the change
    the residual-branch parameters cause alone shows the growth: slope +0.5 +- 0.15 on the residual stream and the
    output. The verdict is FAIL, "unstable by theory", exit 1 (it used to PASS on the flat total)."""
    code, out, err = coord_check([*DEPTHS, "--param", "depth_mup", "--param-opt", "gamma=0"], tmp_path, capsys)
    assert code == 1 and "unstable by theory" in out and "alpha + gamma = 0.5 < 1" in out, out + err
    rec = record(tmp_path, "depth")
    assert rec["passed"] is False and rec["expected_branch"]["stream"] == 0.5
    total = [s for v in rec["layers"].values() for s in v["slopes"]]
    branch = {k: v["slopes"] for k, v in rec["branch_layers"].items() if v["group"] in ("stream", "output")}
    assert max(total) <= 0.25, total
    np.testing.assert_allclose(np.array(list(branch.values())), 0.5, atol=0.15, err_msg=str(branch))
    assert "measured: " in out and "stream (branch) grows in 4 of 4 layers (p < 0.01" in out, out
    assert (tmp_path / "coord_check_depth_branch.png").stat().st_size > 10_000


def test_unstable_plugin_fails_even_when_slopes_match():
    """A layer whose slope matches a growing prediction is still no PASS: theory's reasons (a positive expected slope
    for a group the model has, an init that blows up) make the plugin fail. SP + Adam is unstable on the
    MLP-ResNet (hidden +1), muP is not; hidden weights without the 1/sqrt(n) init blow up at init."""
    cfg = M.config("mlp_resnet", width=64, depth=2, in_shape=(16,))
    sp = verdict.expected("mlp_resnet", cfg, P.get("sp"), "adam", groups=["input", "hidden", "stream", "output"])
    assert any("hidden change grows like width^+1.00" in r for r in sp.unstable), sp.unstable
    assert verdict.expected("mlp_resnet", cfg, P.get("mup"), "adam").unstable == []
    no_init_scale = P.get("abcd", hidden="0,0,1,1", input="0,0,0,1", vector="0,0,0,1", output="1,0,0,1")
    assert any("a + b = 0 < 0.5" in r for r in verdict.expected("mlp_resnet", cfg, no_init_scale, "adam").unstable)
    slopes = {"pre/0": np.array([1.0, 1.0]), "output": np.array([0.5, 0.5])}
    data = {k: np.ones((3, 2)) for k in slopes}
    as_predicted = verdict.judge(slopes, data, {"hidden": 1.0, "output": 0.5}, stable=False)
    assert all(v.matches and not v.passed for v in as_predicted)
    assert all(v.passed for v in verdict.judge(slopes, data, {"hidden": 1.0, "output": 0.5}, stable=True))


def test_unstable_fail_says_whether_the_growth_shows_in_the_data():
    """A FAIL "unstable by theory" also says whether the measured growth is significant: each layer of a group theory
    expects to grow gets an ordinary least-squares fit of log RMS change (last step) against log size over every
    (size, seed) point, whose slope is the seeds' geometric mean's, whose standard error and one-sided p-value come
    from the spread about the fit (as scipy.stats.linregress gives them). Growth like n^+1 under 5% noise (3 seeds
    at 3 widths) is significant at p < 0.01; a flat layer under the same noise is not (that FAIL rests on theory
    alone); groups not expected to grow get no entry; one seed at two sizes cannot tell."""
    import scipy.stats

    from zoo.diagnostics import coord

    rng = np.random.default_rng(0)
    sizes = [128, 256, 512]
    per_size = [{"embed": np.ones((3, 2)), "pre/0": n * np.exp(rng.normal(0, 0.05, (3, 2))),
                 "blocks/0": np.exp(rng.normal(0, 0.05, (3, 2)))} for n in sizes]
    growth = {g.layer: g for g in verdict.measured_growth(sizes, per_size, {"input": 0.0, "hidden": 1.0,
                                                                            "stream": 1.0})}
    assert set(growth) == {"pre/0", "blocks/0"}
    for layer, g in growth.items():
        assert g.slope == pytest.approx(coord.slopes(sizes, coord.geometric_mean(per_size))[layer][-1], abs=1e-12)
        fit = scipy.stats.linregress(np.repeat(np.log(sizes), 3), np.log([r[layer][:, -1] for r in per_size]).ravel())
        assert (g.slope, g.stderr) == pytest.approx((fit.slope, fit.stderr), rel=1e-9)
        assert g.p_value == pytest.approx(fit.pvalue / 2 if fit.slope > 0 else 1 - fit.pvalue / 2, rel=1e-6)
    assert growth["pre/0"].significant and growth["pre/0"].slope == pytest.approx(1.0, abs=0.05)
    assert not growth["blocks/0"].significant
    grown, flat = growth["pre/0"], growth["blocks/0"]
    assert verdict.growth_summary([flat, grown]) == (
        f"hidden grows in 1 of 1 layers (p < 0.01; pre/0 {grown.slope:+.2f} +- {grown.stderr:.2f}); stream: no "
        f"significant growth at these sizes (blocks/0 {flat.slope:+.2f} +- {flat.stderr:.2f}, p = {flat.p_value:.2g})")
    one_seed = [{"pre/0": r["pre/0"][:1]} for r in per_size[:2]]
    (g,) = verdict.measured_growth(sizes[:2], one_seed, {"hidden": 1.0})
    assert np.isnan(g.stderr) and not g.significant
    assert verdict.growth_summary([g]) == f"hidden: slope {g.slope:+.2f}, significance unknown (one seed at two sizes)"
    assert verdict.measured_growth(sizes, per_size, {"hidden": 0.0, "stream": -0.5}) == []


@pytest.mark.slow
def test_default_lr_keeps_the_smallest_width_linear(tmp_path, capsys):
    """NTK on the tanh MLP-ResNet with CIFAR-sized inputs (3072 features, depth 8): at lr 1e-3 an activation at the
    smallest width moves by more than its own size, the saturating tanh bends the changes and the slopes miss -1/2
    (FAIL). The default LR, chosen from a first measurement at the smallest width, keeps every change within 0.1 of
    its activation, and the check PASSes."""
    args = [*MLP, "--param", "ntk"]
    code, out, err = coord_check([*args, "--lr", "1e-3"], tmp_path, capsys)
    assert code == 1 and record(tmp_path, "width")["linear_change"] > 1.0, out + err
    code, out, err = coord_check(args, tmp_path, capsys)
    rec = record(tmp_path, "width")
    assert code == 0, out + err
    assert rec["lr_chosen"] and rec["lr"] < 1e-3 and rec["linear_change"] <= 0.1 and "(chosen)" in out


@pytest.mark.parametrize("args, expect", [
    (["--widths", "64"], "at least two --widths"),
    (["--depths", "8"], "at least two --depths"),
    (["--depths", "2,4,8"], "each depth must be a multiple of 4, got 2"),
    (["--widths", "8,16", "--depths", "2,4,8"], "each depth must be a multiple of 4, got 2"),  # before the widths
    (["--widths", "a,b"], "comma-separated integers"),
    (["--param", "mupp"], "unknown parametrization 'mupp'"),
    (["--model", "resnet"], "unknown model 'resnet'"),
    (["--model-opt", "in_shape=x"], "must be integers a,b,c"),
    (["--lr", "nan"], "expected a finite number"),
    (["--linear-limit", "0"], "--linear-limit must be positive"),
])
def test_bad_input_is_one_line(tmp_path, capsys, args, expect):
    code, out, err = coord_check(args, tmp_path, capsys)
    assert code == 2 and "Traceback" not in err, out + err  # argparse's and the command's: 1 is a FAIL
    assert expect in err.strip().splitlines()[-1] and "coordinate check" not in out  # refused before any sweep ran


def test_bad_input_from_the_shell_is_one_line(tmp_path):
    """The module run as a program: exit status 2 (its 1 is a FAIL) and one line, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "zoo.coord_check", "--widths", "64", "--out", str(tmp_path)],
                          cwd=ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: a width sweep needs at least two --widths"]


@pytest.mark.slow
def test_ntk_on_the_mixer_is_not_unstable(tmp_path, capsys):
    """NTK on the MLP-Mixer under Adam, widths 64 and 256: the logits' change is flat (slope 0 +- 0.15, theory 0)
    and the verdict does not call the plugin unstable (the token-mixing weights' change is not aligned with the
    readout)."""
    code, out, err = coord_check(["--model", "mixer", "--param", "ntk", "--widths", "64,256", "--seeds", "2",
                                  "--batch", "8", "--model-opt", "depth=2"], tmp_path, capsys)
    rec = record(tmp_path, "width")
    assert "unstable by theory" not in out and not rec["unstable"], out + err
    assert rec["expected"]["output"] == 0 and max(abs(s) for s in rec["layers"]["output"]["slopes"]) <= 0.15, rec


@pytest.mark.slow  # about 20 s
def test_gpt_stream_grows_in_depth_from_a_small_embedding_and_the_tool_says_why(tmp_path, capsys):
    """seed_depth_mup.md 1.3 (Depth-muP, x_l = x_0 + a L^-1/2 sum branches): the limit assumes a Theta(1) stream
    from the start. A GPT's embeddings start it at std 0.02, so the first blocks' pre-LN divides their input's
    change by an RMS of about a L^-1/2, the branch multiplier cancels there, and the stream's change grows with
    depth (slope +0.2..+0.45 at depths 4..16 over settings, past the verdict's tolerance 0.15); from embeddings of
    std 1 it is flat (|slope| < 0.1; measured -0.04..+0.04). Only the first run prints the hint naming the cause.
    The matrices at 1/sqrt(fan_in) (init_std=none), as the limit has them: at GPT-2's 0.02 the branches start small
    too, and the stream's change grows less (+0.06 here)."""
    args = ["--model", "gpt", "--param", "depth_mup", "--depths", "4,16", "--width", "64", "--batch", "4",
            "--seeds", "1", "--lr", "3e-5", "--model-opt=seq_len=16", "--model-opt=scan=true",
            "--model-opt=init_std=none"]
    slopes = {}
    for std in (0.02, 1.0):
        out = tmp_path / str(std)
        _, stdout, _ = coord_check([*args, f"--model-opt=embed_std={std}"], out, capsys)
        record = json.loads((out / "coord_check_depth.json").read_text())
        slopes[std] = record["layers"]["blocks@0.25"]["slopes"][-1]
        assert ("embed_std=1" in stdout) == (std == 0.02), stdout
    assert slopes[0.02] > 0.15 and abs(slopes[1.0]) < 0.1, slopes


def test_muon_io_reaches_the_coordinate_checks_prediction():
    """--muon-io: Muon also trains the input and output layers, which changes what theory predicts (SP: the input
    layer's change shrinks like width^-1/2 and the output's grows like width^+1/2, instead of 0 and +1); the flag
    did not exist, so no coordinate check could test that routing. Without --optimizer muon it is refused."""
    import zoo.models
    import zoo.param
    from zoo.cli.coord_check import parser, spec_of
    from zoo.diagnostics import verdict

    spec = spec_of(parser().parse_args(["--param", "sp", "--optimizer", "muon", "--muon-io"]))
    assert spec.muon_io
    cfg = zoo.models.config("mlp_resnet", width=64, depth=2)
    routed = verdict.expected("mlp_resnet", cfg, zoo.param.get("sp"), "muon", muon_io=spec.muon_io).total
    assert (routed["input"], routed["output"]) == (-0.5, 0.5)
    alone = verdict.expected("mlp_resnet", cfg, zoo.param.get("sp"), "muon").total
    assert (alone["input"], alone["output"]) == (0.0, 1.0)
    with pytest.raises(ValueError, match="--muon-io routes the input and output layers to Muon, but --optimizer is"):
        spec_of(parser().parse_args(["--muon-io"]))


@pytest.mark.parametrize("argv, err", [
    (["--widths", "32,32", "--depth", "2"], "at least two different widths, each once; got 32, 32"),
    (["--depths", "4,8,4", "--width", "16"], "at least two different depths, each once; got 4, 8, 4")])
def test_a_coordinate_check_over_a_repeated_size_is_refused(tmp_path, capsys, argv, err):
    """--widths 32,32 ran and printed a verdict from slopes fitted over log-size differences of 0; a repeated size in
    a longer list weighted it twice. Now one line, before anything trains or is written."""
    from zoo.cli.coord_check import main

    with pytest.raises(SystemExit) as stop:
        main(["--model", "mlp_resnet", "--param", "mup", *argv, "--out", str(tmp_path / "out")])
    text = capsys.readouterr().err
    assert stop.value.code == 2 and text.count("\n") == 1 and err in text, text
    assert not (tmp_path / "out").exists()


def test_one_step_under_a_zero_readout_is_refused_in_one_line(tmp_path, capsys):
    """`python -m zoo.coord_check --steps 1 --param-opt zero_init=true`: the zero readout passes no gradient back at
    the first step, so the embedding, every pre-activation and the stream had change 0 at every width, no slope, and
    each was a FAIL (6 of 6 at depth 2; the logits alone moved): a failed law where none was tested. Now one line
    before anything runs; one step without zero_init, or two with it, is accepted."""
    from zoo.cli.coord_check import main
    from zoo.diagnostics import coord

    with pytest.raises(SystemExit) as code:
        main(["--widths", "32,64", "--steps", "1", "--param-opt", "zero_init=true", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code.value.code == 2 and len(err) == 1 and "needs at least 2 steps" in err[0], err
    assert not (tmp_path / "out").exists()
    coord.check_steps(P.get("mup"), 1)
    coord.check_steps(P.get("mup", zero_init=True), 2)


def test_a_depth_sweep_of_a_plugin_without_a_depth_law_is_refused(tmp_path, capsys):
    """`python -m zoo.coord_check --param critical --depths 4,8,16` judged critical init by Depth-muP's laws at
    alpha = gamma = 0: 'FAIL (depth): unstable by theory: alpha = 0 < 1/2: the residual stream grows without bound'
    and +1 expected for every layer, where critical's mu = 0 default has no residual stream and its measured slopes
    were +0.2 to +0.5. A plugin without a depth law (critical) is refused in one line before anything runs; its
    width sweep, and depth_mup's depth sweep, are accepted."""
    from zoo.cli.coord_check import main

    with pytest.raises(SystemExit) as code:
        main(["--param", "critical", "--depths", "4,8", "--width", "32", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code.value.code == 2 and len(err) == 1 and "critical has none" in err[0], err
    assert not (tmp_path / "out").exists()
    verdict.check_depths([4, 8], P.get("depth_mup"))
    with pytest.raises(ValueError, match="critical has none"):
        verdict.check_depths([4, 8], P.get("critical"))


def test_the_coordinate_check_record_is_strict_json(tmp_path):
    """coord_check_width.json held Python's NaN token wherever a group is frozen (its expected slope) or the training
    diverged (the changes, slopes and growth fits): no JSON, which JavaScript and other strict parsers refuse. It is
    written as criticality.json is: non-finite numbers as the strings 'nan' and 'inf'."""
    from zoo.diagnostics.coord_sweep import CoordSpec, write
    from zoo.diagnostics.verdict import Expectation, LayerVerdict

    data = {"pre/0": np.array([[np.nan, np.inf], [1.0, 2.0]])}
    result = {"axis": "width", "sizes": [32, 64], "data": data, "branch": {}, "lr": 1e-3, "linear_change": np.inf,
              "expected": Expectation({"hidden": 0.0, "input": np.nan}, {}, []), "branch_verdicts": [],
              "verdicts": [LayerVerdict("pre/0", "hidden", [np.nan, 0.1], 0.0, False, False)], "growth": [],
              "config": {"in_shape": (16,)}}
    write(CoordSpec(), result, tmp_path)
    record = json.loads((tmp_path / "coord_check_width.json").read_text(), parse_constant=pytest.fail)
    assert record["expected"]["input"] == "nan" and record["linear_change"] == "inf", record
    assert record["layers"]["pre/0"]["rms_change"] == [["nan", "inf"], [1.0, 2.0]], record["layers"]
