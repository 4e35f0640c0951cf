"""Referee checks of "Bring your own model", second round: stacks of layers no rule marks, biases stored
broadcastable over size-1 axes (Equinox's Conv), and the leaves that look like either but are not, at widths, depths
and layer types the other tests do not use."""

from __future__ import annotations

import pytest

import zoo.param as P


def test_an_example_given_a_bad_flag_says_one_line():
    """The examples are commands a user runs: `--param foo` printed a traceback (zoo.registry's ValueError at its
    end); they now run in zoo's error boundary, one line on stderr and exit status 1."""
    import subprocess
    import sys

    from cli_utils import ROOT

    script = ROOT / "examples" / "haiku_mlp.py"
    done = subprocess.run([sys.executable, str(script), "--param", "foo", "--steps", "1"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.startswith("error: unknown parametrization 'foo'"), done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("kwargs,needle", [
    (dict(widths=[32, 64], base_depth=0), "base_depth must be a positive integer, got 0"),
    (dict(depths=[4, 8], width=0), "width must be a positive integer, got 0"),
    (dict(widths=[32, 64], depth=-1), "depth must be a positive integer, got -1"),
])
def test_coord_check_refuses_bad_sizes_before_calling_the_model(kwargs, needle):
    """base_depth=0 ran (and passed) as base depth = depth, `0 or depth`; a width or depth the model cannot be built
    at reached the model's own init first (here its ZeroDivisionError)."""
    from test_referee_byom import tiny_apply, tiny_batch, tiny_init

    from zoo.diagnostics.coord_any import coord_check

    def init(key, width, depth):
        return tiny_init(key, width, depth) if width > 0 and depth > 0 else 1 / 0

    with pytest.raises(ValueError) as err:
        coord_check(init, tiny_apply, P.get("mup"), tiny_batch(), seeds=1, lr=1e-3, **kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)
