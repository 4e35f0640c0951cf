"""zoo.fit's optimum of one size: the vertex of a parabola over the grid minimum's window, kept between the
minimum's neighbours, with its bootstrap interval; a minimum (or a vertex) on the grid's end or beside a diverged LR
locates nothing."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.fit import optimum


def test_parabola_vertex_and_edge():
    """A parabola's vertex is found between grid points; a minimum on the grid's end is flagged."""
    x = np.arange(-6.0, 0.0)
    y = (x + 2.3) ** 2
    o = optimum.optimum(x, y[:, None, None], np.zeros((6, 1), bool), np.random.default_rng(0), 50)
    assert o.x == pytest.approx(-2.3, abs=1e-9) and not o.at_edge and o.lo <= -2.3 <= o.hi
    edge = optimum.optimum(x, (x + 9.0)[:, None, None] ** 2, np.zeros((6, 1), bool), np.random.default_rng(0), 10)
    assert edge.at_edge and edge.x == -6.0
    # still falling where the next LR diverged: bounded by the divergence, not located (its interval was [x, x])
    cliff = np.array([[False]] * 4 + [[True]] * 2)
    o = optimum.optimum(x, (x + 1.0)[:, None, None] ** 2, cliff, np.random.default_rng(0), 10)
    assert o.at_edge and o.x == -3.0


def test_the_vertex_stays_between_the_minimums_neighbours():
    """A least-squares parabola over the minimum's window can put its vertex past the minimum's neighbours (where a
    curve with one minimum cannot have it): kept at the neighbour, and so are the interval's replicates; one kept on
    the grid's last LR, or on the last that trained (the minimum beside it), is no located optimum, as a minimum
    there is not."""
    x = np.arange(-8.0, -2.9)
    none = np.zeros((6, 1), bool)
    y = np.array([0.97, 0.78, 0.52, 0.16, 0.167, 0.168])  # minimum -5, the window's parabola at -3.76
    assert optimum.vertex(x[1:], y[1:]) == pytest.approx(-3.758, abs=1e-3)
    o = optimum.optimum(x, y[:, None, None], none, np.random.default_rng(0), 50)
    assert (o.grid, o.x, o.at_edge) == (-5.0, -4.0, False)
    assert -6.0 <= o.lo <= o.hi <= -4.0  # the replicates are the same estimator: within their minimum's neighbours
    y = np.array([0.97, 0.78, 0.62, 0.52, 0.16, 0.167])  # minimum -4, the parabola past the grid's end
    o = optimum.optimum(x, y[:, None, None], none, np.random.default_rng(0), 20)
    assert (o.grid, o.x, o.at_edge) == (-4.0, -3.0, True)
    # the same curve one LR further, which diverged: the vertex is kept on the last LR that trained, no optimum either
    y = np.array([0.97, 0.78, 0.62, 0.52, 0.16, 0.167, np.nan])
    diverged = np.array([[False]] * 6 + [[True]])
    o = optimum.optimum(np.arange(-8.0, -1.9), y[:, None, None], diverged, np.random.default_rng(0), 20)
    assert (o.grid, o.x, o.at_edge) == (-4.0, -3.0, True)
