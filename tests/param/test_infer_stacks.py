"""Stacks of layers in zoo.param.infer_tags (Linen's nn.scan, Haiku's layer_stack, Equinox's filter_vmap): an
unmarked stack is refused in one line naming the 'stacked' rule that tags it, and leaves that only look like a stack
(a conv kernel, a Dense from 3 features, a table, a leading axis of the depth's size) are tagged as the layers they
are."""

from __future__ import annotations

import jax
import pytest
from param_helpers import kinds, s, tagged

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


def conv_nets(n: int) -> dict:
    """Leaves that lead with a fixed axis but are no stack: Linen Conv1D kernels [3, c, n] (+ bias [n]), a Linear
    from 3 features [3, n], an embedding [3, n] alone in its module, a ViT's cls token [1, 1, n] and position table
    [1, 17, n] at the top, Flax attention at 4 fixed heads (query bias [4, d], out kernel [4, d, n], d = n / 4)."""
    return {"conv_in": {"kernel": s(3, 3, n), "bias": s(n)}, "conv": {"kernel": s(3, n, n), "bias": s(n)},
            "xyz": {"kernel": s(3, n), "bias": s(n)}, "embed": {"embedding": s(3, n)},
            "cls": s(1, 1, n), "pos": s(1, 17, n),
            "q": {"kernel": s(n, 4, n // 4), "bias": s(4, n // 4)}, "out": {"kernel": s(4, n // 4, n), "bias": s(n)},
            "head": {"kernel": s(n, 3), "bias": s(3)}}


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


def test_a_stack_marked_on_its_kernels_alone_is_refused_for_its_biases():
    """rules={'/kernel$': 'stacked'} on Linen's scan marks the kernels [6, n, n] but leaves their biases and the
    LayerNorm [6, n] read as input layers of fan-in 6, silently; now the same one line names the blocks' module."""
    with pytest.raises(ValueError, match=r"'params/ScanBlock_0/Dense_0/bias' \(6, 80\) .* rules=\{'\^params/"
                                         r"ScanBlock_0/': 'stacked'\}"):
        P.infer_tags(linen_scan(48), linen_scan(80), base_width=48, width=80,
                     rules={"^params/ScanBlock_0/.*/kernel$": "stacked"})


def test_the_haiku_transformer_example_without_its_rules_is_refused():
    """The untouched Haiku transformer (hk.layer_stack, depth 4) read without its RULES: its attention kernels
    [4, n, n] were hidden with fan-in 4n, every block bias an input layer of fan-in 4. Now refused, naming '^blocks/'
    (the example's own rule)."""
    from param_helpers import example

    m = example("haiku_transformer")
    with pytest.raises(ValueError, match=r"a stack of 4 layers\? .*rules=\{'\^blocks/': 'stacked'\}"):
        P.infer_tags_from(lambda w: jax.eval_shape(lambda k: m.init(k, w, 4), jax.random.key(0)), base_width=64,
                          width=96)


def test_a_stack_marked_stacked_gets_conv_biases_right():
    """A vmapped Equinox Conv2d with its 'stacked' rule: bias [L, n, 1, 1] less the stack axis is [n, 1, 1], a
    vector like the unstacked conv's (it was input, fan-in 1)."""
    tags = P.infer_tags(eqx_vmapped_conv(24, 4), eqx_vmapped_conv(56, 4), base_width=24, width=56, layout="out_in",
                        rules={"^blocks/": "stacked"})
    assert kinds(tags) == {"blocks/bias": ("vector", 1, 56), "blocks/weight": ("hidden", 504, 56)}


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


def test_at_depth_3_a_bias_free_conv_and_a_bias_free_dense_from_3_features_are_layers():
    """A ResNet's bias-free Conv [3, 3, n, n] (its BatchNorm in a module of its own) and a bias-free Dense from RGB
    [3, n], given depth=3, were refused as stacks of 3 layers, the line suggesting 'stacked' (which reads the conv as
    a stack of [3, n, n] kernels, fan-in 3n instead of 9n) or 'input' (a kind the conv's shapes contradict). Neither
    may stack layers: a stacked Dense kernel has 3 axes, and a 2-axis leaf named as a Flax or Haiku weight is one."""
    def resnet(n):
        return {"params": {"Dense_0": {"kernel": s(3, n)}, "Conv_0": {"kernel": s(3, 3, 3, n)},
                           "Block_0": {"Conv_0": {"kernel": s(3, 3, n, n)},
                                       "BatchNorm_0": {"scale": s(n), "bias": s(n)}},
                           "Conv_1": {"kernel": s(3, 3, n, n)}, "Dense_1": {"kernel": s(n, 10)}}}

    tags = tagged(resnet, 24, 40, depth=3, base_depth=1)
    assert tags["params/Block_0/Conv_0/kernel"] == tags["params/Conv_1/kernel"] == ("hidden", 360, 40)
    assert tags["params/Dense_0/kernel"] == ("input", 3, 40) and tags["params/Conv_0/kernel"] == ("input", 27, 40)


@pytest.mark.parametrize("leaf,rank,layout,fixes", [
    ("blocks/kernel", 3, "in_out", {"stacked": ("hidden", 56, 56), "hidden": ("hidden", 168, 56)}),
    ("stack/b", 2, "in_out", {"stacked": ("vector", 1, 56), "input": ("input", 3, 56)}),
    ("blocks/weight", 3, "out_in", {"stacked": ("hidden", 56, 56)}),
])
def test_a_leaf_led_by_the_depth_that_shapes_cannot_decide_names_both_rules(leaf, rank, layout, fixes):
    """A bias-free [3, n, n] at depth 3 (a stack of Dense kernels or a conv1d kernel of size 3) and a lone bias
    [3, n] stay refused, the line naming both rules, 'stacked' and the kind the shapes give (it said "its kind, e.g.
    'input'" for a hidden kernel). Under out_in [3, n, n] fits no layer (two width axes in the fan-in): only
    'stacked'. Each rule it names then tags the leaf."""
    def model(n):
        module, name = leaf.split("/")
        return {module: {name: s(3, *[n] * (rank - 1))}, "head": {"w": s(n, 10)}}

    exact = f"^{leaf}$"
    named = [f"rules={{{exact!r}: {kind!r}}}" for kind in fixes]  # 'stacked', then the kind of one layer
    with pytest.raises(ValueError) as err:
        tagged(model, 32, 56, depth=3, base_depth=1, layout=layout)
    msg = str(err.value)
    assert f"its leading axis has the depth's size 3; is it a stack of layers? add {named[0]}" in msg, msg
    assert msg.endswith(named[-1]) and "\n" not in msg, msg
    for kind, want in fixes.items():
        assert tagged(model, 32, 56, depth=3, base_depth=1, layout=layout, rules={exact: kind})[leaf] == want


def test_the_stack_rule_named_for_an_unmarked_stack_leaves_a_readout_of_as_many_classes_out():
    """An Equinox model whose vmapped blocks (Linear weight [3, n, n], biases and LayerNorm [3, n]) are as many as its
    classes (readout weight [3, n], out_in): the refusal named rules={'^(blocks/lin/bias|...|head/weight)$':
    'stacked'}, which marks the readout a stack of 3 vectors [n] (its fan-in n read as a fan-out: vector, not
    output). The rule now spans the stack's module only, '^blocks/', and tags the readout output, fan-in n."""
    def model(n):
        return {"embed": {"weight": s(n, 5), "bias": s(n)}, "head": {"weight": s(3, n), "bias": s(3)},
                "blocks": {"lin": {"weight": s(3, n, n), "bias": s(3, n)}, "ln": {"weight": s(3, n), "bias": s(3, n)}}}

    with pytest.raises(ValueError) as err:
        tagged(model, 40, 88, layout="out_in")
    assert "a stack of 3 layers? Its axis would be read as a fan; add rules={'^blocks/': 'stacked'}" in str(err.value)
    tags = tagged(model, 40, 88, layout="out_in", rules={"^blocks/": "stacked"})
    assert tags["head/weight"] == ("output", 88, 3) and tags["blocks/lin/weight"] == ("hidden", 88, 88)
    assert tags["blocks/ln/weight"] == tags["blocks/lin/bias"] == ("vector", 1, 88)


def test_an_equinox_stack_of_one_layer_names_the_stacked_rule():
    """eqx.filter_vmap over one block (depth 1, out_in): its Linear weight [1, n, n] fits no layer (both width axes
    in the fan-in) and the line said to add 'out_axes=2' (which reads it as fan-out [1, n], fan-in n: wrong); its
    LayerNorm weight [1, n] would read as an output layer of fan-in n. The line now names the blocks' module as a
    stack, and that rule tags them all (the readout Linear(n, 1) weight [1, n] stays output)."""
    def model(n):
        return {"embed": {"weight": s(n, 5), "bias": s(n)}, "head": {"weight": s(1, n), "bias": s(1)},
                "blocks": {"lin": {"weight": s(1, n, n), "bias": s(1, n)}, "ln": {"weight": s(1, n), "bias": s(1, n)}}}

    needle = (r"^parameter 'blocks/lin/weight' \(\(1, 24, 24\) -> \(1, 60, 60\)\) fits no layer \(out_in\) .* a stack "
              r"of 1 layer\? add rules=\{'\^blocks/': 'stacked'\}$")
    with pytest.raises(ValueError, match=needle):
        tagged(model, 24, 60, layout="out_in", depth=1, base_depth=1)
    tags = tagged(model, 24, 60, layout="out_in", rules={"^blocks/": "stacked"})
    assert tags["blocks/lin/weight"] == ("hidden", 60, 60) and tags["blocks/ln/weight"] == ("vector", 1, 60)
    assert tags["head/weight"] == ("output", 60, 1)


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
