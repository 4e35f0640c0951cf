"""Coordinate checks on ViT, MLP-Mixer and GPT (seed_tp4b_adam.md sections 5-6): log-log slope against width of
the RMS change of every activation, of the attention logits and of the output after t = 1..3 Adam steps, geometric
mean over 2 seeds, between widths 128 and 512 (from 64 on, ViT's first pre-activation still shows a -0.2
transient).
The four plugins of a model share one compiled program per width (zoo.diagnostics.coord.CoordRun).

Attention runs at a fixed head count (scale_heads=False), so the head dim d grows with width and the logit scale
matters: muP's 1/d keeps the logits' change from growing, SP's 1/sqrt(d) lets it grow like d^(1/2) (TP-V
section 4; TP IVb section 5 on attention)."""

from __future__ import annotations

import numpy as np
import pytest

import zoo.param as P
from zoo.diagnostics.coord import coord_data, slopes
from zoo.optim import OptimConfig

WIDTHS = [128, 512]
MODELS = {
    "vit": dict(depth=2, head_dim=16, in_shape=(8, 8, 3), patch=4, num_classes=4, scale_heads=False, base_width=64),
    "mixer": dict(depth=2, in_shape=(8, 8, 3), patch=4, token_dim=8, num_classes=4, base_width=64),
    "gpt": dict(depth=2, head_dim=16, seq_len=16, vocab_size=32, dropout=0.0, scale_heads=False, base_width=64),
}
# muP's exponents with SP's attention scale 1/sqrt(d): only the logit scale differs from `mup`
MUP_SQRT_D = P.get("abcd", input=(0, 0, 0, 1), vector=(0, 0, 0, 1), hidden=(0, 0.5, 1, 1), output=(1, 0, 0, 1),
                   attn_exp=0.5)


def batch(name: str, n: int = 8) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if name == "gpt":
        x = rng.integers(0, MODELS[name]["vocab_size"], (n, MODELS[name]["seq_len"]), dtype=np.int32)
        return {"x": x, "y": np.roll(x, -1, axis=1)}
    return {"x": rng.normal(size=(n, 8, 8, 3)).astype(np.float32), "y": rng.integers(0, 4, n, dtype=np.int32)}


def measure(name: str, plugin) -> dict[str, np.ndarray]:
    """Layer group -> [layer, step] slopes: hidden (every block's pre-activation and output, and the embedding),
    attention (each block's logits) and output."""
    data = coord_data(name, plugin, WIDTHS, 2, 3, OptimConfig(name="adam", lr=1e-3), batch(name), **MODELS[name])
    s = slopes(WIDTHS, data)
    groups = {"hidden": [v for k, v in s.items() if k.split("/")[0] in ("embed", "pre", "blocks")],
              "attention": [v for k, v in s.items() if k.startswith("attn_logits")], "output": [s["output"]]}
    return {g: np.stack(v) for g, v in groups.items() if v}


@pytest.mark.long
@pytest.mark.parametrize("name", list(MODELS))
def test_mup_is_flat_sp_grows_and_sqrt_d_logits_grow(name):
    """muP (Adam, TP IVb Thm 2.8.19): hidden activations and the output change by Theta(1) in width, slope 0 +/-
    0.15; the attention logits' change does not grow (slope <= +0.1). SP with a constant Adam LR: hidden weights
    move by Theta(lr) per entry, so some layer's change grows with slope >= 0.5 (r = -1 < 0). muP with SP's
    1/sqrt(d): the update makes q and k correlated, so q.k grows like d and the logits' change like d^(1/2)
    (TP-V section 4); measured, their slope is positive and at least 0.35 above muP's (theory: 0.5 above).

    The output is checked with muP's zero-initialized readout (TP-V): with a random readout V0 the logits' change
    carries V0 . Delta h / n, a sum of n random-sign terms that shrinks like n^-1/2 and at these widths tilts
    GPT's output slope to -0.18."""
    mup = measure(name, P.get("mup"))
    assert len(mup["hidden"]) == 2 * MODELS[name]["depth"] + 1 and ("attention" in mup) == (name != "mixer")
    np.testing.assert_allclose(mup["hidden"], 0.0, atol=0.15)
    np.testing.assert_allclose(measure(name, P.get("mup", zero_init=True))["output"], 0.0, atol=0.15)
    sp = measure(name, P.get("sp"))
    assert max(v.max() for v in sp.values()) >= 0.5, sp
    if name == "mixer":
        return
    assert np.all(mup["attention"] <= 0.1), mup["attention"]
    sqrt_d = measure(name, MUP_SQRT_D)
    assert np.all(sqrt_d["attention"] > 0.0), sqrt_d["attention"]
    assert np.all(sqrt_d["attention"] - mup["attention"] >= 0.35), (sqrt_d["attention"], mup["attention"])
