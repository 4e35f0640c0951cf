"""The coordinate check's verdict and hints (zoo.diagnostics.verdict, coord_sweep): a diverged check says so and
why, and each hint (a random readout's n^-1/2 transient, a prediction set by several kinds' laws, a stream that
starts from small embeddings) appears exactly where it explains the slopes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zoo.diagnostics import coord_sweep, verdict
from zoo.diagnostics.coord_sweep import CoordSpec, mixed_parts_hint, stream_start_hint
from zoo.diagnostics.verdict import LayerVerdict


def test_a_diverged_coordinate_check_says_so_not_one_seed():
    """`python -m zoo.coord_check --param sp --lr 1e6`: every change is NaN, so no layer has a slope. The measured
    growth said 'slope +nan, significance unknown (one seed at two sizes)', at any number of seeds and sizes; now
    'no slope, its changes are not finite (the training diverged)'. A group with one finite layer still reports it."""
    sizes = [32, 64, 128]
    nan = {"pre/0": np.full((3, 2), np.nan), "pre/1": np.full((3, 2), np.inf)}
    growth = verdict.measured_growth(sizes, [nan] * 3, {"hidden": 1.0})
    assert verdict.growth_summary(growth) == "hidden: no slope, its changes are not finite (the training diverged)"
    rng = np.random.default_rng(0)
    mixed = [{**nan, "pre/2": np.exp(np.log(n) + 0.01 * rng.normal(size=(3, 2)))} for n in sizes]
    summary = verdict.growth_summary(verdict.measured_growth(sizes, mixed, {"hidden": 1.0}))
    assert summary.startswith("hidden grows in 1 of 3 layers (p < 0.01; pre/2 +1.0"), summary


def test_a_diverged_coordinate_check_prints_why_its_slopes_are_missing():
    """The table of a diverged check showed nan RMS and FAIL in every row with no line saying why (a stable plugin,
    muP at --lr 1e4, read like a failed law). The hint names the layers, the sizes and the lr."""
    from zoo.diagnostics.coord_sweep import CoordSpec, diverged_hint

    data = {"embed": np.ones((3, 2)), "pre/0": np.array([[1.0, 1.0], [1.0, np.nan], [np.inf, np.nan]])}
    result = {"data": data, "sizes": [96, 192, 384], "axis": "width", "lr": 1e4}
    assert diverged_hint(CoordSpec(), result) == (
        "the training diverged at lr 1e+04: the changes of 1 of 2 layers are not finite at width 192, 384, so they "
        "have no slope; give a smaller --lr")
    assert diverged_hint(CoordSpec(), {**result, "data": {"embed": data["embed"]}}) is None


@pytest.mark.parametrize("zero_init, hinted", [("false", True), ("0", True), ("true", False)])
def test_the_readout_hint_reads_zero_init_as_the_plugin_does(zero_init, hinted):
    """--param-opt zero_init=false reaches the spec as the string 'false', which is truthy: the hint on a random
    readout's n^-1/2 term (only the output failing, slope -0.3 against 0) was left out exactly when the readout was
    random. It now asks the plugin's expectation, whose plugin reads 'false' and '0' as False."""
    import zoo.models
    import zoo.param
    from zoo.diagnostics.coord_sweep import CoordSpec, readout_hint
    from zoo.diagnostics.verdict import LayerVerdict

    cfg = zoo.models.config("mlp_resnet", width=16, depth=1)
    exp = verdict.expected("mlp_resnet", cfg, zoo.param.get("mup", zero_init=zero_init), "adam")
    result = {"axis": "width", "expected": exp, "branch_verdicts": [],
              "verdicts": [LayerVerdict("output", "output", [-0.3, -0.3], 0.0, False, False),
                           LayerVerdict("pre/0", "hidden", [0.02, 0.01], 0.0, True, True)]}
    hint = readout_hint(CoordSpec(param_opt={"zero_init": zero_init}), result)
    assert (hint is not None and hint.startswith("hint: only shrinking output changes fail")) == hinted, hint


def _result(unstable: list[str], expected_output: float, slopes: dict[str, float]) -> dict:
    """A width sweep's result as coord_sweep gives it: one verdict per layer at tolerance 0.15."""
    expected = {"output": expected_output, "hidden": 0.0, "stream": 0.0}
    verdicts = [verdict.LayerVerdict(layer, verdict.group_of(layer), [s] * 3, expected[verdict.group_of(layer)],
                                     abs(s - expected[verdict.group_of(layer)]) <= 0.15, False)
                for layer, s in slopes.items()]
    return {"axis": "width", "verdicts": verdicts, "branch_verdicts": [],
            "expected": verdict.Expectation(expected, {}, unstable)}


@pytest.mark.parametrize("unstable, expected_output, slopes, hinted", [
    ([], 0.0, {"output": -0.3, "pre/0": -0.05}, True),  # muP under SGD at widths 40..320: the n^-1/2 transient
    (["the output change grows like width^+1.00"], 1.0, {"output": -0.11, "pre/0": -0.2}, False),  # critical + muon
    ([], 0.0, {"output": -0.3, "pre/0": -0.4}, False),  # the hidden layers fail too: not "only" the output
])
def test_the_readout_hint_only_where_only_the_output_shrinks(unstable, expected_output, slopes, hinted):
    """`coord_check --param critical --optimizer muon --widths 48,96 --seeds 1` (unstable: output expected +1.00,
    measured -0.11, hidden and stream layers failing too) printed 'hint: only shrinking output changes fail ... tilts
    the slope below 0', on a run where the output was not the only failure and its prediction was growth."""
    hint = coord_sweep.readout_hint(coord_sweep.CoordSpec(param="mup"), _result(unstable, expected_output, slopes))
    assert (hint is not None) == hinted


@pytest.mark.parametrize("local, hidden, hinted", [
    ((-0.24, -0.09), 0.02, True),   # mlp_resnet / mup at widths 48, 96, 160: the readout part alone, its gap closing
    ((-0.30, -0.30), 0.02, False),  # a rule off by n^-0.3 keeps its gap: nothing of a lower order
    ((-0.24, -0.09), -0.70, False),  # a hidden layer more than 1/2 below
    ((0.24, 0.09), 0.02, False),    # above the prediction: no lower-order term does that
])
def test_the_lower_order_hint_only_where_every_failing_row_closes_in_by_less_than_a_half(local, hidden, hinted):
    """`coord_check --model mlp_resnet --param mup --widths 48,96,160 --depth 2` failed a correct muP (the readout's
    part alone at -0.18 against 0, local slopes -0.24 then -0.09: Adam's readout update dV . h sums a batch's
    incoherent terms, ~ n^1/2, beside the coherent ~ n) with nothing said. A stable plugin whose every failing row
    falls short by less than 1/2, less between the larger widths, gets the hint naming 4x the widths; a steady gap
    (a hidden LR off by m^-0.3), a row past 1/2 or above its prediction gets none."""
    sizes = [48, 96, 160]
    logs = np.log(sizes)
    path = np.exp(np.r_[0.0, np.cumsum(np.asarray(local) * np.diff(logs))])  # [size] with those local slopes
    fitted = float(np.polyfit(logs, np.log(path), 1)[0])
    changes = np.repeat(1e-3 * path[:, None], 3, axis=1)
    base = _result([], 0.0, {"output": 0.01, "pre/0": hidden})
    part = [verdict.LayerVerdict("output", "output", [fitted] * 3, 0.0, abs(fitted) <= 0.15, False)]
    data = {"output": np.full((3, 3), 1e-2), "pre/0": np.exp(hidden * logs)[:, None].repeat(3, 1)}
    result = {**base, "sizes": sizes, "data": data, "parts": {"output": {"output": changes}},
              "part_verdicts": {"output": part}, "config": {"base_width": 48}}
    hint = coord_sweep.lower_order_hint(coord_sweep.CoordSpec(param="mup"), result)
    assert (hint is not None and "--widths 192,384,640" in hint) == hinted, hint


@pytest.mark.parametrize("local, hinted", [((-0.21, -0.17, -0.11), True), ((-0.2, -0.2, -0.2), False)])
def test_the_lower_order_hint_in_depth(local, hinted):
    """`coord_check --param completep --optimizer adam --depths 4,8,16,32 --width 64` failed a correct CompleteP
    (its first branches at -0.16 against 0; local slopes -0.21, -0.17, -0.11, passing at depths 16..128) with no
    hint, where the width check names the same closing gap: a finite-depth correction gets the hint naming 4x the
    depths; a steady gap (a depth rule off by a power of L) none."""
    sizes = [4, 8, 16, 32]
    logs = np.log(sizes)
    path = np.exp(np.r_[0.0, np.cumsum(np.asarray(local) * np.diff(logs))])
    fitted = float(np.polyfit(logs, np.log(path), 1)[0])
    branch = [verdict.LayerVerdict("block/0", "stream", [fitted] * 3, 0.0, False, False)]
    result = {**_result([], 0.0, {"pre/0": 0.01}), "axis": "depth", "sizes": sizes, "branch_verdicts": branch,
              "data": {"pre/0": np.full((4, 3), 1e-2)}, "branch": {"block/0": np.repeat(path[:, None], 3, axis=1)}}
    hint = coord_sweep.lower_order_hint(coord_sweep.CoordSpec(param="completep"), result)
    assert (hint is not None and "--depths 16,32,64,128" in hint) == hinted, hint


def mixer_result(slopes: dict[str, float], unstable: tuple[str, ...] = ()) -> dict:
    """A width check's result whose layers measured `slopes` (each layer failing or passing against 0)."""
    verdicts = [verdict.LayerVerdict(k, verdict.group_of(k), [s] * 3, 0.0, abs(s) <= 0.15, abs(s) <= 0.15)
                for k, s in slopes.items()]
    return {"axis": "width", "verdicts": verdicts, "config": {"base_width": 64},
            "expected": verdict.Expectation({}, {}, list(unstable))}


MEASURED = {"pre/0": -0.35, "pre/3": -0.50, "blocks/7": -0.49, "output": -0.04}  # mixer / ntk, widths 64..256


def test_mixer_under_ntk_says_which_parts_set_the_prediction():
    """Mixer under NTK failed its width check with the hidden and stream slopes at -0.35..-0.50 against a predicted
    0, with nothing said: the prediction is the token mixing's (scalar kind, r = 0, not shrinking) while the channel
    weights' part shrinks like n^-1/2 and is the larger at CPU widths. The FAIL now says so and names the check
    that isolates it, --param-opt freeze=scalar (which passes: -0.49..-0.52 against -0.50)."""
    hint = mixed_parts_hint(CoordSpec("mixer", "ntk"), mixer_result(MEASURED))
    assert hint is not None and "the scalar-kind parameters' like n^+0.00" in hint and "like n^-0.50" in hint
    assert "slopes (-0.50..-0.35)" in hint and "--param-opt freeze=scalar (predicted -0.50)" in hint
    s_half = mixed_parts_hint(CoordSpec("mixer", "ntk_mup", {"s": 0.5, "freeze": "input"}),
                              mixer_result({"pre/1": -0.27}))
    assert s_half is not None and "freeze=input,scalar (predicted -0.25)" in s_half


@pytest.mark.parametrize("spec, slopes, unstable", [
    (CoordSpec("mixer", "ntk"), {"pre/0": 0.3}, ()),  # above the prediction: not a mixture's tilt
    (CoordSpec("mixer", "ntk"), {"pre/0": -0.9}, ()),  # below every part's law
    (CoordSpec("mixer", "ntk"), {"pre/0": -0.05, "output": -0.4}, ()),  # hidden passes
    (CoordSpec("mixer", "sp"), {"pre/0": 0.5}, ("the hidden change grows",)),  # unstable: theory decides
    (CoordSpec("mlp_resnet", "ntk"), {"pre/0": -0.2}, ()),  # one law: every kind's r is 1/2
])
def test_no_mixture_hint_where_the_parts_do_not_explain_it(spec, slopes, unstable):
    assert mixed_parts_hint(spec, mixer_result(slopes, unstable)) is None


@pytest.mark.parametrize("param,threshold", [("depth_mup", "2500"), ("completep", "50"), ("sp", None)])
def test_stream_start_hint_names_the_plugins_depth_threshold(param, threshold):
    """From embeddings of std s the first block's input is mostly branches, a L^-alpha each, until s > a L^-alpha:
    L >~ (a/s)^(1/alpha), 2500 for Depth-muP (alpha 1/2, s 0.02) but 50 for CompleteP (alpha 1), which the hint
    called 2500 with a 'branch multiplier L^-1/2'; a plugin with no depth scaling (sp, alpha 0) gets no hint."""
    growing = LayerVerdict("blocks@0.25", "stream", [0.3, 0.3, 0.3], 0.0, False, False)
    result = {"axis": "depth", "config": {"embed_std": 0.02}, "verdicts": [growing], "branch_verdicts": []}
    hint = stream_start_hint(CoordSpec(model="gpt", param=param), result)
    if threshold is None:
        assert hint is None
    else:
        alpha = {"depth_mup": "0.5", "completep": "1"}[param]
        assert f"L >~ {threshold};" in hint and f"L^-{alpha} cancels" in hint, hint


def test_a_first_step_at_float32_rounding_counts_as_still():
    """Under a zero readout nothing below it moves at t = 1: 0 in exact arithmetic, and float32's h_1 - h_0 gave 0
    at widths 40 and 80 but 1.8e-7 at 160 (`--param mup --param-opt zero_init=true --widths 40,80,160`). The step was
    judged, its slope log 0 = NaN, and correct muP FAILED; it is skipped now. A step that moves is still judged."""
    sizes = [40, 80, 160]
    rounding = {"pre/0": np.array([[0.0, 0.0194], [0.0, 0.0185], [1.8e-7, 0.0172]])}
    (v,) = verdict.judge(coord_sweep.coord.slopes(sizes, rounding), rounding, {"hidden": 0.0})
    assert v.passed and np.isnan(v.slopes[0]) and abs(v.slopes[1]) < 0.15
    moving = {"pre/0": np.array([[0.0, 0.0194], [0.0, 0.0185], [1e-3, 0.0172]])}
    (v,) = verdict.judge(coord_sweep.coord.slopes(sizes, moving), moving, {"hidden": 0.0})
    assert not v.passed


def test_rounding_is_read_against_the_activation_not_only_the_later_steps():
    """`--param mup --param-opt zero_init=true --widths 48,96,160 --depth 2`: the hidden layers alone moved 0, 6.4e-7
    and 6.4e-7 at t = 1 (float32's rounding of O(1) activations), 1.3e-3 of their later change of 5e-4, so the step
    counted as moved, its slope NaN, and the row FAILED. Against the layer's RMS at init (1.0) it is still (at most
    64 float32 epsilons); a change of 1e-4 of that RMS still moves."""
    sizes = [48, 96, 160]
    init = {"pre/0": np.array([1.0, 1.0, 1.0])}
    rounding = {"pre/0": np.array([[0.0, 5.8e-4], [6.4e-7, 5.5e-4], [6.4e-7, 5.2e-4]])}
    (v,) = verdict.judge(coord_sweep.coord.slopes(sizes, rounding), rounding, {"hidden": 0.0})
    assert not v.passed  # without the activations' scale: the old FAIL
    (v,) = verdict.judge(coord_sweep.coord.slopes(sizes, rounding), rounding, {"hidden": 0.0}, init=init)
    assert v.passed and np.isnan(v.slopes[0])
    moving = {"pre/0": np.array([[0.0, 5.8e-4], [1e-4, 5.5e-4], [1e-4, 5.2e-4]])}
    (v,) = verdict.judge(coord_sweep.coord.slopes(sizes, moving), moving, {"hidden": 0.0}, init=init)
    assert not v.passed


def test_an_sgd_scalar_is_judged_at_its_first_step_by_the_clt_sum():
    """A scalar kind's SGD gradient sums the backprop times the features over the width. At init the features are
    independent of the readout, a CLT sum, n^-1/2 under muP; later the part of the features aligned with the readout
    sums coherently, n^0 (zoo.param.predict.feature_exponents). So t = 1 is judged against -1/2 and later steps
    against [-1/2, 0]. Adam's sign-like step does not see the gradient's size (0 throughout), and NTK's scalar sum
    is a CLT one either way (no first-step prediction)."""
    import zoo.param

    kinds = ("input", "vector", "scalar", "hidden")
    mup = zoo.param.get("mup")
    assert mup.expected_slopes("sgd", kinds=kinds, part="scalar", at_init=True)["hidden"] == pytest.approx(-0.5)
    assert mup.expected_slopes("sgd", kinds=kinds, part="scalar")["hidden"] == pytest.approx(0.0)
    assert mup.expected_slopes("adam", kinds=kinds, part="scalar", at_init=True)["hidden"] == pytest.approx(0.0)
    ntk = zoo.param.get("ntk")
    assert ntk.expected_slopes("sgd", kinds=kinds, part="scalar", at_init=True) == \
        ntk.expected_slopes("sgd", kinds=kinds, part="scalar")
    exp = verdict.expectation(mup, "sgd", "width", kinds, 1.0)
    assert set(exp.first_parts) == {"scalar"}  # every group the scalar moves, half a power of n lower at t = 1
    assert all(first == pytest.approx(exp.parts["scalar"][g] - 0.5) or first == later == -math.inf
               for g, first in exp.first_parts["scalar"].items() for later in [exp.parts["scalar"][g]]
               if first == first)
    sizes = [128, 256, 512]
    for first_slope, later_slope, ok in [(-0.5, -0.3, True), (-0.5, 0.05, True), (0.0, 0.0, False),
                                         (-0.5, -0.8, False)]:
        data = {"pre/0": np.array([[1e-3 * (n / 128) ** first_slope, 2e-3 * (n / 128) ** later_slope]
                                   for n in sizes])}
        (v,) = verdict.judge(coord_sweep.coord.slopes(sizes, data), data, exp.parts["scalar"],
                             first=exp.first_parts["scalar"])
        assert v.passed == ok, (first_slope, later_slope)
        assert v.first == -0.5


@pytest.mark.parametrize("tied, hidden", [(True, -0.5), (False, -1.0)])
def test_zero_init_leaves_a_tied_readout_random_in_the_predictions(tied, hidden):
    """zero_init zeroes output-kind weights; the GPT's default readout is its token embedding (input kind), which it
    leaves random. The predictions assumed a zero readout all the same: NTK under SGD on the tied GPT, hidden n^-1
    predicted where a check measures n^-1/2 (widths 64..256, 2 seeds: pre/0 -0.50, embed -0.46, blocks/0 -0.55); the
    untied GPT's readout does start at 0, and its backprop with it (n^-1)."""
    import zoo.models
    import zoo.param

    cfg = zoo.models.config("gpt", width=64, depth=1, tie_embeddings=tied)
    exp = verdict.expected("gpt", cfg, zoo.param.get("ntk", zero_init=True), "sgd")
    assert exp.zero_readout is not tied and exp.total["hidden"] == pytest.approx(hidden)


@pytest.mark.parametrize("slopes,first,said", [
    ([0.7, 1.4, 2.9], None, "not as predicted"),  # muP in depth: a geometric stream's slopes rise past L^1
    ([1.4, 2.2, 2.9], None, "faster than predicted"),
    ([0.2, 0.5, float("nan")], None, "slower than predicted"),  # a step it did not move has no slope
    ([0.8, 1.3, 1.4], 0.5, "faster than predicted"),  # above its first prediction at t = 1, then above both
    ([0.3, 0.8, 0.9], 0.5, "not as predicted"),  # below its first prediction, then within the span of both
])
def test_an_unstable_plugins_row_says_how_its_slopes_miss_the_prediction(slopes, first, said):
    """Every row of muP's depth check read 'not as predicted' against L^1, whether it grew faster or slower."""
    v = verdict.judge({"blocks/0": np.array(slopes)}, {"blocks/0": np.ones((2, 1, 3))}, {"stream": 1.0},
                      stable=False, first=None if first is None else {"stream": first})[0]
    assert not v.passed and v.against_prediction() == said
    assert LayerVerdict("x", "hidden", [1.05], 1.0, True, False).against_prediction() == "as predicted"
