"""Sweep grids and reports: LR grid parsing (log2 ranges, one member per LR), the sweep's summary (best LR per size,
the transfer score in grid steps, diverged points kept and marked, members missing and records it cannot read).
The transfer's report: test_transfer_report.py."""

import dataclasses
import json
import math
import re

import numpy as np
import pytest

from zoo.cli import sweep
from zoo.config import RunConfig
from zoo.sweeps import report
from zoo.sweeps.grid import members, parse_ints, parse_lrs
from zoo.sweeps.runner import SweepSpec, run_sweep
from zoo.sweeps.runner import summarize as summarize_losses
from zoo.sweeps.transfer import Arm, TransferSpec


def test_parse_lrs_range_and_list():
    assert parse_lrs("2^-12:2^-4:1") == [2.0**k for k in range(-12, -3)]
    assert parse_lrs("2^-6:2^-4:0.5") == pytest.approx([2.0**-6, 2.0**-5.5, 2.0**-5, 2.0**-4.5, 2.0**-4])
    assert parse_lrs("-6:-4:1") == [2.0**-6, 2.0**-5, 2.0**-4]
    assert parse_lrs("3e-3, 1e-3,2^-8") == [1e-3, 3e-3, 2.0**-8]
    assert parse_lrs("1e-3,1.00000001e-3,3e-3") == [1e-3, 3e-3]  # one float32: one member, not two alike
    for bad in ("", "a,b", "2^-4:2^-8:1", "2^-8:2^-4:0", "1:2", "-1e-3", "2^-4:2^-2:-1"):
        with pytest.raises(ValueError):
            parse_lrs(bad)


def test_parse_ints_and_members():
    assert parse_ints("128,64,64", "--widths") == [64, 128]
    with pytest.raises(ValueError, match="--depths"):
        parse_ints("4,x", "--depths")
    lr, seed = members([0.1, 0.2], 3)
    assert lr.tolist() == [0.1] * 3 + [0.2] * 3 and seed.tolist() == [0, 1, 2] * 2


def test_divergence_rule():
    chance = math.log(10)
    assert summarize_losses(np.array([2.3, 1.0, 0.5, 0.4] * 5), chance) == (pytest.approx(0.45), False)
    assert summarize_losses(np.array([2.3, 1.0, np.nan, np.nan]), chance)[1]
    assert summarize_losses(np.array([2.5, 3.0, 4.0, 5.0]), chance)[1]  # ends well above start and chance
    assert not summarize_losses(np.array([2.5, 2.5, 2.6, 2.6]), chance)[1]  # did not learn (warmup): not diverged
    assert not summarize_losses(np.array([9.0, 3.0, 3.5, 3.0]), chance)[1]  # SP-like large start, improved
    assert summarize_losses(np.array([900.0, 500.0, 400.0, 400.0]), chance)[1]  # exploded forward pass


def records(best_by_depth, diverge_from):
    """Parabolas in log2 LR with minima at best_by_depth[d]; LRs at or above diverge_from[d] diverged."""
    out = []
    for depth, best in best_by_depth.items():
        for k in range(-10, -2):
            for seed in (0, 1):
                div = k >= diverge_from[depth]
                loss = None if div and seed else 0.5 + 0.05 * (k - best) ** 2 + 0.01 * seed + 0.001 * depth
                out.append({"width": 64, "depth": depth, "lr": 2.0**k, "log2_lr": float(k), "seed": seed,
                            "train_loss": loss, "eval_loss": loss, "eval_accuracy": 0.5, "diverged": div})
    return out


def test_summary_best_lrs_and_transfer_score(tmp_path):
    s = report.summarize(records({4: -5, 16: -6, 64: -8}, {4: -3, 16: -3, 64: -4}))
    assert s.axis == "depth" and s.grid_step == 1.0
    assert report.best_log2_lrs(s) == {(64, 4): -5.0, (64, 16): -6.0, (64, 64): -8.0}
    assert s.transfer_score == 3.0
    deep = s.curves[2]
    assert deep.diverged.tolist() == [False] * 6 + [True] * 2 and np.isnan(deep.loss[-2:]).all()
    assert deep.best_loss == pytest.approx(0.5 + 0.005 + 0.064)  # seeds averaged
    png = report.plot(s, tmp_path / "p.png", "title")
    assert png.stat().st_size > 10_000
    t = report.table(s, "t")
    assert t.row_count == 3 and "3 grid steps" in str(t.caption)


def test_all_diverged_size_is_kept_but_not_scored():
    s = report.summarize(records({4: -5, 16: -6, 64: -8}, {4: -3, 16: -3, 64: -20}))
    assert s.curves[2].best is None and s.curves[2].diverged.all()
    assert s.transfer_score == 1.0
    assert report.table(s).row_count == 3


def test_width_axis_edge_and_metric_errors():
    recs = [dict(r, width=r["depth"] * 16, depth=8) for r in records({4: -10, 16: -9}, {4: 0, 16: 0})]
    s = report.summarize(recs, "eval_loss")
    assert s.axis == "width" and s.curves[0].at_edge and not s.curves[1].at_edge
    with pytest.raises(ValueError, match="metric"):
        report.summarize(recs, "accuracy")
    with pytest.raises(ValueError, match="no results"):
        report.summarize([])


GOOD = {"width": 16, "depth": 2, "lr": 0.001, "log2_lr": -9.965784, "seed": 0, "train_loss": 1.0, "eval_loss": 1.0,
        "eval_accuracy": 0.5, "diverged": False}


@pytest.mark.parametrize("text", ["1e-4:1e-2:1e-3", "0.0001:0.01:0.5", "1E-4:4:1"])
def test_a_range_written_in_learning_rates_is_refused(text):
    """A range's bare bounds are log2 exponents, so --lrs 1e-4:1e-2:1e-3 (LRs meant) swept 10 LRs from 2^0.0001 to
    2^0.009, all about 1.0 (every Adam member diverged, the report 'all diverged'). Bounds in scientific notation or
    both between 0 and 1 are now refused; exponents as the README writes them still read."""
    from zoo.sweeps.grid import parse_lrs

    with pytest.raises(ValueError, match="reads as log2 exponents .* give LRs as a comma list"):
        parse_lrs(text)
    assert parse_lrs("-12:-4:2") == [2.0**k for k in (-12, -10, -8, -6, -4)]
    assert parse_lrs("-0.5:0.5:0.5") == pytest.approx([2.0**-0.5, 1.0, 2.0**0.5])


def test_learning_rates_of_one_results_key_are_one_member():
    """--lrs 1e-3,1.0000003e-3: two float32s (both trained) of one rounded log2 LR, the key results are read back by,
    so the second member's record was dropped on reading and the report showed one point for two members."""
    from zoo.sweeps.grid import lr_key, parse_lrs

    assert lr_key(1e-3) == lr_key(1.0000003e-3)
    assert parse_lrs("1.0000003e-3,1e-3,3e-3") == [1e-3, 3e-3]
    assert parse_lrs("2^-6:2^-4:0.5") == pytest.approx([2.0**-6, 2.0**-5.5, 2.0**-5, 2.0**-4.5, 2.0**-4])


def test_a_sweep_given_an_lr_twice_trains_it_once(tmp_path):
    """SweepSpec(lrs=[2^-7, 2^-9, 2^-7]) (the library; the CLI's parse_lrs dedups): the repeated LR was a member
    trained twice (3 members, 'members': 3 in each record) and read back once. Now the spec keeps the distinct LRs,
    sorted; a TransferSpec too."""
    from zoo.config import RunConfig

    run = RunConfig.from_flat(dict(model="mlp_resnet", param="mup", data="synthetic", steps=2, batch_size=8))
    spec = SweepSpec(run=run, lrs=[2.0**-7, 2.0**-9, 2.0**-7], out=tmp_path / "s", widths=[16], depths=[2])
    assert spec.lrs == [2.0**-9, 2.0**-7]
    records = run_sweep(spec, echo=lambda _: None)
    assert [(r["lr"], r["members"]) for r in records] == [(2.0**-9, 2), (2.0**-7, 2)]
    t = TransferSpec(run=run, lrs=[1e-3, 1e-3], proxy=(16, 2), target=(32, 2), out=tmp_path, check=[2e-3, 1e-3, 2e-3])
    assert (t.lrs, t.check) == ([1e-3], [1e-3, 2e-3])


@pytest.mark.parametrize("change, field", [
    ({"width": "32"}, "width"), ({"depth": 2.5}, "depth"), ({"width": True}, "width"), ({"seed": "0"}, "seed"),
    ({"lr": True}, "lr"), ({"width": 0}, "width"), ({"diverged": None}, "diverged"), ({"diverged": "no"}, "diverged"),
    ({"log2_lr": float("nan")}, "log2_lr"), ({"train_loss": "1.0"}, "train_loss"),
    ({"log2_lr": -3.0}, "log2_lr"), ({"seed": -5}, "seed")])  # averaged into another point; a seed the CLI refuses
def test_a_record_without_what_the_report_reads_is_one_line(change, field):
    """A results.jsonl record (edited by hand, written by another program) with a width "32" beside records of width
    16 stopped --report-only with "unexpected TypeError: '<' not supported between instances of 'str' and 'int'", one
    without "diverged" with an unexpected KeyError; a depth 2.5 or a seed "0" was drawn as a size or averaged as a seed
    of its own, and other wrong types could plot nonsense. Now one line naming the field and the way out (None: the
    key left out)."""
    report.summarize([GOOD])
    bad = {k: v for k, v in {**GOOD, "seed": 1, **change}.items() if v is not None}
    with pytest.raises(ValueError, match=f"a record in results.jsonl has no valid {field} \\(written by another "
                                         "program\\?\\): .*; delete its line and rerun"):
        report.summarize([GOOD, bad])


def test_a_one_lr_sweep_has_no_transfer_score():
    """--lrs 1e-3 over widths 16 and 32: each size's best is the one LR, and the report gave 'transfer score: 0 grid
    steps', a perfect transfer that measured nothing. Now n/a, saying why; two LRs score as before."""
    from zoo.sweeps import report

    one = report.summarize([{**GOOD, "width": w} for w in (16, 32)])
    assert one.transfer_score is None
    assert report.table(one).caption == "transfer score: n/a (one LR swept: it is every size's best)"
    two = report.summarize([{**GOOD, "width": w, "lr": lr, "log2_lr": x, "train_loss": loss}
                            for w in (16, 32) for lr, x, loss in ((0.5, -1.0, 1.0), (1.0, 0.0, 2.0))])
    assert two.transfer_score == 0.0


def test_a_score_lost_to_divergence_says_so():
    """Two widths that diverged at every LR: the caption read 'transfer score: n/a (fewer than two sizes trained)',
    when both had trained; now it names the sizes that diverged (one size alone keeps its own reason)."""
    from zoo.sweeps import report

    gone = [{**GOOD, "width": w, "lr": lr, "log2_lr": x, "diverged": True}
            for w in (16, 32) for lr, x in ((0.5, -1.0), (1.0, 0.0))]
    assert report.table(report.summarize(gone)).caption == "transfer score: n/a (2 of 2 sizes diverged at every LR)"
    one = report.summarize(gone[:2])
    assert report.table(one).caption == "transfer score: n/a (one size trained)"
    kept = report.summarize([*gone, {**GOOD, "width": 64}, {**GOOD, "width": 64, "lr": 0.5, "log2_lr": -1.0}])
    assert report.table(kept).caption == "transfer score: n/a (2 of 3 sizes diverged at every LR)"


def test_the_transfer_score_of_a_third_step_grid_is_a_whole_number_of_steps():
    """--lrs 2^-9:2^-7:0.333...: the grid step came from the rounded keys (-9, -8.666667, ...: 0.333333), so a best LR
    moving from 2^-9 to 2^-8 scored 1 / 0.333333 = 3.000003 grid steps in summary.json (a closed-form check of 3
    fails). Now the score and the transfer's miss come from the members' own LRs: 3.0, and a half-step grid's 5.0."""
    from zoo.sweeps import report
    from zoo.sweeps.grid import lr_key, parse_lrs

    def grid(text, best):
        return [{**GOOD, "width": w, "lr": lr, "log2_lr": lr_key(lr), "train_loss": 1.0 + (lr_key(lr) - b) ** 2}
                for w, b in best.items() for lr in parse_lrs(text)]

    third = report.summarize(grid("2^-9:2^-7:0.3333333333333333", {64: -9.0, 128: -8.0}))
    assert [c.best_log2_lr for c in third.curves] == [-9.0, -8.0] and third.transfer_score == 3.0
    assert report.summarize(grid("2^-12:2^-6:0.5", {64: -10.0, 128: -9.0, 256: -7.5})).transfer_score == 5.0
    proxy = report.summarize(grid("2^-9:2^-7:0.3333333333333333", {64: -8.0}))
    target = report.summarize(grid("2^-10:2^-7:0.3333333333333333", {128: -9.0}))
    assert Arm("mup", {}, proxy, [-8.0], -8.0, target, [1.0], checked=True).miss == 3.0


@pytest.mark.parametrize("text, fix", [("2^-4:2^-12:1", "2^-12:2^-4:1"), ("-4:-12:0.5", "-12:-4:0.5"),
                                       ("2^-12:2^-4:-1", "2^-12:2^-4:1"), ("-12:-4:0", "-12:-4:1"),
                                       ("2^-4:2^-12:-2", "2^-12:2^-4:2")])
def test_a_range_given_downward_or_with_a_step_not_above_zero_says_so(text, fix):
    """--lrs 2^-4:2^-12:1 (LRs in decreasing order) was 'cannot read learning rates', as if it were no number; the
    line now says a range runs upward by a positive step and gives the range meant. A comma list in decreasing
    order, repeats included, is still one sorted member per LR."""
    with pytest.raises(ValueError, match=rf"must run upward by a positive log2 step .*: give {re.escape(fix)}$"):
        parse_lrs(text)
    assert parse_lrs("2^-6,2^-8,2^-6,2^-10") == [2.0**-10, 2.0**-8, 2.0**-6]


def test_a_range_whose_step_does_not_reach_its_stop_is_refused():
    """2^-14:2^-4:0.3 trained 34 LRs ending at 2^-4.1: the stop the help says is included was dropped silently. A
    step that divides the span keeps it, float rounding of a decimal step included (-1:0:0.1, 10.000000000000002)."""
    with pytest.raises(ValueError, match=r"does not reach its stop: 10 / 0.3 = 33.33 steps; give a step that divides"):
        parse_lrs("2^-14:2^-4:0.3")
    assert math.log2(parse_lrs("-1:0:0.1")[-1]) == pytest.approx(0.0) and len(parse_lrs("-1:0:0.1")) == 11
    assert len(parse_lrs("-12.5:-4:0.5")) == 18


def test_transfer_score_by_hand_and_the_sizes_it_leaves_out():
    """README: the transfer score is max - min of the best log2 LR across sizes, in grid steps. A half-step grid
    (log2 LR -10, -9.5, -9, -8: step 0.5, the smallest gap), seeds averaged, a diverged point never best: width 16's
    best is -8, width 32's -9.5 (its seeds' means 1.6 < 1.8), width 64's -10 (its -8 diverged in one seed), so the
    score is (-8 - (-10)) / 0.5 = 4. Width 128 diverged at every LR and has no best: the caption read '4 grid steps'
    as if the LR transferred across all four widths; it now names the size it leaves out."""
    losses = {16: {-10: 2.0, -9.5: 1.9, -9: 1.8, -8: 1.7}, 32: {-10: 2.0, -9.5: 1.6, -9: 1.8, -8: 1.9},
              64: {-10: 1.0, -9.5: 1.5, -9: 1.8, -8: 0.5}, 128: {-10: 0.1, -9.5: 0.1, -9: 0.1, -8: 0.1}}
    records = [{"width": w, "depth": 2, "lr": 2.0**x, "log2_lr": x, "seed": seed, "train_loss": loss + 0.1 * seed,
                "diverged": w == 128 or (w == 64 and x == -8 and seed == 1), "eval_accuracy": None}
               for w, row in losses.items() for x, loss in row.items() for seed in (0, 1)]
    summary = report.summarize(records)
    assert summary.grid_step == 0.5
    assert [c.best_log2_lr for c in summary.curves] == [-8.0, -9.5, -10.0, None]
    assert summary.curves[1].best_loss == pytest.approx(1.65)  # (1.6 + 1.7) / 2
    assert summary.transfer_score == 4.0
    assert report.table(summary).caption == ("transfer score: 4 grid steps (grid step 0.5 in log2 LR), over 3 of 4 "
                                             "sizes (width 128 diverged at every LR)")



def test_report_only_names_members_missing_and_lines_it_could_not_read(tmp_path, capsys):
    """A results.jsonl with a line cut mid-file (a copy of a torn file, an edit) and a member lost: --report-only
    averaged the LR over the seeds left and printed the table as if the grid were whole, without a word. Now a line
    names the members a size lacks against the grid the sizes trained, and one counts the unreadable lines; both
    are in summary.json."""

    from zoo.sweeps import results

    out = tmp_path / "s"
    out.mkdir()
    (out / results.SETTINGS).write_text(json.dumps({"model": "mlp_resnet", "param": "mup", "steps": 2}))
    recs = [{**GOOD, "width": w, "lr": 2.0**x, "log2_lr": float(x), "seed": s, "train_loss": 2.0 + 0.1 * x * x}
            for w in (16, 32) for x in (-2, -1, 0) for s in (0, 1)]
    lines = [json.dumps(r) for r in recs]
    lines[3] = lines[3][:30]  # width 16, log2 LR -1, seed 1: torn
    del lines[8]  # width 32, log2 LR -1, seed 0: lost
    (out / results.RESULTS).write_text("\n".join(lines) + "\n")
    sweep.main(["--out", str(out), "--report-only"])
    text = capsys.readouterr().out
    assert "warning: 2 member(s) of the grid missing (width 16 depth 2 log2 LR -1 seed 1, width 32 depth 2 " \
           "log2 LR -1 seed 0)" in text, text
    assert "warning: 1 line(s) of results.jsonl were skipped: no member record" in text, text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unreadable_lines"] == 1 and summary["missing_members"] == [
        {"width": 16, "depth": 2, "log2_lr": -1.0, "seed": 1}, {"width": 32, "depth": 2, "log2_lr": -1.0, "seed": 0}]
    (out / results.RESULTS).write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    sweep.main(["--out", str(out), "--report-only"])
    assert "warning" not in capsys.readouterr().out
    assert json.loads((out / "summary.json").read_text())["missing_members"] == []


def test_an_edited_record_is_refused_before_any_member_trains(tmp_path):
    """A results.jsonl line edited to a width "16" was refused by the report, after the rerun had trained the
    missing members and appended them; the rerun now stops first, the file as it was."""
    from zoo.sweeps.runner import SweepSpec, run_sweep

    run = RunConfig.from_flat(dict(model="mlp_resnet", param="mup", data="synthetic", steps=2, batch_size=8))
    spec = SweepSpec(run=run, lrs=[2.0**-9], out=tmp_path / "s", widths=[16], depths=[2])
    run_sweep(spec, echo=lambda _: None)
    path = tmp_path / "s" / "results.jsonl"
    edited = path.read_text().replace('"width": 16', '"width": "16"')
    path.write_text(edited)
    with pytest.raises(ValueError, match="a record in results.jsonl has no valid width"):
        run_sweep(dataclasses.replace(spec, lrs=[2.0**-9, 2.0**-7]), echo=lambda _: None)
    assert path.read_text() == edited


@pytest.mark.parametrize("spread", [0.5, 20.0])  # a linear and a log y axis
def test_sizes_diverged_at_one_lr_keep_their_own_marks(spread):
    """Two sizes diverged at the same LR drew their x marks at one height, the second over the first: the figure
    showed one size diverged. Each diverged size now has its own row of marks, inside the axes' limits."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loss = {-2: 1.0, -1: 1.0 + spread, 0: None}  # LR 2^0 diverged at every width
    summary = report.summarize([{**GOOD, "width": w, "lr": 2.0**x, "log2_lr": float(x), "train_loss": v,
                                 "diverged": v is None} for w in (16, 32, 64) for x, v in loss.items()])
    fig, ax = plt.subplots()
    report.panel(ax, summary, "")
    marks = [line.get_ydata()[0] for line in ax.get_lines() if line.get_marker() == "x"]
    plt.close(fig)
    assert len(marks) == 3 and len(set(marks)) == 3, marks
    assert all(ax.get_ylim()[0] < m < ax.get_ylim()[1] for m in marks)
