"""Referee checks of the models, "Bring your own model" tagging and the diagnostics, fourth round: images that patches
do not divide, tables whose row count equals the depth, rules that give a leaf its layout, at shapes the other tests
do not use."""

from __future__ import annotations

import re

import jax
import pytest
from flax import nnx
from param_helpers import kinds, s

import zoo.models as M
import zoo.param as P
from zoo.tree import key_path


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
    logits = nnx.jit(lambda model, x: model(x)[0])(M.create(name, cfg, P.get("mup"), nnx.Rngs(0)),
                                                   jax.numpy.ones((2, 3, 3, 2)))
    assert logits.shape == (2, 1) and bool(jax.numpy.isfinite(logits).all())


def zoo_tags(name: str, depth: int, **options) -> dict[str, tuple]:
    """infer_tags on a zoo model (widths 8 -> 16, depth over base depth 1) against the tags the model gave: path ->
    (inferred (kind, fan-in, fan-out), own)."""
    def params(width):
        cfg = M.config(name, width=width, base_width=8, depth=depth, base_depth=1, **options)
        return nnx.state(nnx.eval_shape(lambda: M.create(name, cfg, P.get("mup"), nnx.Rngs(0))), nnx.Param)

    wide = params(16)
    own = {key_path(p): v.get_metadata()["tag"] for p, v in jax.tree_util.tree_flatten_with_path(
        wide, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]}
    rules = {"^stack/blocks/": ("stacked", "branch"), "/table$": "in_out"}
    tags = P.infer_tags(params(8), wide, base_width=8, width=16, rules=rules, depth=depth, base_depth=1,
                        layout="out_in")
    inferred = {key_path(p): t for p, t in jax.tree_util.tree_flatten_with_path(tags)[0]}
    return {path: ((inferred[path].kind, inferred[path].fan_in, inferred[path].fan_out), (t.kind, t.fan_in, t.fan_out))
            for path, t in own.items()}


@pytest.mark.parametrize("name,depth,options,table", [
    ("gpt", 3, dict(vocab_size=3, seq_len=8, head_dim=4), "wte/table"),
    ("gpt", 3, dict(vocab_size=8, seq_len=3, head_dim=4), "wpe/table"),
    ("gpt", 2, dict(vocab_size=2, seq_len=1, head_dim=4, tie_embeddings=True), "wte/table"),
    ("vit", 5, dict(in_shape=(4, 4, 3), patch=2, head_dim=4, num_classes=16), "pos/table"),
])
def test_a_zoo_table_with_as_many_rows_as_blocks_is_read_as_the_table_it_is(name, depth, options, table):
    """A zoo model read by infer_tags (its own tags the referee): at a depth equal to the vocabulary (3), the context
    (3) or a ViT's tokens + 1 (5), its table [rows, n] was refused as a possible stack of layers ('its leading axis
    has the depth's size'), the line offering the kind 'output', which its own 'in_out' rule contradicts. A 2-axis
    leaf named table is one layer, as kernel, w and embedding are: every leaf's kind and fans are the model's own."""
    tags = zoo_tags(name, depth, **options)
    assert tags[table][0] == ("input", tags[table][1][1], 16)
    for path, (inferred, own) in tags.items():
        assert inferred == own, path


def equinox_embedding(n: int) -> dict:
    """Equinox's Embedding(3, n) weight [3, n] (in_out, as every table) before a Linear(n, 10), out_in."""
    return {"emb": {"weight": s(3, n)}, "head": {"weight": s(10, n), "bias": s(10)}}


def test_the_kind_a_stack_line_offers_is_read_in_the_leafs_own_layout():
    """At depth 3 Equinox's embedding weight [3, n] (name 'weight': a gain's too) may stack 3 layers, and the line
    names both rules; but the kind it offered for one layer was read in infer_tags' layout (out_in: 'output', fan-in
    n) though a rule gave the leaf in_out, and taking it was refused as a kind the shapes contradict. It offers
    'input' now, which tags the table."""
    layout = {"^emb/": "in_out"}
    with pytest.raises(ValueError, match=r"its kind: rules=\{'\^emb/weight\$': 'input'\}"):
        P.infer_tags(equinox_embedding(8), equinox_embedding(24), base_width=8, width=24, rules=layout,
                     layout="out_in", depth=3, base_depth=1)
    tags = kinds(P.infer_tags(equinox_embedding(8), equinox_embedding(24), base_width=8, width=24, layout="out_in",
                              rules={**layout, r"^emb/weight$": "input"}, depth=3, base_depth=1))
    assert tags["emb/weight"] == ("input", 3, 24) and tags["head/weight"] == ("output", 24, 10)


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


@pytest.mark.parametrize("leaf", [(None, 0), (0, None), (0,)])
def test_a_leaf_with_an_axis_of_size_0_is_one_line_naming_it(leaf):
    """A Linear to 0 features [n, 0] died in ZeroDivisionError (its fan-in, size // fan-out); a table of 0 rows [0, n]
    was tagged input of fan-in 0 and died in rescale_init (init std 0 ** -1/2). Both, and a bias [0], hold no entry to
    scale: one line naming the leaf."""
    def model(n):
        return {"empty": {"w": s(*(n if a is None else a for a in leaf))}, "h": {"w": s(n, n)}}

    with pytest.raises(ValueError, match=r"parameter 'empty/w' .* has an axis of size 0"):
        P.infer_tags(model(8), model(16), base_width=8, width=16)


@pytest.mark.parametrize("name", ["gpt", "vit"])
def test_a_head_count_given_where_heads_grow_with_width_is_refused(name):
    """num_heads=4 at width 384 (head_dim 64) under the default scale_heads=true built 6 heads without a word: the
    head count followed width / head_dim and num_heads was read only under scale_heads=false. Now one line names
    both options."""
    cfg = M.config(name, width=384, depth=1, num_heads=4)
    with pytest.raises(ValueError, match=r"num_heads=4 fixes the head count, but scale_heads=true grows it \(width / "
                                         r"head_dim = 6 heads\)"):
        nnx.eval_shape(lambda: M.create(name, cfg, P.get("mup"), nnx.Rngs(0)))


@pytest.mark.parametrize("argv,flag", [(["--width", "100"], "--width"), (["--base-width", "48"], "--base-width"),
                                       (["--width", "16", "--base-width", "32"], "--width")])
def test_the_haiku_transformer_example_refuses_a_width_of_partial_heads_in_one_line(argv, flag, capsys):
    """The example cuts the width into heads of 32: --width 100 (3 heads and 4 left over), --base-width 48 or
    --width 16 ended in 'unexpected TypeError: cannot reshape array of shape (1, 64, 100) into shape
    (1, 64, 3, 32)' with a traceback file. Now the flag is refused: one line, exit status 2."""
    from param_helpers import example

    with pytest.raises(SystemExit) as done:
        example("haiku_transformer").main([*argv, "--steps", "1"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: argument {flag}: expected a multiple of the head dim 32, got"), err


def deconvs(n: int, stored_out_in: bool = True) -> dict:
    """Transposed convs 2x2 from 3 channels to n, n to n and n to 3 with biases: Haiku's ConvTranspose stores w
    [kh, kw, out, in]; swapped, [kh, kw, in, out] (Flax's ConvTranspose)."""
    def w(i, o):
        return s(2, 2, o, i) if stored_out_in else s(2, 2, i, o)

    return {"up": {"w": w(3, n), "b": s(n)}, "mid": {"w": w(n, n), "b": s(n)}, "down": {"w": w(n, 3), "b": s(3)}}


def test_a_kernel_stored_out_then_in_is_refused_by_its_bias():
    """Haiku's ConvTranspose w [2, 2, out, in] read in_out as [..., in, out]: from 3 channels to n [2, 2, n, 3] was
    tagged output of fan-in 4n (a readout's init x m^-1/2 and Adam LR x m^-1 under muP at m = 3, for an input layer)
    and from n to 3 channels input of fan-in 12, without a word. Its bias [out] shows the fan-out is axis 2: one line
    naming the leaf and what to give. The same kernels given [..., in, out] are tagged as the layers they are; n to n
    reads alike either way and is not refused."""
    with pytest.raises(ValueError, match=r"parameter 'down/w' \(2, 2, 3, 24\) reads as fan-out 24 \(in_out\), but its "
                                         r"bias 'down/b' has 3 entries, as its axis 2"):
        P.infer_tags(deconvs(8), deconvs(24), base_width=8, width=24)
    tags = kinds(P.infer_tags(deconvs(8, False), deconvs(24, False), base_width=8, width=24))
    assert tags["up/w"] == ("input", 12, 24) and tags["mid/w"] == ("hidden", 96, 24)
    assert tags["down/w"] == ("output", 96, 3) and tags["down/b"] == ("scalar", 1, 3)
    hidden = {"mid": deconvs(8)["mid"]}
    assert kinds(P.infer_tags(hidden, {"mid": deconvs(24)["mid"]}, base_width=8, width=24))["mid/w"] == (
        "hidden", 96, 24)


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
    logits = nnx.jit(lambda model, x: model(x)[0])(M.create("mlp_resnet", cfg, P.get("mup"), nnx.Rngs(0)),
                                                   jax.numpy.ones((2, 3)))
    assert logits.dtype == jax.numpy.float16 and bool(jax.numpy.isfinite(logits).all())


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
