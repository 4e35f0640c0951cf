"""Biases and gains in zoo.param.infer_tags: stored over size-1 axes (Equinox's conv bias [out, 1, 1], Haiku's NCHW
conv bias and BatchNorm [1, C, 1, 1], a stack of one layer's gain) they are vectors, as a bias [n] is, in either
layout; a weight to one output beside them stays an output layer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from param_helpers import kinds, s, tagged

import zoo.param as P


def eqx_cnn(n: int) -> dict:
    """Equinox (out_in): Conv2d(3, n, 3), Conv2d(n, n, 3), Conv1d(n, n, 5) with biases [out, 1, 1] / [out, 1], a
    Linear(1, n) (weight [n, 1], bias [n]) and a 1x1 readout Conv2d(n, 10) (weight [10, n, 1, 1], bias [10, 1, 1])."""
    return {"c0": {"weight": s(n, 3, 3, 3), "bias": s(n, 1, 1)}, "c1": {"weight": s(n, n, 3, 3), "bias": s(n, 1, 1)},
            "c2": {"weight": s(n, n, 5), "bias": s(n, 1)}, "lin": {"weight": s(n, 1), "bias": s(n)},
            "head": {"weight": s(10, n, 1, 1), "bias": s(10, 1, 1)}}


def haiku_nchw(n: int) -> dict:
    """Real Haiku shapes: hk.Conv2D(n, 3, data_format="NCHW") stores its bias [n, 1, 1] (in_out); a 1x1 Conv2D to
    one channel (w [1, 1, n, 1]) and an hk.Linear(1) (w [n, 1]) end in one output."""
    import haiku as hk

    def net(x):
        h = hk.Conv2D(n, 3, data_format="NCHW", name="stem")(x)
        h = hk.Conv2D(n, 3, data_format="NCHW", name="conv")(h)
        return hk.Conv2D(1, 1, name="seg")(h.transpose(0, 2, 3, 1)), hk.Linear(1, name="reg")(h.mean((2, 3)))

    return jax.eval_shape(hk.transform(net).init, jax.random.key(0), jnp.ones((1, 3, 8, 8)))


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


def haiku_bn(n: int, nchw: bool = True) -> dict:
    """Haiku conv net with hk.BatchNorm in a module of its own: scale and offset [1, C, 1, 1] (NCHW) or [1, 1, 1, C]
    (NHWC), as Haiku 0.0.17 stores them; hk.GroupNorm NCHW stores [C, 1, 1]."""
    gain = s(1, n, 1, 1) if nchw else s(1, 1, 1, n)
    return {"conv2_d": {"w": s(3, 3, 3, n)}, "batch_norm": {"scale": gain, "offset": gain},
            "group_norm": {"scale": s(n, 1, 1), "offset": s(n, 1, 1)}, "linear": {"w": s(n, 10), "b": s(10)}}


@pytest.mark.parametrize("nchw", [True, False])
def test_haiku_batchnorm_gains_are_vectors_by_their_names(nchw):
    """Haiku's BatchNorm scale and offset [1, C, 1, 1] (NCHW) read as output layers of fan-in C (under muP at m = 9/5:
    init x m^-1/2 = 0.745, Adam LR x m^-1 = 0.556), [1, 1, 1, C] (NHWC) as input layers of fan-in 1 (AdamW decayed
    them, wd_mult 1 where a bias has 0), unless a 'vector' rule was given: no weight shares their module. Their names
    say what they are."""
    tags = tagged(lambda n: haiku_bn(n, nchw))
    for leaf in ("batch_norm/scale", "batch_norm/offset", "group_norm/scale", "group_norm/offset"):
        assert tags[leaf] == ("vector", 1, 72), (leaf, tags[leaf])
    assert tags["conv2_d/w"] == ("input", 27, 72) and tags["linear/w"] == ("output", 72, 10)


def test_a_stack_of_one_layer_has_its_gain_read_as_a_vector():
    """hk.layer_stack(1) (or nn.scan of length 1) at depth 1: its RMSNorm scale [1, n] read as an input layer of
    fan-in 1. A leading axis of size 1 changes no fan, so its kernels [1, n, 3n] read right; the gain does too now.
    A Linear from 1 feature [1, n] (named w) stays input, as a ViT's cls token [1, 1, n]."""
    def model(n):
        return {"embed": {"embeddings": s(30, n)}, "blocks/~/norm": {"scale": s(1, n)},
                "blocks/~/up": {"w": s(1, n, 3 * n)}, "blocks/~/down": {"w": s(1, 3 * n, n)},
                "time": {"w": s(1, n)}, "cls": s(1, 1, n), "head": {"w": s(n, 30)}}

    tags = tagged(model, 24, 56, depth=1, base_depth=1)
    assert tags["blocks/~/norm/scale"] == ("vector", 1, 56)
    assert tags["blocks/~/down/w"] == ("hidden", 168, 56)
    assert tags["time/w"] == ("input", 1, 56) and tags["cls"] == ("input", 1, 56)


def test_a_bias_named_so_over_size_one_axes_is_a_vector_but_a_readout_to_one_output_is_not():
    """A bias [n, 1] (a NCHW 1-D conv's, in a module of its own) read as an output layer of fan-in n; the readout to
    one output w [n, 1] beside it stays output (a named weight, not a bias)."""
    tags = tagged(lambda n: {"bias_only": {"bias": s(n, 1)}, "head": {"w": s(n, 1)}}, 40, 100)
    assert tags["bias_only/bias"] == ("vector", 1, 100) and tags["head/w"] == ("output", 100, 1)
