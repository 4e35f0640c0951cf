"""Model configs and constructors (zoo.models): what a model cannot be built with is one line before anything is
built (an image the patches do not divide or that is no image, a head count of 0 or one that scale_heads contradicts,
a compute dtype that is no float, an abcd multiplier on parameters that carry none), and the smallest shapes that can
be built are (one patch, one class; float16)."""

from __future__ import annotations

import re

import jax
import pytest
from flax import nnx

import zoo.models as M
import zoo.param as P
from zoo.train.step import run_once_options


def run_once(fn, *args):
    """fn(*args), the model built inside, as one program compiled to run once (a model built eagerly compiled each
    init op on its own)."""
    return jax.jit(fn).lower(*args).compile(compiler_options=run_once_options())(*args)

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
    logits = run_once(lambda x: M.create(name, cfg, P.get("mup"), nnx.Rngs(0))(x)[0], jax.numpy.ones((2, 3, 3, 2)))
    assert logits.shape == (2, 1) and bool(jax.numpy.isfinite(logits).all())


@pytest.mark.parametrize("name", ["mixer", "vit"])
@pytest.mark.parametrize("in_shape", [(4, 4), (4, 4, 1, 1)])
def test_an_image_model_given_no_image_shape_says_so(name, in_shape):
    """The Mixer and ViT cut (H, W, C) images into patches; in_shape (4, 4) or (4, 4, 1, 1) said 'not enough values
    to unpack (expected 3, got 2)' or 'too many values to unpack (expected 3)'. Now the line names in_shape."""
    cfg = M.config(name, width=8, depth=1, in_shape=in_shape, patch=2, num_classes=2, **(
        {"head_dim": 4} if name == "vit" else {}))
    with pytest.raises(ValueError, match=rf"in_shape must be an image's \(height, width, channels\), got "
                                         rf"{re.escape(str(in_shape))}"):
        nnx.eval_shape(lambda: M.create(name, cfg, P.get("mup"), nnx.Rngs(0)))


@pytest.mark.parametrize("name", ["gpt", "vit"])
def test_a_fixed_head_count_of_zero_heads_says_why(name):
    """scale_heads=false takes base_width // head_dim heads: at width 32 with the default head_dim 64 that is 0, and
    the line read 'width 32 and base width 32 must be multiples of the head count 0', though both are multiples of
    anything that could be meant. It now says the base width has no head of 64 and names num_heads."""
    cfg = M.config(name, width=32, depth=1, scale_heads=False)
    with pytest.raises(ValueError, match="base width 32 has no head of 64: give --model-opt num_heads=H"):
        nnx.eval_shape(lambda: M.create(name, cfg, P.get("mup"), nnx.Rngs(0)))
    heads = M.config(name, width=32, depth=1, scale_heads=False, num_heads=2)
    nnx.eval_shape(lambda: M.create(name, heads, P.get("mup"), nnx.Rngs(0)))


@pytest.mark.parametrize("name", ["gpt", "vit"])
def test_a_head_count_given_where_heads_grow_with_width_is_refused(name):
    """num_heads=4 at width 384 (head_dim 64) under the default scale_heads=true built 6 heads without a word: the
    head count followed width / head_dim and num_heads was read only under scale_heads=false. Now one line names
    both options."""
    cfg = M.config(name, width=384, depth=1, num_heads=4)
    with pytest.raises(ValueError, match=r"num_heads=4 fixes the head count, but scale_heads=true grows it \(width / "
                                         r"head_dim = 6 heads\)"):
        nnx.eval_shape(lambda: M.create(name, cfg, P.get("mup"), nnx.Rngs(0)))


@pytest.mark.parametrize("name", ["mlp_resnet", "mixer", "vit", "gpt"])
@pytest.mark.parametrize("dtype", ["float17", "int32"])
def test_a_compute_dtype_no_model_computes_in_is_refused_in_one_line(name, dtype):
    """--model-opt dtype=float17 ended in 'unexpected TypeError: data type 'float17' not understood' at the first
    call, dtype=int32 in 'scan body function carry input and carry output must have equal types' (the MLP-ResNet
    casts its input to the compute dtype, a LayerNorm returns floats), each with a traceback file. The config refuses
    them, naming the floating types."""
    with pytest.raises(ValueError, match=f"model option dtype must be one of float32, bfloat16, float16, got "
                                         f"'{dtype}'"):
        M.config(name, dtype=dtype)


def test_float16_computes():
    """float16, the third compute type, runs: finite logits of an MLP-ResNet at depth 1 and odd width 7."""
    cfg = M.config("mlp_resnet", width=7, depth=1, in_shape=(3,), num_classes=2, dtype="float16", pre_ln=True)
    logits = run_once(lambda x: M.create("mlp_resnet", cfg, P.get("mup"), nnx.Rngs(0))(x)[0], jax.numpy.ones((2, 3)))
    assert logits.dtype == jax.numpy.float16 and bool(jax.numpy.isfinite(logits).all())


@pytest.mark.parametrize("kind", ["vector", "scalar"])
def test_a_multiplier_zoos_models_do_not_apply_is_refused(kind):
    """abcd with vector (or scalar) a = 1/2: zoo's models put no multiplier on biases, norm gains (vector) or the
    readout's bias (scalar), so the rule was silently absent; the audit of mlp_resnet at widths 24, 48 measured m^0 on
    embed/bias, w1/bias, norm gain and bias against the stated m^-1/2. Now zoo.models.create refuses it in one line."""
    from flax import nnx

    import zoo.models as M

    cfg = M.config("mlp_resnet", width=24, base_width=12, depth=2, in_shape=(8,), num_classes=4, bias=True)
    with pytest.raises(ValueError, match=f"{kind} a = 0.5, but mlp_resnet's biases and norm gains carry no"):
        nnx.eval_shape(lambda: M.create("mlp_resnet", cfg, P.get("abcd", **{kind: "0.5,0,0,1"}), nnx.Rngs(0)))
    nnx.eval_shape(lambda: M.create("mlp_resnet", cfg, P.get("abcd", **{kind: "0,0.5,0,1"}), nnx.Rngs(0)))  # built
