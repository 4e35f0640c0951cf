"""Referee fixes, round 6: LR schedules, optimizer settings, the transfer report's statistics, the coord-check
hints."""

from __future__ import annotations

import pytest

from zoo.diagnostics import verdict
from zoo.diagnostics.coord_sweep import CoordSpec, mixed_parts_hint


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
