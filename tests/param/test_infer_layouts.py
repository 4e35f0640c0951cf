"""Kernels stored [..., out, in] (Haiku's ConvTranspose, Flax's stores [..., in, out]) in zoo.param.infer_tags: known
by Haiku's module names, refused by their bias where the shapes read the other way, or given by a layout rule; a
Linear read in the other layout than it is stored refused by its bias too."""

from __future__ import annotations

import haiku as hk
import jax
import numpy as np
import optax
import pytest
from param_helpers import flat_tags, haiku_deconvs, haiku_shapes, kinds, s

import zoo.param as P
from zoo.optim import Route


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


def renamed(n: int) -> dict:
    """A transposed conv in a module not named as Haiku names it, from 3 channels to n with its bias."""
    return {"up": {"w": s(3, 3, n, 3), "b": s(n)}, "mid": {"w": s(3, 3, n, n)}}


def test_a_haiku_conv_transpose_without_a_bias_is_read_out_then_in():
    """hk.Conv2DTranspose stores w [kh, kw, out, in]. Without a bias nothing in the shapes told, and infer_tags read
    it [..., in, out]: at widths 12 -> 36 the first layer (3 to n) was tagged output of fan-in 4n = 144 and the last
    (n to 5) input of fan-in 20, swapping their init and LR exponents, without a word. Haiku's module name
    (conv2_d_transpose, _1, _2) now gives the layout spatial_out_in: input (12, 36), hidden (144, 36), output
    (144, 5), as the same layers stored [..., in, out] read."""
    got = flat_tags(P.infer_tags(haiku_shapes(haiku_deconvs, 12, (1, 1, 1, 3)),
                                 haiku_shapes(haiku_deconvs, 36, (1, 1, 1, 3)), base_width=12, width=36))
    assert got == {"conv2_d_transpose/w": ("input", 12, 36, "spatial_out_in", 1),
                   "conv2_d_transpose_1/w": ("hidden", 144, 36, "spatial_out_in", 1),
                   "conv2_d_transpose_2/w": ("output", 144, 5, "spatial_out_in", 1)}


@pytest.mark.parametrize("module,kernel", [(hk.Conv1DTranspose, 3), (hk.Conv3DTranspose, (2, 1, 3))])
def test_every_haiku_conv_transpose_rank_is_recognised(module, kernel):
    """Conv1DTranspose w [k, out, in] and Conv3DTranspose w [2, 1, 3, out, in], from 2 channels to n (n = 6 -> 10,
    an odd ratio): input layers of fan-in 2 * prod(kernel), not output layers of fan-in prod(kernel) * n."""
    def net(x, width):
        return module(width, kernel, with_bias=False)(x)

    x_shape = (1, 4, 2) if module is hk.Conv1DTranspose else (1, 4, 4, 4, 2)
    (name, tag), = flat_tags(P.infer_tags(haiku_shapes(net, 6, x_shape), haiku_shapes(net, 10, x_shape),
                                          base_width=6, width=10)).items()
    assert tag == ("input", 2 * int(np.prod(kernel)), 10, "spatial_out_in", 1), name


def test_the_bias_line_names_the_layout_rule_and_the_rule_reads_the_kernel():
    """A renamed ConvTranspose with a bias is refused by its bias (6a99ee4), but the line said to swap the array's
    axes, which the user's own model cannot; it names the rule now, and the rule (on a bias-free n to n kernel too,
    which reads alike either way but for Muon's matrix) tags them as the layers they are."""
    with pytest.raises(ValueError, match=r"give its layout: rules=\{'\^up/w\$': 'spatial_out_in'\}"):
        P.infer_tags(renamed(8), renamed(20), base_width=8, width=20)
    tags = P.infer_tags(renamed(8), renamed(20), base_width=8, width=20, rules={"^(up|mid)/w$": "spatial_out_in"})
    assert kinds(tags)["up/w"] == ("input", 27, 20) and kinds(tags)["mid/w"] == ("hidden", 180, 20)
    assert Route("spectral", 180, tags["mid"]["w"].layout).matrix_axes((3, 3, 20, 20)) == \
        optax.contrib.MuonDimensionNumbers((-4, -3, -1), -2)


@pytest.mark.parametrize("stored, read", [("out_in", "in_out"), ("in_out", "out_in")])
def test_a_linear_read_the_wrong_way_round_is_refused_by_its_bias(stored, read):
    """An Equinox MLP read in_out (the default), or a Haiku one read out_in: the first layer [n, 3072] was tagged
    output (a readout's init and LR) and the readout [10, n] input, without a word. Each Linear's bias [out] shows
    which axis is the fan-out: one line naming the layer and the layout; read the right way the kinds are right."""
    def mlp(n, layout):
        def w(i: int, o: int) -> jax.ShapeDtypeStruct:
            return s(o, i) if layout == "out_in" else s(i, o)

        return {"l0": {"weight": w(48, n), "bias": s(n)}, "l1": {"weight": w(n, n), "bias": s(n)},
                "l2": {"weight": w(n, 5), "bias": s(5)}}

    with pytest.raises(ValueError, match=rf"parameter 'l0/weight' .* reads as fan-out 48 \({read}\), but its bias "
                                         rf"'l0/bias' has 24 entries.*rules=\{{'\^l0/weight\$': '{stored}'\}}"):
        P.infer_tags(mlp(8, stored), mlp(24, stored), base_width=8, width=24, layout=read)
    tags = kinds(P.infer_tags(mlp(8, stored), mlp(24, stored), base_width=8, width=24, layout=stored))
    assert tags["l0/weight"] == ("input", 48, 24) and tags["l1/weight"] == ("hidden", 24, 24)
    assert tags["l2/weight"] == ("output", 24, 5)


def test_a_kernel_whose_fan_out_no_layout_reads_is_refused_by_its_bias():
    """PyTorch's ConvTranspose2d weight [in, out, kh, kw] read out_in (PyTorch's layout) was tagged with its fans
    swapped (hidden 4n x 2n for n to 2n channels): no layout has the fan-out on axis 1, and its bias [out] shows it
    is there. One line saying so; a bias of no axis's size is not the weight's, and is left alone."""
    def torch_up(n: int) -> dict:
        return {"up": {"weight": s(n, 2 * n, 2, 2), "bias": s(2 * n)}, "fc": {"weight": s(10, 2 * n), "bias": s(10)}}

    with pytest.raises(ValueError, match=r"parameter 'up/weight' \(16, 32, 2, 2\) reads as fan-out 16 \(out_in\), but "
                                         r"its bias 'up/bias' has 32 entries, as its axis 1, where no layout has the "
                                         r"fan-out"):
        P.infer_tags(torch_up(8), torch_up(16), base_width=8, width=16, layout="out_in")
    tags = kinds(P.infer_tags({"lin": {"w": s(8, 24), "b": s(5)}}, {"lin": {"w": s(16, 48), "b": s(5)}},
                              base_width=8, width=16))
    assert tags["lin/w"] == ("hidden", 16, 48) and tags["lin/b"] == ("scalar", 1, 5)
