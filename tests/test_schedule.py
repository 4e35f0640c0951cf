"""LR schedules (zoo.optim): warmup (t + 1) / W (or nanoGPT's (t + 1) / (W + 1)), then a cosine or linear decay that
reaches min_lr_ratio on the run's last step as optax's schedules do; a warmup longer than the run is refused by every
command that resolves a run, and a recipe's warmup that outlasts a short run is said in one line."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from cli_utils import one_line_error

from zoo.cli import transfer
from zoo.optim import OptimConfig, chain


def lr_factors(schedule: str, warmup: int, steps: int, ratio: float = 0.1, peak: str = "last") -> np.ndarray:
    """The LR factor of each of a run's `steps` SGD updates, read from the chain a run of that length builds."""
    cfg = OptimConfig("sgd", lr=1.0, schedule=schedule, warmup=warmup, min_lr_ratio=ratio, warmup_peak=peak)
    params = {"w": jnp.ones([])}
    tx = chain(cfg, {"w": 1.0}, {"w": 1.0}, {"w": 0.0}, horizon=steps)
    state, out = tx.init(params), []
    for _ in range(steps):
        u, state = tx.update({"w": jnp.ones([])}, state, params)
        out.append(-float(u["w"]))
    return np.array(out)


@pytest.mark.parametrize("warmup, steps", [(0, 7), (3, 10), (10, 40)])
def test_decay_reaches_min_lr_on_the_last_step_as_optax(warmup, steps):
    """A run of `steps` updates (t = 0..steps-1) decays to min_lr_ratio on its last step: the decay ended at
    t = steps, a step never taken (cosine at 0 + 7 steps ended at 0.160 of the peak for a min_lr_ratio of 0.1).
    Past the warmup the factors are optax's warmup_cosine_decay_schedule / linear with decay_steps = steps - 1;
    zoo's warmup (t + 1) / W is optax's t / W a step later."""
    for schedule in ("cosine", "linear"):
        got = lr_factors(schedule, warmup, steps)
        if schedule == "cosine":
            ref = optax.warmup_cosine_decay_schedule(0.0, 1.0, warmup, steps - 1, 0.1)
        else:
            ref = optax.join_schedules([optax.linear_schedule(0.0, 1.0, warmup),
                                        optax.linear_schedule(1.0, 0.1, steps - 1 - warmup)], [warmup])
        want = [float(ref(t + 1 if t < warmup else t)) for t in range(steps)]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
        assert got[-1] == pytest.approx(0.1) and got[min(warmup, steps - 1) - (warmup > 0)] == pytest.approx(1.0)


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_one_step_after_the_warmup_decays(schedule):
    """--warmup steps - 1 leaves one step after the warmup's peak: it is at min_lr_ratio (it was at the peak, the
    decay never began and --min-lr-ratio went unused). With no step after the warmup, or a one-step run without
    one, the LR stays at the warmup's value: the run trains at the peak rather than at min_lr_ratio."""
    np.testing.assert_allclose(lr_factors(schedule, 4, 5), [0.25, 0.5, 0.75, 1.0, 0.1], rtol=1e-6)
    np.testing.assert_allclose(lr_factors(schedule, 4, 4), [0.25, 0.5, 0.75, 1.0], rtol=1e-6)
    np.testing.assert_allclose(lr_factors(schedule, 0, 1), [1.0], rtol=1e-6)
    np.testing.assert_allclose(lr_factors(schedule, 0, 2), [1.0, 0.1], rtol=1e-6)
    # under --warmup-peak after the peak is step W: one step after it decays, none when it is the run's last
    np.testing.assert_allclose(lr_factors(schedule, 3, 5, peak="after"), [0.25, 0.5, 0.75, 1.0, 0.1], rtol=1e-6)
    np.testing.assert_allclose(lr_factors(schedule, 3, 4, peak="after"), [0.25, 0.5, 0.75, 1.0], rtol=1e-6)


@pytest.mark.parametrize("warmup, max_iters", [(3, 12), (10, 40)])
def test_warmup_peak_after_is_nanogpts_get_lr(warmup, max_iters):
    """--warmup-peak after, in a run of max_iters + 1 steps (nanoGPT's loop trains iterations 0..max_iters), gives
    nanoGPT's get_lr at every step: lr (t + 1) / (W + 1) for t < W, then a cosine from lr at t = W to min_lr at
    t = max_iters (its train.py, written out here)."""
    def get_lr(t: int) -> float:
        if t < warmup:
            return (t + 1) / (warmup + 1)
        return 0.1 + 0.5 * (1 + np.cos(np.pi * (t - warmup) / (max_iters - warmup))) * 0.9

    got = lr_factors("cosine", warmup, max_iters + 1, peak="after")
    np.testing.assert_allclose(got, [get_lr(t) for t in range(max_iters + 1)], rtol=1e-5)
    assert got[warmup] == pytest.approx(1.0) and got[warmup - 1] < 1.0  # the peak a step after the warmup


def test_warmup_peak_after_under_a_constant_schedule():
    """The ramp (t + 1) / (W + 1) reaches the peak on step W and stays there."""
    np.testing.assert_allclose(lr_factors("constant", 3, 6, peak="after"), [0.25, 0.5, 0.75, 1.0, 1.0, 1.0],
                               rtol=1e-6)


def test_warmup_peak_refusals(tmp_path, capsys):
    """A warmup whose peak (step W under --warmup-peak after) comes after the run is refused with the warmup that
    fits, and --warmup-peak without a warmup is refused: it shapes nothing (a config file's too, unless it is the
    recipe's, as a run's config.json holds it)."""
    from zoo.cli import train as train_cli

    base = ["--model", "mlp_resnet", "--steps", "5", "--print-config"]
    assert ("--warmup 5 reaches its peak on step 5 (--warmup-peak after), after the run's 5 steps: the LR would end "
            "at 0.833 of its peak --lr; give --warmup 4 or less") in one_line_error(
        train_cli.main, [*base, "--warmup", "5", "--warmup-peak", "after"], capsys)
    assert "--warmup-peak after shapes the warmup, and the run has none" in one_line_error(
        train_cli.main, [*base, "--warmup-peak", "after"], capsys)
    one_step = ["--model", "mlp_resnet", "--steps", "1", "--print-config", "--warmup", "1", "--warmup-peak", "after"]
    assert one_line_error(train_cli.main, one_step, capsys).endswith(  # not "--warmup 0 or less", refused in turn
        "give more --steps, or leave out --warmup-peak after")
    cfg = train_cli.config_from_args(train_cli.parser().parse_args(["--model", "gpt", "--warmup", "0"]))
    assert (cfg.optim.warmup, cfg.optim.warmup_peak) == (0, "after")  # the recipe's, not given: taken
    file = tmp_path / "run.yaml"
    file.write_text("model: gpt\nwarmup: 0\nwarmup_peak: after\n")  # as that run's config.json holds it: taken
    assert train_cli.config_from_args(train_cli.parser().parse_args(["--config", str(file)])).optim.warmup == 0
    file.write_text("warmup_peak: after\n")  # the default model's recipe has neither
    assert "--warmup-peak after shapes the warmup, and the run has none" in one_line_error(
        train_cli.main, ["--config", str(file), "--print-config"], capsys)


TRANSFER = ["--model", "mlp_resnet", "--proxy-width", "16", "--width", "32", "--depth", "2", "--lrs", "1e-3",
        "--steps", "2", "--batch-size", "8", "--data", "synthetic:teacher"]


def test_a_warmup_longer_than_the_run_is_refused(tmp_path, capsys):
    """--warmup 7 --steps 5 trained with the LR factor (t + 1) / 7 ending at 5/7 of --lr, silently; now every CLI
    that resolves a run config (train.py, the sweep, the transfer) refuses it in one line, before any data loads,
    as it does a file that sets both. Taken: warmup = steps (the peak on the last step), a file holding the
    recipe's warmup (gpt's 100) beside a shorter run (a run's config.json read back), and a file's warmup under a
    --steps flag that shortens the file's run (a smoke test of a preset)."""
    from zoo.cli import sweep
    from zoo.cli import train as train_cli

    want = "--warmup 7 is longer than the run's 5 steps: the LR would end at 0.714 of its peak --lr; give --warmup 5"
    small = ["--model", "mlp_resnet", "--steps", "5", "--warmup", "7"]
    assert want in one_line_error(train_cli.main, [*small, "--print-config"], capsys)
    assert want in one_line_error(sweep.main, [*small, "--lrs", "1e-3", "--out", str(tmp_path / "s")], capsys)
    assert want in one_line_error(transfer.main, [*TRANSFER, "--warmup", "7", "--steps", "5", "--out",
                                                  str(tmp_path / "t")], capsys)
    assert not (tmp_path / "s").exists() and not (tmp_path / "t").exists()
    assert "--warmup 100 is longer than the run's 2 steps" in one_line_error(
        train_cli.main, ["--model", "gpt", "--steps", "2", "--warmup", "100", "--print-config"], capsys)
    file = tmp_path / "run.yaml"
    file.write_text("model: gpt\nsteps: 2\nwarmup: 100\n")  # the recipe's warmup, as a run's config.json holds it
    assert train_cli.config_from_args(train_cli.parser().parse_args(["--config", str(file)])).optim.warmup == 100
    file.write_text("model: gpt\nsteps: 2\nwarmup: 50\n")
    assert "--warmup 50 is longer" in one_line_error(train_cli.main, ["--config", str(file)], capsys)
    file.write_text("model: gpt\nsteps: 3000\nwarmup: 50\n")
    assert train_cli.config_from_args(train_cli.parser().parse_args(["--config", str(file), "--steps", "2"])
                                      ).optim.warmup == 50
    cfg = train_cli.config_from_args(train_cli.parser().parse_args(["--steps", "5", "--warmup", "5"]))
    assert (cfg.loop.steps, cfg.optim.warmup) == (5, 5)


def test_a_run_shorter_than_its_recipes_warmup_says_so():
    """`--model gpt --steps 3` keeps the recipe's warmup of 100 (check_warmup lets it through): the LR ended at 3/100
    of --lr and the cosine decay never began, with nothing said. Now the run says it in one line; so does a cosine
    run whose warmup takes all of it (warmup = steps reaches the peak on the last step, no step decays), and a run
    with a step after its warmup says nothing."""
    from types import SimpleNamespace

    from zoo.config import resolve
    from zoo.train.loop import _warmup_note

    def note(steps: int, peak: str = "last") -> str | None:
        return _warmup_note(SimpleNamespace(cfg=resolve({"model": "gpt", "steps": steps, "warmup_peak": peak}),
                                            steps=steps))

    assert note(3) == ("note: the warmup of 100 steps is longer than the run's 3 steps: the LR ends at 0.03 of --lr "
                       "0.001, and the cosine decay never starts; give --warmup 2 or less to decay")
    assert note(100) == ("note: the warmup of 100 steps takes the whole run: the LR reaches --lr 0.001 on its last "
                         "step, and the cosine decay never starts (--min-lr-ratio 0.1 unused); give --warmup 99 or "
                         "less to decay")
    assert note(101) is None
    # the recipe's own: its peak on step 100, a step later
    assert note(3, "after").endswith("the LR ends at 0.0297 of --lr 0.001, and the cosine decay never starts; give "
                                     "--warmup 1 or less to decay")
    assert note(100, "after") == ("note: the warmup of 100 steps reaches its peak on step 100 (--warmup-peak after), "
                                  "after the run's 100 steps: the LR ends at 0.99 of --lr 0.001, and the cosine decay "
                                  "never starts; give --warmup 98 or less to decay")
    assert "takes the whole run" in note(101, "after") and note(102, "after") is None
    flat = resolve({"model": "mlp_resnet", "warmup": 8, "epochs": 1})  # the horizon is known once the data loads
    assert "LR ends at 0.5 of --lr" in _warmup_note(SimpleNamespace(cfg=flat, steps=4))
    assert "decay" not in _warmup_note(SimpleNamespace(cfg=flat, steps=4))  # mlp_resnet's schedule is constant
