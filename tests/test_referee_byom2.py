"""Referee checks of "Bring your own model", second round: stacks of layers no rule marks, biases stored
broadcastable over size-1 axes (Equinox's Conv), and the leaves that look like either but are not, at widths, depths
and layer types the other tests do not use."""

from __future__ import annotations


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
