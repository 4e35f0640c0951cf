"""Referee fixes, round 6: LR schedules, optimizer settings, the transfer report's statistics, the coord-check
hints."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.diagnostics import verdict
from zoo.diagnostics.coord_sweep import CoordSpec, mixed_parts_hint
from zoo.sweeps import report
from zoo.sweeps.transfer import Arm
from zoo.sweeps.transfer_report import seed_noise, target_text


def seeded_arm(param: str, losses: list[float]) -> Arm:
    """An arm whose proxy's best LR is 2^-9 and whose target seeds reached `losses` there."""
    def record(width: int, seed: int, loss: float) -> dict:
        return {"width": width, "depth": 2, "seed": seed, "lr": 2.0**-9, "log2_lr": -9.0, "diverged": False,
                "train_loss": loss, "eval_accuracy": None}

    proxy = report.summarize([record(16, 0, 1.5)])
    target = report.summarize([record(32, i, v) for i, v in enumerate(losses)])
    return Arm(param, {}, proxy, [-9.0], -9.0, target, losses, False)


def test_a_targets_spread_is_the_sample_std_the_noise_rule_uses():
    """The target's "+-" was the population std (ddof 0: 0.2055 for losses 2.3, 2.5, 2.8) beside a noise rule that
    takes the sample std (ddof 1: 0.2517); both are the sample std now, and the text says so."""
    mup, sp = seeded_arm("mup", [2.3, 2.5, 2.8]), seeded_arm("sp", [2.4, 2.6, 2.9])
    assert target_text(mup) == "2.5333 +- 0.2517 (sample std of 3 seeds)"
    assert seed_noise([mup, sp]) == pytest.approx(2 * np.sqrt(2 * 0.2517**2 / 3), rel=1e-3)
    assert target_text(seeded_arm("mup", [2.5])) == "2.5000"


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
