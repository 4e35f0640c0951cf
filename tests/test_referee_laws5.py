"""Referee pass 5 over the laws, the optimizers and Muon, at settings the other tests do not use (odd widths, depths
3/5/7, non-default alpha): each test fails without the fix it names."""

from __future__ import annotations

import pytest

from zoo.diagnostics import coord_sweep, verdict


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
