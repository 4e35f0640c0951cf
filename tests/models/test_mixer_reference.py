"""zoo's MLP-Mixer, built from its recipe (the exact GELU, LayerNorm eps 1e-5: the model options of
`python train.py --model mixer`) at a small size, is omihub777/MLP-Mixer-CIFAR's (mlp_mixer.py's MLPMixer, no cls
token): its weights map onto that model's state_dict (bench/reference_parity.py's `to_mixer_cifar`), and with them its
logits, loss and gradients equal the reference's forward pass written here in torch's own functional ops, as the
reference defines it (the patch embedding a Conv2d of stride p, tokens in raster order; pre-LN token mixing as a
Conv1d of kernel size 1 over the tokens, then the channel MLP, LayerNorms at eps 1e-5, the exact GELU; the head on the
mean over tokens of the last LayerNorm).

The comparison can fail: zoo's Mixer at the tanh GELU or at LayerNorm eps 1e-6 (its defaults for other uses), with
the same weights, or the patch Conv2d's rows and columns swapped in the transplant, moves the logits: the GELU and
the swap far beyond the tolerance, the epsilon (whose effect on the Mixer is small) 40 times the gap at the recipe's
options.

The token-mixing output bias (mlp1.fc2.bias) adds one constant to every channel of its token, which the LayerNorm
over the channels on every path after it removes: its gradient is 0 on both sides but for rounding, so it is
checked against the whole gradient's norm, not its own.

The reference repository is not in CI; the comparison with its own code, at the recipe's size and over optimizer
steps, is `python bench/reference_parity.py --mixer-cifar DIR` (docs/reference_parity.md)."""

from __future__ import annotations

import numpy as np
import pytest
import reference_helpers as helpers
from reference_helpers import CLASSES, IMAGE, logit_gap, parity_bench

WIDTH, DEPTH, TOKEN_DIM, RATIO, PATCH = 32, 2, 16, 4, 4
TOKENS = (IMAGE // PATCH) ** 2
GELU, EPS = "none", 1e-5  # the reference's: F.gelu (exact), nn.LayerNorm's default eps
VANISHING = "mlp1.fc2.bias"


@pytest.fixture(scope="module")
def parity():
    return parity_bench()


@pytest.fixture(scope="module")
def model(parity):
    """The bench's small Mixer: the recipe's model options at width 32, depth 2, 16x16 images."""
    model = parity.zoo_model("mixer", "small", 0)[0]
    cfg = model.cfg
    assert (cfg.width, cfg.depth, cfg.token_dim, cfg.mlp_ratio, cfg.in_shape, cfg.patch, cfg.num_classes) == (
        WIDTH, DEPTH, TOKEN_DIM, RATIO, (IMAGE, IMAGE, 3), PATCH, CLASSES)
    return model


def mixer_cifar_logits(sd, x):
    """MLP-Mixer-CIFAR's MLPMixer (no cls token, drop_p 0) in torch's functional ops, from its state_dict; x
    (B, C, H, W)."""
    import torch.nn.functional as F

    def ln(z, name):
        return F.layer_norm(z, z.shape[-1:], sd[f"{name}.weight"], sd[f"{name}.bias"], EPS)

    def linear(z, name):
        return F.linear(z, sd[f"{name}.weight"], sd[f"{name}.bias"])

    def conv1d(z, name):  # over the tokens: (B, S, C) is Conv1d's (batch, channels, length)
        return F.conv1d(z, sd[f"{name}.weight"], sd[f"{name}.bias"])

    t = F.conv2d(x, sd["patch_emb.0.weight"], sd["patch_emb.0.bias"], stride=PATCH)
    t = t.flatten(2).transpose(1, 2)  # 'b d h w -> b (h w) d'
    for i in range(DEPTH):
        p = f"mixer_layers.{i}."
        t = t + conv1d(F.gelu(conv1d(ln(t, p + "mlp1.ln"), p + "mlp1.fc1"), approximate=GELU), p + "mlp1.fc2")
        t = t + linear(F.gelu(linear(ln(t, p + "mlp2.ln"), p + "mlp2.fc1"), approximate=GELU), p + "mlp2.fc2")
    return linear(ln(t, "ln").mean(1), "clf")


@pytest.fixture(scope="module")
def zoo_side(parity, model):
    return helpers.zoo_side(model, parity.to_mixer_cifar)


def reference_side(sd):
    return helpers.reference_side(sd, mixer_cifar_logits)


def test_weights_map_onto_the_references_state_dict(parity, model):
    sd = parity.to_mixer_cifar(model)
    block = [f"mlp{j}.{part}.{kind}" for j in (1, 2) for part in ("ln", "fc1", "fc2") for kind in ("weight", "bias")]
    names = {"patch_emb.0.weight", "patch_emb.0.bias", "ln.weight", "ln.bias", "clf.weight", "clf.bias"} | {
        f"mixer_layers.{i}.{n}" for i in range(DEPTH) for n in block}
    assert set(sd) == names
    n = WIDTH
    assert sd["patch_emb.0.weight"].shape == (n, 3, PATCH, PATCH)
    assert sd["mixer_layers.1.mlp1.fc1.weight"].shape == (TOKEN_DIM, TOKENS, 1)
    assert sd["mixer_layers.1.mlp1.fc2.weight"].shape == (TOKENS, TOKEN_DIM, 1)
    assert sd["mixer_layers.1.mlp2.fc1.weight"].shape == (RATIO * n, n) and sd["clf.weight"].shape == (CLASSES, n)
    kernel = np.asarray(model.embed.kernel[...])  # (n, p p C): row, column, channel
    o, c, i, j = 5, 2, 1, 3
    assert sd["patch_emb.0.weight"][o, c, i, j] == kernel[o, (i * PATCH + j) * 3 + c]
    assert np.array_equal(sd["mixer_layers.1.mlp1.fc2.weight"][..., 0],
                          model.stack.blocks.token_mlp.fc2.kernel[...][1])


def test_logits_loss_and_gradients_are_the_references(parity, model, zoo_side):
    pytest.importorskip("torch", reason="the bench extra: pip install -e '.[bench]'")
    logits, loss, grads = zoo_side
    ref_logits, ref_loss, ref_grads = reference_side(parity.to_mixer_cifar(model))
    assert logit_gap(logits, ref_logits) <= 1e-5
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert set(grads) == set(ref_grads)
    total = np.sqrt(sum(np.sum(np.square(g)) for g in ref_grads.values()))
    for name, g in ref_grads.items():
        if name.endswith(VANISHING):  # 0 but for rounding, on both sides
            assert max(np.linalg.norm(grads[name]), np.linalg.norm(g)) <= 1e-6 * total, name
        else:
            assert np.linalg.norm(grads[name] - g) <= 1e-4 * np.linalg.norm(g), name


@pytest.mark.parametrize("option, least", [(("activation", "gelu"), 3e-5), (("norm_eps", 1e-6), 2e-6)],
                         ids=["tanh-gelu", "eps-1e-6"])
def test_zoo_at_its_other_gelu_or_eps_is_not_the_reference(parity, model, option, least):
    """zoo's Mixer with the same weights but the tanh GELU or LayerNorm eps 1e-6 (its defaults for other uses): the
    logits move by at least `least` of their largest (measured: 3.1e-4 for the GELU; 8.2e-6 for the epsilon, under
    the 1e-5 tolerance but 40 times the 2.0e-7 with the recipe's options)."""
    pytest.importorskip("torch", reason="the bench extra: pip install -e '.[bench]'")
    logits = helpers.logits_at(model, option, parity.to_mixer_cifar)
    assert logit_gap(logits, reference_side(parity.to_mixer_cifar(model))[0]) >= least


def test_a_swapped_transplant_is_not_the_reference(parity, model, zoo_side):
    """The patch Conv2d's rows and columns swapped: the logits move by more than 0.1 of their largest (measured:
    1.3)."""
    pytest.importorskip("torch", reason="the bench extra: pip install -e '.[bench]'")
    sd = parity.to_mixer_cifar(model)
    sd["patch_emb.0.weight"] = sd["patch_emb.0.weight"].transpose(0, 1, 3, 2)
    assert logit_gap(zoo_side[0], reference_side(sd)[0]) >= 0.1
