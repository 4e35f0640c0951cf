"""Referee checks of "Bring your own model", second round: stacks of layers no rule marks, biases stored
broadcastable over size-1 axes (Equinox's Conv), and the leaves that look like either but are not, at widths, depths
and layer types the other tests do not use."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from param_helpers import kinds, s

import zoo.param as P


def linen_scan(n: int, layers: int = 6) -> dict:
    """Flax Linen nn.scan over `layers` pre-LN blocks (kernel [L, n, n], bias and LayerNorm [L, n]) between an input
    Dense 5 -> n and a readout n -> 7."""
    block = {"Dense_0": {"kernel": s(layers, n, n), "bias": s(layers, n)},
             "LayerNorm_0": {"scale": s(layers, n), "bias": s(layers, n)}}
    return {"params": {"Dense_0": {"kernel": s(5, n), "bias": s(n)}, "ScanBlock_0": block,
                       "Dense_1": {"kernel": s(n, 7), "bias": s(7)}}}


def llama_stack(n: int, layers: int = 5) -> dict:
    """Haiku hk.layer_stack of bias-free blocks (RMSNorm scale [L, n] alone in its module, kernels [L, n, 3n])."""
    return {"embed": {"embeddings": s(40, n)}, "blocks/~/norm": {"scale": s(layers, n)},
            "blocks/~/up": {"w": s(layers, n, 3 * n)}, "blocks/~/down": {"w": s(layers, 3 * n, n)},
            "head": {"w": s(n, 40)}}


def eqx_vmapped_conv(n: int, layers: int = 3) -> dict:
    """eqx.filter_vmap of Conv2d(n, n, 3): weight [L, n, n, 3, 3], bias [L, n, 1, 1] (layout out_in)."""
    return {"blocks": {"weight": s(layers, n, n, 3, 3), "bias": s(layers, n, 1, 1)}}


@pytest.mark.parametrize("model,layout,rule,fixed", [
    (linen_scan, "in_out", "^params/ScanBlock_0/", ("params/ScanBlock_0/Dense_0/kernel", ("hidden", 80, 80))),
    (llama_stack, "in_out", "^blocks/\\~/", ("blocks/~/down/w", ("hidden", 240, 80))),
    (eqx_vmapped_conv, "out_in", "^blocks/", ("blocks/weight", ("hidden", 720, 80))),
])
def test_an_unmarked_stack_is_one_line_naming_the_rule_that_tags_it(model, layout, rule, fixed):
    """Without a 'stacked' rule (and no depth=) the stack axis was read as a fan, silently: Linen's scanned kernel
    [6, 80, 80] hidden with fan-in 480 (6x; init std 1/sqrt(480), not 1/sqrt(80)), its bias and LayerNorm [6, 80]
    input layers of fan-in 6; the Haiku stack's RMSNorm scale [5, 80] an input layer, its down kernel [5, 240, 80]
    fan-in 1200. Now one line naming the rule, and that rule tags the stack as its layers (base width 48, width 80:
    m = 5/3)."""
    with pytest.raises(ValueError) as err:
        P.infer_tags(model(48), model(80), base_width=48, width=80, layout=layout)
    msg = str(err.value)
    assert f"add rules={{{rule!r}: 'stacked'}}" in msg and "a stack of" in msg and "\n" not in msg, msg
    tags = kinds(P.infer_tags(model(48), model(80), base_width=48, width=80, layout=layout,
                              rules={rule: "stacked"}))
    name, want = fixed
    assert tags[name] == want
    assert all(kind[0] in ("vector", "scalar") for path, kind in tags.items() if path.endswith(("bias", "scale")))


def test_the_haiku_transformer_example_without_its_rules_is_refused():
    """The untouched Haiku transformer (hk.layer_stack, depth 4) read without its RULES: its attention kernels
    [4, n, n] were hidden with fan-in 4n, every block bias an input layer of fan-in 4. Now refused, naming '^blocks/'
    (the example's own rule)."""
    from param_helpers import example

    m = example("haiku_transformer")
    with pytest.raises(ValueError, match=r"a stack of 4 layers\? .*rules=\{'\^blocks/': 'stacked'\}"):
        P.infer_tags_from(lambda w: jax.eval_shape(lambda k: m.init(k, w, 4), jax.random.key(0)), base_width=64,
                          width=96)


def conv_nets(n: int) -> dict:
    """Leaves that lead with a fixed axis but are no stack: Linen Conv1D kernels [3, c, n] (+ bias [n]), a Linear
    from 3 features [3, n], an embedding [3, n] alone in its module, a ViT's cls token [1, 1, n] and position table
    [1, 17, n] at the top, Flax attention at 4 fixed heads (query bias [4, d], out kernel [4, d, n], d = n / 4)."""
    return {"conv_in": {"kernel": s(3, 3, n), "bias": s(n)}, "conv": {"kernel": s(3, n, n), "bias": s(n)},
            "xyz": {"kernel": s(3, n), "bias": s(n)}, "embed": {"embedding": s(3, n)},
            "cls": s(1, 1, n), "pos": s(1, 17, n),
            "q": {"kernel": s(n, 4, n // 4), "bias": s(4, n // 4)}, "out": {"kernel": s(4, n // 4, n), "bias": s(n)},
            "head": {"kernel": s(n, 3), "bias": s(3)}}


@pytest.mark.parametrize("depth", [None, 1, 2])
def test_leaves_that_lead_with_a_fixed_axis_but_are_no_stack_are_tagged(depth):
    """None of these is refused: a conv kernel [3, n, n] has a 1-D bias, an embedding [3, n] no kernel led by 3 in a
    module of its own, and a leading axis of size 1 changes no fan. At depth=1 (coord_check's default) the cls token
    and the position table were refused as 'a stack of layers' (leading axis of the depth's size 1)."""
    depths = {} if depth is None else dict(depth=depth, base_depth=1)
    tags = kinds(P.infer_tags(conv_nets(48), conv_nets(80), base_width=48, width=80,
                              rules={"^q/": "out_axes=2"}, **depths))
    assert tags["conv/kernel"] == ("hidden", 240, 80) and tags["conv_in/kernel"] == ("input", 9, 80)
    assert tags["xyz/kernel"] == ("input", 3, 80) and tags["embed/embedding"] == ("input", 3, 80)
    assert tags["cls"] == ("input", 1, 80) and tags["pos"] == ("input", 17, 80)
    assert tags["q/bias"] == ("vector", 1, 80) and tags["out/kernel"] == ("hidden", 80, 80)


def eqx_cnn(n: int) -> dict:
    """Equinox (out_in): Conv2d(3, n, 3), Conv2d(n, n, 3), Conv1d(n, n, 5) with biases [out, 1, 1] / [out, 1], a
    Linear(1, n) (weight [n, 1], bias [n]) and a 1x1 readout Conv2d(n, 10) (weight [10, n, 1, 1], bias [10, 1, 1])."""
    return {"c0": {"weight": s(n, 3, 3, 3), "bias": s(n, 1, 1)}, "c1": {"weight": s(n, n, 3, 3), "bias": s(n, 1, 1)},
            "c2": {"weight": s(n, n, 5), "bias": s(n, 1)}, "lin": {"weight": s(n, 1), "bias": s(n)},
            "head": {"weight": s(10, n, 1, 1), "bias": s(10, 1, 1)}}


def test_an_equinox_conv_bias_is_its_layers_bias():
    """Equinox stores a Conv's bias [out, 1, 1]; under out_in it read as an input layer of fan-in 1, so AdamW decayed
    it (wd_mult 1, where a Linear's bias [out] has 0) and muon_io orthogonalised it. Now vector like the Linear
    bias, at every conv (widths 40 -> 104); the readout's [10, 1, 1] stays the scalar readout bias; a Linear from
    1 feature keeps an input weight [n, 1]; a kind rule still makes a conv bias input."""
    tags = P.infer_tags(eqx_cnn(40), eqx_cnn(104), base_width=40, width=104, layout="out_in")
    got = kinds(tags)
    for conv in ("c0", "c1", "c2"):
        assert got[f"{conv}/bias"] == ("vector", 1, 104), conv
        assert P.get("mup").wd_mult(tags[conv]["bias"]) == 0.0
    assert got["c1/weight"] == ("hidden", 936, 104) and got["lin/weight"] == ("input", 1, 104)
    assert (tags["head"]["bias"].kind, tags["head"]["bias"].role) == ("scalar", "readout_bias")
    ruled = P.infer_tags(eqx_cnn(40), eqx_cnn(104), base_width=40, width=104, layout="out_in",
                         rules={"^c1/bias$": "input"})
    assert ruled["c1"]["bias"].kind == "input"


def test_a_stack_marked_stacked_gets_conv_biases_right():
    """A vmapped Equinox Conv2d with its 'stacked' rule: bias [L, n, 1, 1] less the stack axis is [n, 1, 1], a
    vector like the unstacked conv's (it was input, fan-in 1)."""
    tags = P.infer_tags(eqx_vmapped_conv(24, 4), eqx_vmapped_conv(56, 4), base_width=24, width=56, layout="out_in",
                        rules={"^blocks/": "stacked"})
    assert kinds(tags) == {"blocks/bias": ("vector", 1, 56), "blocks/weight": ("hidden", 504, 56)}


def test_at_a_depth_the_size_of_a_kernel_axis_layers_with_biases_are_no_stack():
    """Given depth=3, a Linen Conv's kernel [3, 3, n, n] (beside its bias [n]) and a Dense from 3 features [3, n]
    were refused as 'a stack of layers' (leading axis of the depth's size), and at depth 4 an Equinox readout
    [4 classes, n] under out_in; now a leaf led by the depth's size is a stack only when every leaf of its module is
    (a bias-free stacked kernel still is, and names the rule)."""
    net = {48: {"conv": {"kernel": s(3, 3, 48, 48), "bias": s(48)}, "rgb": {"kernel": s(3, 48), "bias": s(48)}},
           80: {"conv": {"kernel": s(3, 3, 80, 80), "bias": s(80)}, "rgb": {"kernel": s(3, 80), "bias": s(80)}}}
    tags = kinds(P.infer_tags(net[48], net[80], base_width=48, width=80, depth=3, base_depth=1))
    assert tags["conv/kernel"] == ("hidden", 720, 80) and tags["rgb/kernel"] == ("input", 3, 80)
    head = {n: {"head": {"weight": s(4, n), "bias": s(4)}} for n in (48, 80)}
    tags = kinds(P.infer_tags(head[48], head[80], base_width=48, width=80, depth=4, base_depth=1, layout="out_in"))
    assert tags["head/weight"] == ("output", 80, 4)
    bare = {n: {"blocks": {"kernel": s(4, n, n)}} for n in (48, 80)}
    with pytest.raises(ValueError, match=r"'blocks/kernel' \(4, 80, 80\): its leading axis has the depth's size 4"):
        P.infer_tags(bare[48], bare[80], base_width=48, width=80, depth=4, base_depth=1)


def haiku_nchw(n: int) -> dict:
    """Real Haiku shapes: hk.Conv2D(n, 3, data_format="NCHW") stores its bias [n, 1, 1] (in_out); a 1x1 Conv2D to
    one channel (w [1, 1, n, 1]) and an hk.Linear(1) (w [n, 1]) end in one output."""
    import haiku as hk

    def net(x):
        h = hk.Conv2D(n, 3, data_format="NCHW", name="stem")(x)
        h = hk.Conv2D(n, 3, data_format="NCHW", name="conv")(h)
        return hk.Conv2D(1, 1, name="seg")(h.transpose(0, 2, 3, 1)), hk.Linear(1, name="reg")(h.mean((2, 3)))

    return jax.eval_shape(hk.transform(net).init, jax.random.key(0), jnp.ones((1, 3, 8, 8)))


def test_a_haiku_nchw_conv_bias_is_no_output_layer():
    """Haiku's NCHW Conv2D bias [n, 1, 1] under in_out read as an output layer of fan-in n: under muP its init
    x m^-1/2 and Adam LR x m^-1 (0.36 and 0.13 at m = 7.5, widths 16 -> 120), as a readout's. Now vector, as the
    NHWC conv's bias [n] is; the one-output readouts [1, 1, n, 1] and [n, 1] stay output."""
    tree = P.infer_tags(haiku_nchw(16), haiku_nchw(120), base_width=16, width=120)
    tags = kinds(tree)
    assert tags["stem/b"] == tags["conv/b"] == ("vector", 1, 120)
    assert tags["conv/w"] == ("hidden", 1080, 120) and tags["stem/w"] == ("input", 27, 120)
    assert tags["seg/w"] == tags["reg/w"] == ("output", 120, 1)
    free = P.multiplier_free(P.get("mup"), tree)
    assert float(free.lr_mult(tree["conv"]["b"])) == float(free.init_factor(tree["conv"]["b"])) == 1.0


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


def test_a_stack_marked_on_its_kernels_alone_is_refused_for_its_biases():
    """rules={'/kernel$': 'stacked'} on Linen's scan marks the kernels [6, n, n] but leaves their biases and the
    LayerNorm [6, n] read as input layers of fan-in 6, silently; now the same one line names the blocks' module."""
    with pytest.raises(ValueError, match=r"'params/ScanBlock_0/Dense_0/bias' \(6, 80\) .* rules=\{'\^params/"
                                         r"ScanBlock_0/': 'stacked'\}"):
        P.infer_tags(linen_scan(48), linen_scan(80), base_width=48, width=80,
                     rules={"^params/ScanBlock_0/.*/kernel$": "stacked"})


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


def test_a_vector_rule_tags_a_gain_stored_over_size_1_axes():
    """Haiku's NCHW BatchNorm scale and offset [1, C, 1, 1] read (in_out) as output layers of fan-in C, and no rule
    could say otherwise: 'vector' was 'a kind the shapes contradict'. A vector rule on a leaf whose axes but the
    width one have size 1 now makes it a vector of fan-in 1 and fan-out C (widths 24 -> 56); on a real layer it is
    still refused."""
    base, wide = ({"bn": {"scale": s(1, n, 1, 1), "offset": s(1, n, 1, 1)}, "head": {"w": s(n, 5), "b": s(5)}}
                  for n in (24, 56))
    tags = kinds(P.infer_tags(base, wide, base_width=24, width=56, rules={"^bn/": "vector"}))
    assert tags["bn/scale"] == tags["bn/offset"] == ("vector", 1, 56)
    with pytest.raises(ValueError, match="'head/w' .* is output by its shapes"):
        P.infer_tags(base, wide, base_width=24, width=56, rules={"^(bn|head)/": "vector"})
