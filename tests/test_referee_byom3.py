"""Referee checks of "Bring your own model", third round: gains and biases named as such over size-1 axes (Haiku's
BatchNorm NCHW and NHWC, a stack of one layer's gain), a depth equal to a conv kernel's size, tied embeddings, and
layer types the other tests do not use (GRU and LSTM cells, fused and separate attention, grouped convs, small
vocabularies, a readout to one output), at widths and depths the other tests do not use."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import zoo.param as P


def small_init(key, width, depth):
    k1, k2 = jax.random.split(key)
    return {"embed": {"w": jax.random.normal(k1, (5, width)) / jnp.sqrt(5.0)},
            "head": {"w": jax.random.normal(k2, (width, 3)) / jnp.sqrt(width)}}


def small_apply(p, x, width, depth):
    h = jnp.tanh(x @ p["embed"]["w"])
    return h @ p["head"]["w"], {"embed": h}


@pytest.mark.parametrize("kwargs,needle", [
    (dict(head_dim=0), "head_dim must be a positive integer (or a function of the width giving one), got 0 at width "
     "32"),
    (dict(head_dim=lambda w: w // 64), "got 0 at width 32"),
    (dict(lr="1e-3"), "lr must be a positive number, got '1e-3'"),
    (dict(seed=0.5), "seed must be an integer, got 0.5"),
    (dict(y=jnp.zeros(8)), "batch 'y' must hold integer labels for the cross-entropy loss, got float32"),
    (dict(y=jnp.full((8,), 7)), "batch 'y' holds labels from 7 to 7, but the output has 3 classes (its last axis): "
     "labels must lie in [0, 3)"),
    (dict(y=jnp.arange(8) - 1), "labels from -1 to 6"),
    (dict(y=jnp.zeros((8, 2), int)), "batch 'y' (8, 2) must have the output's shape (8, 3) less its last (class) "
     "axis"),
])
def test_coord_check_refuses_bad_arguments_in_one_line(kwargs, needle):
    """Before anything is compiled: head_dim=0 (no query rule) divided by zero in the head-dim slope
    (ZeroDivisionError); lr='1e-3' a TypeError "'<' not supported"; seed=0.5 jax's "PRNG key seed must be an
    integer; got JitTracer"; float labels optax's dtype TypeError, labels (8, 2) for logits (8, 3) its shape error;
    and labels out of [0, classes) ran with no word (optax's cross-entropy: NaN for 7 of 3 classes, and -1 read as
    class 2)."""
    from zoo.diagnostics.coord_any import coord_check

    y = kwargs.pop("y", jnp.arange(8) % 3)
    batch = {"x": jax.random.normal(jax.random.key(0), (8, 5)), "y": y}
    with pytest.raises(ValueError) as err:
        coord_check(small_init, small_apply, P.get("mup"), batch, widths=[32, 64], seeds=1, steps=1, **kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("name,argv,needle", [
    ("haiku_mlp", ["--steps", "0"], "error: argument --steps: expected a positive integer, got '0'"),
    ("linen_mlp", ["--batch-size", "-1"], "error: argument --batch-size: expected a positive integer, got '-1'"),
    ("equinox_mlp", ["--base-width", "-4"], "error: argument --base-width: expected a positive integer, got '-4'"),
    ("haiku_transformer", ["--depth", "0"], "error: argument --depth: expected a positive integer, got '0'"),
    ("haiku_mlp", ["--stepz", "3"], "error: unrecognized arguments: --stepz 3"),
    ("equinox_mlp", ["--depth", "-1"], "error: argument --depth: expected a positive integer, got '-1'"),
    ("linen_mlp", ["--lr", "nan"], "error: argument --lr: expected a finite number, got 'nan'"),
    ("haiku_mlp", ["--lr=-1e-3"], "error: argument --lr: expected a positive number, got '-1e-3'"),
])
def test_an_example_given_a_bad_size_says_one_line_before_it_builds_anything(name, argv, needle, capsys):
    """--steps 0 (or -3) trained nothing, printed nothing and exited 0 (its mean loss of no steps NaN);
    --base-width -4 ended in "unexpected TypeError: Only non-negative indices are allowed when broadcasting static
    shapes" (Haiku building the model at width -4); a bad flag printed argparse's usage over several lines. Now
    zoo's command-line parser: one line, exit status 2."""
    from param_helpers import example

    with pytest.raises(SystemExit) as done:
        example(name).main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(needle) and err.count("\n") == 1, err
