"""zoo's ViT, built from its recipe (no biases on q, k, v, the exact GELU, LayerNorm eps 1e-5: the model options of
`python train.py --model vit`) at a small size, is aanna0701/SPT_LSA_ViT's plain ViT (models/vit.py, is_SPT=False,
is_LSA=False): its weights map onto that model's state_dict (bench/reference_parity.py's `to_spt_vit`, which refuses a
zoo ViT with q, k, v biases), and with them its logits, loss and gradients equal the reference's forward pass written
here in torch's own functional ops, as the reference defines it (patches flattened row, column, channel; cls token
first, positions added; pre-LN blocks at eps 1e-5, q, k, v from one bias-free to_qkv, softmax(q k^T / sqrt(d)) per
head, the exact GELU; the head on the cls token's LayerNorm).

The comparison can fail: zoo's ViT at the tanh GELU or at LayerNorm eps 1e-6 (its defaults for other uses), with the
same weights, or W_q and W_k swapped in the transplant, moves the logits far beyond its tolerance.

The reference repository is not in CI; the comparison with its own code, at the recipe's size and over optimizer
steps, is `python bench/reference_parity.py --spt-lsa DIR` (docs/reference_parity.md)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
import reference_helpers as helpers
from flax import nnx
from reference_helpers import CLASSES, IMAGE, logit_gap, parity_bench

import zoo.models
import zoo.param

WIDTH, DEPTH, HEAD_DIM, RATIO, PATCH = 32, 2, 8, 2, 4
HEADS = WIDTH // HEAD_DIM
GELU, EPS = "none", 1e-5  # the reference's: nn.GELU() (exact), nn.LayerNorm's default eps


@pytest.fixture(scope="module")
def parity():
    return parity_bench()


@pytest.fixture(scope="module")
def model(parity):
    """The bench's small ViT: the recipe's model options at width 32, depth 2, 16x16 images."""
    model = parity.zoo_model("vit", "small", 0)[0]
    cfg = model.cfg
    assert (cfg.width, cfg.depth, cfg.head_dim, cfg.mlp_ratio, cfg.in_shape, cfg.patch, cfg.num_classes) == (
        WIDTH, DEPTH, HEAD_DIM, RATIO, (IMAGE, IMAGE, 3), PATCH, CLASSES)
    return model


def spt_vit_logits(sd, x):
    """SPT_LSA_ViT's ViT (is_SPT=False, is_LSA=False, eval mode) in torch's functional ops, from its state_dict; x
    (B, C, H, W)."""
    import torch
    import torch.nn.functional as F

    def ln(z, name):
        return F.layer_norm(z, z.shape[-1:], sd[f"{name}.weight"], sd[f"{name}.bias"], EPS)

    def linear(z, name, bias=True):
        return F.linear(z, sd[f"{name}.weight"], sd[f"{name}.bias"] if bias else None)

    b, c, h, w = x.shape  # 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'
    patches = x.unflatten(2, (h // PATCH, PATCH)).unflatten(4, (w // PATCH, PATCH)).permute(0, 2, 4, 3, 5, 1)
    t = linear(patches.flatten(3).flatten(1, 2), "to_patch_embedding.1")
    t = torch.cat([sd["cls_token"].expand(b, -1, -1), t], 1) + sd["pos_embedding"]
    for i in range(DEPTH):
        p = f"transformer.layers.{i}."
        qkv = linear(ln(t, p + "0.norm"), p + "0.fn.to_qkv", bias=False).chunk(3, -1)
        q, k, v = (a.unflatten(-1, (HEADS, -1)).transpose(1, 2) for a in qkv)
        a = torch.softmax(q @ k.transpose(-1, -2) * HEAD_DIM ** -0.5, -1) @ v
        t = t + linear(a.transpose(1, 2).flatten(2), p + "0.fn.to_out.0")
        t = t + linear(F.gelu(linear(ln(t, p + "1.norm"), p + "1.fn.net.0"), approximate=GELU), p + "1.fn.net.3")
    return linear(ln(t[:, 0], "mlp_head.0"), "mlp_head.1")


@pytest.fixture(scope="module")
def zoo_side(parity, model):
    return helpers.zoo_side(model, parity.to_spt_vit)


def reference_side(sd):
    return helpers.reference_side(sd, spt_vit_logits)


def test_weights_map_onto_the_references_state_dict(parity, model):
    sd = parity.to_spt_vit(model)
    block = ("0.norm.weight", "0.norm.bias", "0.fn.to_qkv.weight", "0.fn.to_out.0.weight", "0.fn.to_out.0.bias",
             "1.norm.weight", "1.norm.bias", "1.fn.net.0.weight", "1.fn.net.0.bias", "1.fn.net.3.weight",
             "1.fn.net.3.bias")
    names = {"to_patch_embedding.1.weight", "to_patch_embedding.1.bias", "cls_token", "pos_embedding",
             "mlp_head.0.weight", "mlp_head.0.bias", "mlp_head.1.weight", "mlp_head.1.bias"} | {
        f"transformer.layers.{i}.{n}" for i in range(DEPTH) for n in block}
    assert set(sd) == names
    tokens, n = (IMAGE // PATCH) ** 2, WIDTH
    assert sd["pos_embedding"].shape == (1, tokens + 1, n) and sd["cls_token"].shape == (1, 1, n)
    assert sd["to_patch_embedding.1.weight"].shape == (n, PATCH * PATCH * 3)
    assert sd["transformer.layers.1.1.fn.net.0.weight"].shape == (RATIO * n, n)
    qkv = sd["transformer.layers.1.0.fn.to_qkv.weight"]
    assert qkv.shape == (3 * n, n) and np.array_equal(qkv[n:2 * n], model.stack.blocks.attn.k.kernel[...][1])
    assert sum(v.size for v in sd.values()) == sum(v.size for v in jax.tree.leaves(nnx.state(model, nnx.Param)))
    with_biases = zoo.models.create("vit", dataclasses.replace(model.cfg, qkv_bias=True), zoo.param.get("sp"),
                                    nnx.Rngs(0))
    with pytest.raises(ValueError, match="no bias"):
        parity.to_spt_vit(with_biases)


def test_logits_loss_and_gradients_are_the_references(parity, model, zoo_side):
    pytest.importorskip("torch", reason="the bench extra: pip install -e '.[bench]'")
    logits, loss, grads = zoo_side
    ref_logits, ref_loss, ref_grads = reference_side(parity.to_spt_vit(model))
    assert logit_gap(logits, ref_logits) <= 1e-5
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert set(grads) == set(ref_grads)
    for name, g in ref_grads.items():
        assert np.linalg.norm(grads[name] - g) <= 1e-4 * np.linalg.norm(g), name


@pytest.mark.parametrize("option, least", [(("activation", "gelu"), 5e-5), (("norm_eps", 1e-6), 1e-3)],
                         ids=["tanh-gelu", "eps-1e-6"])
def test_zoo_at_its_other_gelu_or_eps_is_not_the_reference(parity, model, option, least):
    """zoo's ViT with the same weights but the tanh GELU or LayerNorm eps 1e-6 (its defaults for other uses): the
    logits move by at least `least` of their largest (measured: 1.8e-4 for the GELU, 3.4e-3 for the epsilon, whose
    effect is largest on the cls token's final LayerNorm, which sees a small variance: zoo's cls token and positions
    start at std 0.02), against 7.4e-7 with the recipe's options."""
    pytest.importorskip("torch", reason="the bench extra: pip install -e '.[bench]'")
    logits = helpers.logits_at(model, option, parity.to_spt_vit)
    assert logit_gap(logits, reference_side(parity.to_spt_vit(model))[0]) >= least


def test_a_swapped_transplant_is_not_the_reference(parity, model, zoo_side):
    """W_q and W_k swapped in every to_qkv: the logits move by more than 0.1 of their largest (measured: 1.5)."""
    pytest.importorskip("torch", reason="the bench extra: pip install -e '.[bench]'")
    sd = parity.to_spt_vit(model)
    for i in range(DEPTH):
        w = sd[f"transformer.layers.{i}.0.fn.to_qkv.weight"]
        sd[f"transformer.layers.{i}.0.fn.to_qkv.weight"] = np.concatenate([w[WIDTH:2 * WIDTH], w[:WIDTH],
                                                                           w[2 * WIDTH:]])
    assert logit_gap(zoo_side[0], reference_side(sd)[0]) >= 0.1
