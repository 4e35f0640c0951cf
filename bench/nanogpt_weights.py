"""zoo's GPT parameters as nanoGPT's state_dict and back (github.com/karpathy/nanoGPT, model.py's names and layouts),
so that both models hold the same weights (bench/nanogpt_parity.py).

zoo keeps each Dense kernel (out, in), as torch.nn.Linear does, and the blocks stacked on a leading depth axis; the
maps are, per block i:

    ln1/gain, ln1/bias            transformer.h.i.ln_1.weight, .bias
    attn/q, k, v /kernel, /bias   transformer.h.i.attn.c_attn.weight = [W_q; W_k; W_v] (3n, n), .bias likewise
    attn/o                        transformer.h.i.attn.c_proj
    ln2                           transformer.h.i.ln_2
    mlp/fc1, mlp/fc2              transformer.h.i.mlp.c_fc, .c_proj

and wte/table (also lm_head.weight: nanoGPT ties them), wpe/table, norm (transformer.ln_f). The zoo side is its SP
form (zoo.export.fold: every forward multiplier folded in, attention logits q.k / sqrt(d)), so any plugin's model
maps whose SP form nanoGPT can hold; a tied readout must then equal the token embedding (nanoGPT's tie has no
multiplier).
"""

from __future__ import annotations

import numpy as np
from flax import nnx

from zoo.export.fold import folded_params

# nanoGPT's name in block i (after "transformer.h.i.") -> zoo's path in the stack (after "stack/blocks/")
BLOCK = {"ln_1.weight": "ln1/gain", "ln_1.bias": "ln1/bias", "attn.c_proj.weight": "attn/o/kernel",
         "attn.c_proj.bias": "attn/o/bias", "ln_2.weight": "ln2/gain", "ln_2.bias": "ln2/bias",
         "mlp.c_fc.weight": "mlp/fc1/kernel", "mlp.c_fc.bias": "mlp/fc1/bias", "mlp.c_proj.weight": "mlp/fc2/kernel",
         "mlp.c_proj.bias": "mlp/fc2/bias"}
QKV = ("q", "k", "v")
TOP = {"transformer.wte.weight": "wte/table", "transformer.wpe.weight": "wpe/table",
       "transformer.ln_f.weight": "norm/gain", "transformer.ln_f.bias": "norm/bias"}


def to_nanogpt(model: nnx.Module) -> dict[str, np.ndarray]:
    """nanoGPT's state_dict (name -> f32 array) of zoo's GPT; a ValueError where the SP form has no nanoGPT form."""
    params = {k: np.asarray(v, np.float32) for k, v in folded_params(model).items()}
    head = params.pop("head/kernel")
    if not np.array_equal(head, params["wte/table"]):
        raise ValueError("nanoGPT ties lm_head to wte: the readout must be tied, with multiplier 1 (its SP form's "
                         "head equals the token embedding)")
    out = {name: params.pop(path) for name, path in TOP.items() if path in params}
    depth = params["stack/blocks/ln1/gain"].shape[0]
    for i in range(depth):
        for name, path in BLOCK.items():
            if f"stack/blocks/{path}" in params:
                out[f"transformer.h.{i}.{name}"] = params[f"stack/blocks/{path}"][i]
        for part in ("weight", "bias"):
            zoo_part = "kernel" if part == "weight" else "bias"
            if f"stack/blocks/attn/q/{zoo_part}" in params:
                out[f"transformer.h.{i}.attn.c_attn.{part}"] = np.concatenate(
                    [params[f"stack/blocks/attn/{k}/{zoo_part}"][i] for k in QKV])
    out["lm_head.weight"] = out["transformer.wte.weight"]
    return out


def from_nanogpt(state: dict[str, np.ndarray], depth: int) -> dict[str, np.ndarray]:
    """zoo's SP-form parameters (path -> array, the blocks stacked) of a nanoGPT state_dict of `depth` blocks; the
    tied readout is the token embedding (no head)."""
    out = {path: np.asarray(state[name]) for name, path in TOP.items() if name in state}
    for name, path in BLOCK.items():
        if f"transformer.h.0.{name}" in state:
            out[f"stack/blocks/{path}"] = np.stack([np.asarray(state[f"transformer.h.{i}.{name}"])
                                                    for i in range(depth)])
    for part, zoo_part in (("weight", "kernel"), ("bias", "bias")):
        if f"transformer.h.0.attn.c_attn.{part}" in state:
            parts = [np.split(np.asarray(state[f"transformer.h.{i}.attn.c_attn.{part}"]), 3) for i in range(depth)]
            for j, k in enumerate(QKV):
                out[f"stack/blocks/attn/{k}/{zoo_part}"] = np.stack([p[j] for p in parts])
    return out
