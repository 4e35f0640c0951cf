"""A sweep's (and a transfer's) --out has one owner, and its results file survives a torn write: a second sweep
into a held dir is refused in one line, a dead owner's lock is taken over, a torn last line of results.jsonl is
cut (its member trains again) instead of having the next record glued onto it; grids and sizes that cannot run are
refused before anything trains."""

import dataclasses
import json
import math

import pytest

from zoo import sweep
from zoo.config import RunConfig, resolve
from zoo.errors import RunLocked
from zoo.sweeps import results
from zoo.sweeps.grid import parse_lrs
from zoo.sweeps.runner import SweepSpec, run_sweep
from zoo.sweeps.transfer import TransferSpec, run_transfer
from zoo.train import memory
from zoo.train.lock import RunLock

RUN = RunConfig.from_flat(dict(model="mlp_resnet", param="mup", data="synthetic", steps=4, batch_size=16))
LRS = [2.0**-9, 2.0**-7]
ARGV = ["--model", "mlp_resnet", "--param", "mup", "--data", "synthetic", "--widths", "16", "--depths", "2",
        "--steps", "4", "--batch-size", "16", "--lrs", "2^-9,2^-7"]


def records_on_disk(out):
    return [json.loads(line) for line in (out / results.RESULTS).read_text().splitlines()]


def test_torn_last_line_is_cut_and_its_member_retrained_and_a_dead_owner_taken_over(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    (out / ".lock").write_text(json.dumps({"pid": 999999999, "host": "gone"}))  # left by a SIGKILLed sweep
    spec = SweepSpec(run=RUN, lrs=LRS[:1], out=out, widths=[16], depths=[2], chunk=4)
    said = []
    run_sweep(spec, said.append)
    assert any("took over the lock" in s and "999999999" in s for s in said), said
    line = (out / results.RESULTS).read_text()
    (out / results.RESULTS).write_text(line[:len(line) // 2])  # the write was cut short
    said.clear()
    again = run_sweep(spec, said.append)  # the same program again (JAX's compile cache)
    assert any("torn last line" in s for s in said) and any("1 members" in s for s in said), said
    assert [r["lr"] for r in again] == LRS[:1]
    assert [r["lr"] for r in records_on_disk(out)] == LRS[:1]  # a whole record, on a line of its own
    assert not (out / ".lock").read_text()  # released: a clean exit leaves no owner behind


def test_a_second_sweep_into_a_held_out_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "s"
    out.mkdir()
    with RunLock(out, what="sweep", flag="--out"):  # another live sweep (flock: a second open file is refused)
        with pytest.raises(SystemExit) as e:
            sweep.main([*ARGV, "--out", str(out)])
    assert e.value.code == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "is in use by another sweep" in err[0] and "--out" in err[0], err
    assert not (out / results.RESULTS).exists()


def test_a_transfer_into_a_held_out_is_refused_before_training(tmp_path):
    spec = TransferSpec(run=RUN, lrs=LRS, proxy=(16, 2), target=(32, 2), out=tmp_path)
    with RunLock(tmp_path, what="sweep", flag="--out"), pytest.raises(RunLocked, match="in use by another sweep"):
        run_transfer(spec)  # refused (naming the owner's kind) once its sizes are checked, before anything trains
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]


def test_results_file_repair_and_read(tmp_path):
    """A torn last line is cut and the whole lines before it kept; a whole last record without its newline gets
    one; duplicates (two sweeps that ran at once before the lock) are read once and lines that are not records
    skipped; a garbage lock file is taken over silently."""
    rec = {"width": 16, "depth": 2, "lr": 0.5, "seed": 0, "train_loss": 1.0}
    other = {**rec, "lr": 0.25}
    path = tmp_path / results.RESULTS
    path.write_text(json.dumps(rec) + "\n" + json.dumps(other)[:20])
    said = []
    results.repair(tmp_path, said.append)
    assert path.read_text() == json.dumps(rec) + "\n" and "torn last line" in said[0]
    path.write_text(json.dumps(rec) + "\n[1]\n" + json.dumps(rec) + "\nnot json\n" + json.dumps(other))
    results.repair(tmp_path, pytest.fail)  # nothing is cut
    assert path.read_text().endswith("}\n")
    assert results.read(tmp_path) == [rec, other]
    (tmp_path / ".lock").write_bytes(b"\xff\xfe")
    RunLock(tmp_path, pytest.fail).release()


def test_a_sweep_without_results_takes_new_settings_and_one_that_cannot_fit_is_refused(tmp_path, monkeypatch):
    """A sweep refused or stopped before its first record (here: its init program needs more memory than the machine
    has free) leaves sweep.json, which the corrected command replaces, saying so; once a record exists other settings
    are refused."""
    monkeypatch.setattr(memory, "free_memory", lambda: 1000)
    # the sweep that runs is the torn-line test's (one member, 4 steps): its programs come from the compile cache
    spec = SweepSpec(run=RUN.replace(steps=3), lrs=LRS[:1], out=tmp_path, widths=[16], depths=[2])
    with pytest.raises(ValueError, match="the compiled sweep's init program needs .* sweep fewer --lrs"):
        run_sweep(spec, echo=pytest.fail)
    monkeypatch.undo()
    said = []
    run_sweep(dataclasses.replace(spec, run=RUN), echo=said.append)
    assert "has no results yet: starting it with these settings (steps changed)" in said[0]
    assert len(results.read(tmp_path)) == 1
    with pytest.raises(ValueError, match="holds a sweep with other settings"):
        run_sweep(spec, echo=said.append)


def test_transfer_refuses_a_target_smaller_than_the_proxy_in_any_axis(tmp_path):
    def spec(proxy, target):
        return TransferSpec(run=RUN, lrs=LRS, proxy=proxy, target=target, out=tmp_path)

    with pytest.raises(ValueError, match="smaller than the proxy .* in width;"):
        spec((64, 2), (32, 2))
    with pytest.raises(ValueError, match="in depth;"):
        spec((32, 4), (64, 2))
    with pytest.raises(ValueError, match="in width and depth"):
        spec((64, 4), (32, 2))
    with pytest.raises(ValueError, match="is the target"):
        spec((32, 2), (32, 2))
    with pytest.raises(ValueError, match="proxy width must be a positive integer"):
        spec((0, 2), (32, 2))
    assert spec((32, 2), (32, 4)).target == (32, 4)


def test_transfer_cli_refuses_a_smaller_target_in_one_line(tmp_path, capsys):
    from zoo import transfer

    with pytest.raises(SystemExit) as e:
        transfer.main(["--out", str(tmp_path / "t"), "--model", "mlp_resnet", "--data", "synthetic", "--lrs", "1e-3",
                       "--width", "32", "--proxy-width", "64", "--depth", "2"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert e.value.code == 1 and len(err) == 1 and "smaller than the proxy" in err[0], err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("text", ["2^1e9", "1e-320", "nan", "2^-12:2^-4:1e-6", "2^-4:2^-2:inf", "2^-1000:2^-2:1"])
def test_lr_grids_that_cannot_run_are_refused(text):
    with pytest.raises(ValueError, match="learning rates"):
        parse_lrs(text)


@pytest.mark.parametrize("bad", [dict(lrs=[math.nan]), dict(lrs=[1e-3, math.inf]), dict(lrs=[]), dict(widths=[0]),
                                 dict(seeds=0), dict(chunk=-1), dict(depths=[True])])
def test_sweep_spec_refuses_what_cannot_run(tmp_path, bad):
    with pytest.raises(ValueError):
        SweepSpec(**{"run": RUN, "lrs": LRS, "out": tmp_path, **bad})


def test_a_sweep_refused_for_its_base_width_says_the_values_and_the_default(tmp_path):
    """A sweep of widths 16, 32 rerun with widths 32, 64 (to extend it) was refused as 'other settings (base_width)':
    the base width defaults to the smallest width swept, which the command never named. Now the line gives both
    values and the flag that keeps the base."""
    import json

    from zoo.sweeps import results

    settings = sweep_settings(param="mup", base_width=16, steps=6)
    results.check_settings(tmp_path, settings)
    results.append(tmp_path, [{"width": 16, "depth": 2, "lr": 0.5, "seed": 0}])
    with pytest.raises(ValueError) as e:
        results.check_settings(tmp_path, {**settings, "base_width": 32})
    assert "other settings (base_width 16 there, 32 here) (the base width and depth default to the smallest swept: " \
           "give --base-width/--base-depth)" in str(e.value)
    with pytest.raises(ValueError, match='other settings \\(param "mup" there, "sp" here, steps 6 there, 7 here\\);'):
        results.check_settings(tmp_path, {**settings, "param": "sp", "steps": 7})
    assert json.loads((tmp_path / results.SETTINGS).read_text()) == settings


def sweep_settings(**given) -> dict:
    """A sweep.json's settings as a sweep writes them: every identity setting but the members' own."""
    identity = json.loads(json.dumps(RunConfig().identity()))
    return {**{k: v for k, v in identity.items() if k not in results.PER_MEMBER}, **given}


def test_results_without_their_settings_file_are_refused_not_taken_as_this_sweeps(tmp_path):
    """DIR/results.jsonl whose sweep.json was removed: the sweep wrote a new sweep.json, skipped those members as
    finished and reported a 5-step sweep's losses under a 7-step title. Now one line, and nothing written."""
    (tmp_path / results.RESULTS).write_text(json.dumps({"width": 8, "depth": 1, "lr": 0.01, "seed": 0, "steps": 5})
                                            + "\n")
    with pytest.raises(ValueError, match=r"holds 1 member results \(results.jsonl\) but no sweep.json: the settings "
                                         "that trained them are unknown"):
        results.check_settings(tmp_path, {"steps": 7}, lambda _: None)
    assert not (tmp_path / results.SETTINGS).exists()
    results.check_settings(tmp_path / "new", {"steps": 7}, lambda _: None)  # an empty DIR starts a sweep
    assert json.loads((tmp_path / "new" / results.SETTINGS).read_text()) == {"steps": 7}


def test_a_base_size_given_is_not_said_to_default_when_a_rerun_is_refused_for_it(tmp_path):
    """A transfer's sweeps take the proxy's size as their base (given, not defaulted): a rerun with --proxy-width 16
    into an --out of --proxy-width 8 was refused with '(the base width and depth default to the smallest swept: give
    --base-width/--base-depth)', advice that cannot apply (the flag was set: the proxy). The hint now comes only
    where the base was left to default; the refusal itself is unchanged, before anything trains."""
    settings = {"model": "mlp_resnet", "param": "mup", "data": "synthetic", "steps": 3, "batch_size": 8}

    def spec(**base):
        return SweepSpec(run=resolve({**settings, **base}), lrs=[1e-3], out=tmp_path, widths=[32], depths=[1])

    results.check_settings(tmp_path, spec(base_width=8, base_depth=1).settings(3), lambda _: None)
    results.append(tmp_path, [{"width": 32, "depth": 1, "lr": 1e-3, "seed": 0}])
    with pytest.raises(ValueError, match=r"other settings \(base_width 8 there, 16 here\); use another --out"):
        run_sweep(spec(base_width=16, base_depth=1), echo=lambda _: None)
    with pytest.raises(ValueError, match=r"\(base_width 8 there, 32 here\) \(the base width and depth default to the "
                                         r"smallest swept: give --base-width/--base-depth\)"):
        run_sweep(spec(), echo=lambda _: None)
    assert len(results.read(tmp_path)) == 1


def test_a_setting_added_since_a_sweep_is_read_as_its_default(tmp_path):
    """A sweep dir written before a setting existed (its sweep.json without decay_vectors) was refused as 'other
    settings (decay_vectors null there, false here)' by every later zoo, and zoo.fit refused to fit it with a newer
    one. The missing setting is its default, the behaviour zoo had before it, as a run dir reads it: extended (and
    fitted) at the default, refused at another value."""
    from zoo.sweeps import results

    settings = sweep_settings(param="mup", steps=6)
    before = {k: v for k, v in settings.items() if k != "decay_vectors"}
    (tmp_path / results.SETTINGS).write_text(json.dumps(before))
    results.append(tmp_path, [{"width": 16, "depth": 2, "lr": 0.5, "seed": 0}])
    results.check_settings(tmp_path, settings)
    assert results.read_settings(tmp_path) == settings  # as zoo.fit reads it
    with pytest.raises(ValueError, match="other settings \\(decay_vectors false there, true here\\)"):
        results.check_settings(tmp_path, {**settings, "decay_vectors": True})


@pytest.mark.parametrize("optimizer, unset_is", [("adam", 0.0), ("adamw", 0.1)])
def test_a_weight_decay_given_at_the_value_an_unset_one_takes_is_the_same_sweep(tmp_path, optimizer, unset_is):
    """A sweep of Adam that left --weight-decay unset (null in sweep.json) was refused when rerun with --weight-decay
    0, the value it trained with ('weight_decay null there, 0.0 here'), while --b2 0.999 was taken; the unset value is
    the optimizer's (0 for adam, 0.1 for adamw): the same sweep, and another value is still refused."""
    from zoo.sweeps import results

    settings = sweep_settings(optimizer=optimizer, weight_decay=None, steps=6)
    (tmp_path / results.SETTINGS).write_text(json.dumps(settings))
    results.append(tmp_path, [{"width": 16, "depth": 2, "lr": 0.5, "seed": 0}])
    results.check_settings(tmp_path, {**settings, "weight_decay": unset_is})
    with pytest.raises(ValueError, match="other settings \\(weight_decay null there, 0.05 here\\)"):
        results.check_settings(tmp_path, {**settings, "weight_decay": 0.05})


def test_a_report_of_results_that_are_all_unreadable_says_they_were_skipped(tmp_path):
    """It said only "no results to report", of a results.jsonl whose every line was skipped."""
    from zoo.sweeps import report

    (tmp_path / results.SETTINGS).write_text(json.dumps(sweep_settings()))
    (tmp_path / results.RESULTS).write_text('{"width": 8, "lr": 0}\nnot json\n')
    with pytest.raises(ValueError, match=f"^no results to report: 2 line\\(s\\) of {tmp_path / results.RESULTS} "
                                         "were skipped"):
        report.write(tmp_path, "train_loss")
