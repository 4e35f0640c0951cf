"""Minimal PyTorch versions of zoo's four models under the `sp` plugin, the same math (bench/vs_torch.py times them
against zoo): the same layers, LayerNorm eps 1e-6, tanh-approximate GELU, no dropout, and `load_zoo` copies a zoo
model's parameters in, so both compute the same function (zoo's Dense kernels are (out, in), as torch's are).

    GPT:        nanoGPT's block (fused q/k/v projection, F.scaled_dot_product_attention, causal), untied readout
    ViT:        patch embedding, cls token + position embedding, pre-LN blocks, head on LN(x)[:, 0]
    Mixer:      patch embedding, pre-LN token mixing (an MLP over the tokens) and channel MLP, head on mean LN(x)
    MLP-ResNet: x <- x + MS(relu(W x)) (MS: mean subtraction over width), input and output layers, no biases
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def _t(a: Any) -> torch.Tensor:
    return torch.from_numpy(np.array(a, np.float32))


def _linear(lin: nn.Linear, p: dict, i: int | None = None) -> None:
    """Copies a zoo Dense {kernel (out, in), bias} (block i of a stacked one) into an nn.Linear."""
    pick = (lambda a: a) if i is None else (lambda a: a[i])
    lin.weight.data = _t(pick(p["kernel"])).contiguous()
    if lin.bias is not None:
        lin.bias.data = _t(pick(p["bias"]))


def _norm(ln: nn.LayerNorm, p: dict, i: int | None = None) -> None:
    pick = (lambda a: a) if i is None else (lambda a: a[i])
    ln.weight.data, ln.bias.data = _t(pick(p["gain"])), _t(pick(p["bias"]))


def patchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, H, W, C) -> (B, H/p * W/p, p*p*C) in raster order (as zoo.models.transformer.patchify)."""
    b, h, w, c = x.shape
    x = x.reshape(b, h // patch, patch, w // patch, patch, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (h // patch) * (w // patch), patch * patch * c)


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int, bias: bool = True):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden, bias=bias), nn.Linear(hidden, dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))

    def load_zoo(self, p: dict, i: int) -> None:
        _linear(self.fc1, p["fc1"], i)
        _linear(self.fc2, p["fc2"], i)


class Block(nn.Module):
    """nanoGPT's pre-LN block (causal for the GPT, bidirectional for the ViT)."""

    def __init__(self, width: int, heads: int, causal: bool):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln1, self.ln2 = nn.LayerNorm(width, eps=1e-6), nn.LayerNorm(width, eps=1e-6)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = Mlp(width, 4 * width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n = x.shape
        q, k, v = (a.view(b, t, self.heads, n // self.heads).transpose(1, 2)
                   for a in self.qkv(self.ln1(x)).split(n, 2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, n))
        return x + self.mlp(self.ln2(x))

    def load_zoo(self, p: dict, i: int) -> None:
        _norm(self.ln1, p["ln1"], i)
        _norm(self.ln2, p["ln2"], i)
        a = p["attn"]
        self.qkv.weight.data = torch.cat([_t(a[k]["kernel"][i]) for k in "qkv"]).contiguous()
        self.qkv.bias.data = torch.cat([_t(a[k]["bias"][i]) for k in "qkv"])
        _linear(self.proj, a["o"], i)
        self.mlp.load_zoo(p["mlp"], i)


class GPT(nn.Module):
    def __init__(self, vocab: int, seq_len: int, width: int, depth: int, head_dim: int = 64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(seq_len, width)
        self.blocks = nn.ModuleList(Block(width, width // head_dim, causal=True) for _ in range(depth))
        self.ln, self.head = nn.LayerNorm(width, eps=1e-6), nn.Linear(width, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))

    def load_zoo(self, p: dict) -> None:
        self.wte.weight.data, self.wpe.weight.data = _t(p["wte"]["table"]), _t(p["wpe"]["table"])
        for i, block in enumerate(self.blocks):
            block.load_zoo(p["stack"]["blocks"], i)
        _norm(self.ln, p["norm"])
        _linear(self.head, p["head"])


class ViT(nn.Module):
    def __init__(self, width: int, depth: int, patch: int = 4, image: int = 32, channels: int = 3,
                 classes: int = 10, head_dim: int = 64):
        super().__init__()
        self.patch, tokens = patch, (image // patch) ** 2
        self.embed = nn.Linear(patch * patch * channels, width)
        self.cls, self.pos = nn.Parameter(torch.zeros(1, 1, width)), nn.Parameter(torch.zeros(1, tokens + 1, width))
        self.blocks = nn.ModuleList(Block(width, width // head_dim, causal=False) for _ in range(depth))
        self.ln, self.head = nn.LayerNorm(width, eps=1e-6), nn.Linear(width, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.embed(patchify(images, self.patch))
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)[:, 0])

    def load_zoo(self, p: dict) -> None:
        _linear(self.embed, p["embed"])
        self.cls.data, self.pos.data = _t(p["cls"]["table"])[None], _t(p["pos"]["table"])[None]
        for i, block in enumerate(self.blocks):
            block.load_zoo(p["stack"]["blocks"], i)
        _norm(self.ln, p["norm"])
        _linear(self.head, p["head"])


class MixerBlock(nn.Module):
    def __init__(self, width: int, tokens: int, token_dim: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width, eps=1e-6), nn.LayerNorm(width, eps=1e-6)
        self.token_mlp, self.channel_mlp = Mlp(tokens, token_dim), Mlp(width, 4 * width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.ln2(x))

    def load_zoo(self, p: dict, i: int) -> None:
        _norm(self.ln1, p["ln1"], i)
        _norm(self.ln2, p["ln2"], i)
        self.token_mlp.load_zoo(p["token_mlp"], i)
        self.channel_mlp.load_zoo(p["channel_mlp"], i)


class Mixer(nn.Module):
    def __init__(self, width: int, depth: int, patch: int = 4, image: int = 32, channels: int = 3,
                 classes: int = 10, token_dim: int = 64):
        super().__init__()
        self.patch, tokens = patch, (image // patch) ** 2
        self.embed = nn.Linear(patch * patch * channels, width)
        self.blocks = nn.ModuleList(MixerBlock(width, tokens, token_dim) for _ in range(depth))
        self.ln, self.head = nn.LayerNorm(width, eps=1e-6), nn.Linear(width, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.embed(patchify(images, self.patch))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x).mean(1))

    def load_zoo(self, p: dict) -> None:
        _linear(self.embed, p["embed"])
        for i, block in enumerate(self.blocks):
            block.load_zoo(p["stack"]["blocks"], i)
        _norm(self.ln, p["norm"])
        _linear(self.head, p["head"])


class MLPResNet(nn.Module):
    def __init__(self, width: int, depth: int, inputs: int = 3072, classes: int = 10):
        super().__init__()
        self.embed = nn.Linear(inputs, width, bias=False)
        self.blocks = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(depth))
        self.head = nn.Linear(width, classes, bias=False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.embed(images.reshape(images.shape[0], -1))
        for w in self.blocks:
            y = F.relu(w(x))
            x = x + (y - y.mean(-1, keepdim=True))
        return self.head(x)

    def load_zoo(self, p: dict) -> None:
        _linear(self.embed, p["embed"])
        for i, w in enumerate(self.blocks):
            _linear(w, p["stack"]["blocks"]["w1"], i)
        _linear(self.head, p["head"])
