"""Referee checks of the models, "Bring your own model" tagging and the diagnostics, fourth round: images that patches
do not divide, tables whose row count equals the depth, rules that give a leaf its layout, at shapes the other tests
do not use."""

from __future__ import annotations

import jax
import pytest
from flax import nnx

import zoo.models as M
import zoo.param as P


@pytest.mark.parametrize("name", ["mixer", "vit"])
@pytest.mark.parametrize("in_shape,patch", [((2, 2, 3), 4), ((7, 7, 1), 3), ((6, 8, 3), 3)])
def test_an_image_the_patches_do_not_divide_is_refused_before_the_model_is_built(name, in_shape, patch):
    """A 2x2 image cut into 4x4 patches has no patch: the Mixer built token-mixing layers of fan-in 0 and died in a
    ZeroDivisionError (0 ** -0.5, its init std), a traceback where train.py printed 'unexpected ZeroDivisionError'; a
    7x7 image with patch 3 built both models (2 x 2 patches, the last row and column dropped) and was refused only
    when called. Now the constructor refuses both in one line, for either side."""
    cfg = M.config(name, width=6, depth=1, in_shape=in_shape, patch=patch, num_classes=2, **(
        {"head_dim": 3} if name == "vit" else {"token_dim": 3}))
    h, w, _ = in_shape
    with pytest.raises(ValueError, match=f"image size {h}x{w} is not a multiple of the patch size {patch}"):
        nnx.eval_shape(lambda: M.create(name, cfg, P.get("mup"), nnx.Rngs(0)))


@pytest.mark.parametrize("name", ["mixer", "vit"])
def test_an_image_of_one_patch_builds_and_runs(name):
    """The smallest image a patch divides, 3x3 with patch 3 (one token), one class: built and run, finite."""
    cfg = M.config(name, width=6, depth=1, in_shape=(3, 3, 2), patch=3, num_classes=1, **(
        {"head_dim": 3} if name == "vit" else {"token_dim": 1}))
    logits, _ = M.create(name, cfg, P.get("mup"), nnx.Rngs(0))(jax.numpy.ones((2, 3, 3, 2)))
    assert logits.shape == (2, 1) and bool(jax.numpy.isfinite(logits).all())
