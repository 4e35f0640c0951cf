"""zoo.param.infer_tags: parameter kinds, fans and multipliers from shapes at two widths, plus regex rules."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from param_helpers import s

import zoo.models as M
import zoo.param as P
from zoo.tree import key_path

SMALL = {
    "mlp_resnet": dict(in_shape=(12,), num_classes=5, bias=True, pre_ln=True, block_depth=2),
    "mixer": dict(in_shape=(8, 8, 3), num_classes=5, patch=4, token_dim=6),
    "vit": dict(in_shape=(8, 8, 3), num_classes=5, patch=4, head_dim=8),
    "gpt": dict(vocab_size=11, seq_len=7, head_dim=8),
}
ZOO_RULES = {"^stack/blocks/": ("stacked", "branch")}


def zoo_params(name: str, width: int, base_width: int, depth: int = 3, base_depth: int = 1):
    cfg = M.config(name, width=width, base_width=base_width, depth=depth, base_depth=base_depth, **SMALL[name])
    model = nnx.eval_shape(lambda: M.create(name, cfg, P.get("mup"), nnx.Rngs(0)))
    return nnx.state(model, nnx.Param)


def own_tags(params) -> dict:
    flat = jax.tree_util.tree_flatten_with_path(params, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]
    return {key_path(p): v.get_metadata()["tag"] for p, v in flat}


def inferred(tags) -> dict:
    return {key_path(p): t for p, t in jax.tree_util.tree_flatten_with_path(tags)[0]}


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("width", [32, 64])
def test_zoo_models_own_tags_are_recovered(name, width):
    """For every leaf of the four zoo models (at 2x and 4x the base width 16, depth 3 over base depth 1): the
    inferred kind, fan-in, fan-out, width multiplier, branch flag and depths equal the tag the model gave it."""
    base, params = zoo_params(name, 16, 16), zoo_params(name, width, 16)
    tables = {"/table$": "in_out"} if any(path.endswith("/table") for path in inferred(params)) else {}
    tags = inferred(P.infer_tags(base, params, base_width=16, width=width, rules={**ZOO_RULES, **tables}, depth=3,
                                 base_depth=1, layout="out_in"))  # zoo's Dense kernels (out, in), its tables not
    own = own_tags(params)
    assert set(tags) == set(own)
    fields = ("kind", "fan_in", "fan_out", "width_mult", "branch", "depth", "base_depth")
    for path, tag in own.items():
        got = tags[path]
        assert [getattr(got, f) for f in fields] == [getattr(tag, f) for f in fields], path


def shapes(**leaves):
    return {k: jax.ShapeDtypeStruct(v, jnp.float32) for k, v in leaves.items()}


def test_kinds_fans_and_layouts():
    """The kind of each growth pattern, under both kernel layouts; rules add branch, depth and roles."""
    base = shapes(emb=(50, 8), w=(8, 32), q=(8, 8), head=(8, 3), b=(8,), out_b=(3,), t=(), stack=(4, 8, 8))
    wide = shapes(emb=(50, 16), w=(16, 64), q=(16, 16), head=(16, 3), b=(16,), out_b=(3,), t=(), stack=(4, 16, 16))
    rules = {"^stack$": ("stacked", "branch"), "^q$": "query", "^head$": "readout"}
    tags = P.infer_tags(base, wide, base_width=8, width=16, rules=rules, depth=4, base_depth=2)
    got = {k: (t.kind, t.fan_in, t.fan_out, t.width_mult, t.branch, t.depth, t.base_depth, t.role)
           for k, t in tags.items()}
    assert got == {
        "emb": ("input", 50, 16, 2.0, False, 1, 1, ""),
        "w": ("hidden", 16, 64, 2.0, False, 1, 1, ""),
        "q": ("hidden", 16, 16, 2.0, False, 1, 1, "query"),
        "head": ("output", 16, 3, 2.0, False, 1, 1, "readout"),
        "b": ("vector", 1, 16, 2.0, False, 1, 1, ""),
        "out_b": ("scalar", 1, 3, 2.0, False, 1, 1, ""),
        "t": ("scalar", 1, 1, 2.0, False, 1, 1, ""),
        "stack": ("hidden", 16, 16, 2.0, True, 4, 2, ""),
    }
    # Equinox / PyTorch Linear weights are [fan_out, fan_in]: the first layer grows along axis 0
    eqx_base, eqx_wide = shapes(w_in=(8, 5), w_out=(3, 8)), shapes(w_in=(32, 5), w_out=(3, 32))
    tags = P.infer_tags(eqx_base, eqx_wide, base_width=8, width=32, layout="out_in")
    assert (tags["w_in"].kind, tags["w_in"].fan_in, tags["w_out"].kind, tags["w_out"].fan_in) == \
        ("input", 5, "output", 32)


@pytest.mark.parametrize("base,wide,rules,kwargs,needle", [
    (dict(b=(4, 8)), dict(b=(4, 16)), {}, dict(depth=4, base_depth=1), "'b' (4, 16): its leading axis has the "
     "depth's size 4; is it a stack of layers? add rules={'^b$': 'stacked'}"),
    (dict(w=(8, 9)), dict(w=(16, 17)), {}, {}, "parameter 'w': axis 1 changes from 9 to 17, not by the width ratio"),
    (dict(w=(8, 8, 8)), dict(w=(16, 16, 16)), {}, {}, "parameter 'w' ((8, 8, 8) -> (16, 16, 16)) has 3 width axes"),
    (dict(w=(8, 8)), dict(w=(16, 16)), {"^v$": "hidden"}, {}, "rule '^v$' matches no parameter"),
    (dict(w=(8, 8)), dict(w=(16, 16)), {"w": "embedding"}, {}, "rule 'w': unknown role 'embedding'"),
    (dict(w=(8, 8)), dict(w=(16, 16)), {"w": "branch"}, {}, "parameter 'w' is in a residual branch: infer_tags "
     "needs depth and base_depth"),
    (dict(w=(8, 8)), dict(w=(16, 16)), {"w": ("query", "readout")}, {}, "conflicting roles"),
    (dict(w=(8, 8)), dict(v=(16, 16)), {}, {}, "parameter 'v' exists at the width but not at the base width"),
    (dict(w=(8, 8)), dict(w=(16, 16, 1)), {}, {}, "the number of axes must not change"),
    (dict(w=(8, 8)), dict(w=(8, 8)), {}, dict(width=8), "two different widths"),
])
def test_bad_leaves_are_one_line_naming_them(base, wide, rules, kwargs, needle):
    """An untaggable or ambiguous leaf (or a bad rule) is one ValueError line that names it and the fix."""
    kwargs = {"base_width": 8, "width": 16, **kwargs}
    with pytest.raises(ValueError) as err:
        P.infer_tags(shapes(**base), shapes(**wide), rules=rules, **kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_kind_rule_settles_an_ambiguous_leaf():
    """The fix the error names works: 'stacked' reads (L, n) as L vectors, a kind rule as an input matrix."""
    base, wide = shapes(b=(4, 8)), shapes(b=(4, 16))
    stacked = P.infer_tags(base, wide, base_width=8, width=16, rules={"^b$": "stacked"}, depth=4, base_depth=1)
    as_input = P.infer_tags(base, wide, base_width=8, width=16, rules={"^b$": "input"}, depth=4, base_depth=1)
    assert (stacked["b"].kind, stacked["b"].fan_out, as_input["b"].kind, as_input["b"].fan_in) == \
        ("vector", 16, "input", 4)


def test_non_array_leaves_get_no_tag():
    """An Equinox-style tree holding a function: the function is no parameter (tag None)."""
    base = {"w": jax.ShapeDtypeStruct((8, 8), jnp.float32), "act": jax.nn.relu}
    wide = {"w": jax.ShapeDtypeStruct((16, 16), jnp.float32), "act": jax.nn.relu}
    tags = P.infer_tags(base, wide, base_width=8, width=16)
    assert tags["act"] is None and tags["w"].kind == "hidden"


def test_flax_frozen_dict_and_nested_lists():
    """Linen's FrozenDict and lists of layers are read like any pytree: paths "params/dense/kernel", "layers/1"."""
    from flax.core import FrozenDict

    def params(n):
        return FrozenDict({"params": {"dense": {"kernel": jnp.zeros((5, n)), "bias": jnp.zeros((n,))}},
                           "layers": [jnp.zeros((n, n)), jnp.zeros((n, 3))]})

    tags = P.infer_tags(params(8), params(24), base_width=8, width=24, rules={"^layers/1$": "readout"})
    assert tags["params"]["dense"]["kernel"].kind == "input" and tags["params"]["dense"]["bias"].kind == "vector"
    assert [t.kind for t in tags["layers"]] == ["hidden", "output"] and tags["layers"][1].role == "readout"
    assert tags["layers"][0].width_mult == 3.0


@pytest.mark.parametrize("plugin", [P.get("mup", readout_mult=2.0), P.get("depth_mup"), P.get("ntk_mup", s=0.5),
                                    P.get("mean_field")])
def test_at_the_base_width_the_examples_run_and_every_plugin_is_sp(plugin, capsys):
    """The base width is where the LR is tuned, but infer_tags cannot see which axes grow there: the examples raised
    ValueError at --width = --base-width. infer_tags_from reads the kinds against twice the width with multiplier 1:
    the Haiku MLP's kinds are right, every width factor (init, LR, gradient pre-scale) is 1 (readout_mult still acts
    on the readout), the tags elsewhere equal infer_tags', and the example trains (2 steps) at width 48 = base."""
    from param_helpers import example

    m = example("haiku_mlp")

    def shapes(w):
        return jax.eval_shape(lambda k: m.init(k, w, 1), jax.random.key(0))

    tags = P.infer_tags_from(shapes, base_width=48, width=48)
    got = {f"{k}/{n}": (t.kind, t.fan_in, t.width_mult) for k, v in tags.items() for n, t in v.items()}
    assert got == {"embed/w": ("input", 3072, 1.0), "embed/b": ("vector", 1, 1.0), "hidden_0/w": ("hidden", 48, 1.0),
                   "hidden_0/b": ("vector", 1, 1.0), "readout/w": ("output", 48, 1.0), "readout/b": ("scalar", 1, 1.0)}
    free = P.multiplier_free(plugin, tags)
    for t in jax.tree.leaves(tags):
        c = 2.0 if (t.kind == "output" and plugin.readout_mult == 2.0) else 1.0
        assert [float(f) for f in (free.init_factor(t), free.lr_mult(t), free.grad_scale(t))] == [c, c, c], t
    assert P.infer_tags_from(shapes, base_width=48, width=80) == P.infer_tags(shapes(48), shapes(80), base_width=48,
                                                                              width=80)
    loss = m.main(["--width", "48", "--base-width", "48", "--depth", "1", "--batch-size", "8", "--steps", "2",
                   "--param", "depth_mup"])
    assert np.isfinite(loss) and "step 2: train loss" in capsys.readouterr().out


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
    """A zoo model read by infer_tags (its own tags the reference): at a depth equal to the vocabulary (3), the context
    (3) or a ViT's tokens + 1 (5), its table [rows, n] was refused as a possible stack of layers ('its leading axis
    has the depth's size'), the line offering the kind 'output', which its own 'in_out' rule contradicts. A 2-axis
    leaf named table is one layer, as kernel, w and embedding are: every leaf's kind and fans are the model's own."""
    tags = zoo_tags(name, depth, **options)
    assert tags[table][0] == ("input", tags[table][1][1], 16)
    for path, (inferred, own) in tags.items():
        assert inferred == own, path


@pytest.mark.parametrize("leaf", [(None, 0), (0, None), (0,)])
def test_a_leaf_with_an_axis_of_size_0_is_one_line_naming_it(leaf):
    """A Linear to 0 features [n, 0] died in ZeroDivisionError (its fan-in, size // fan-out); a table of 0 rows [0, n]
    was tagged input of fan-in 0 and died in rescale_init (init std 0 ** -1/2). Both, and a bias [0], hold no entry to
    scale: one line naming the leaf."""
    def model(n):
        return {"empty": {"w": s(*(n if a is None else a for a in leaf))}, "h": {"w": s(n, n)}}

    with pytest.raises(ValueError, match=r"parameter 'empty/w' .* has an axis of size 0"):
        P.infer_tags(model(8), model(16), base_width=8, width=16)


def test_two_leaves_that_join_to_one_name_are_refused():
    """Haiku allows '/' in a parameter's name: {'blk': {'a/w'}} (an input layer [48, n]) and {'blk/a': {'w'}} (a
    hidden matrix) both join to blk/a/w, and the input layer took the hidden matrix's tag without a word."""
    def shapes(n: int) -> dict:
        return {"blk/a": {"w": s(n, n)}, "blk": {"a/w": s(48, n)}, "out": {"w": s(n, 5)}}

    with pytest.raises(ValueError, match=r"parameters \['blk'\]\['a/w'\] and \['blk/a'\]\['w'\] both go by the name "
                                         r"'blk/a/w'"):
        P.infer_tags_from(shapes, base_width=8, width=16)
