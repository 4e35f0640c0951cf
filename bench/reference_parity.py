"""zoo's ViT and MLP-Mixer against the reference repositories' own model code, at the recipe's size and a small one:
the same weights, the same batches, f32, eval mode (no dropout, no drop path).

    --spt-lsa DIR       aanna0701/SPT_LSA_ViT: models/vit.py's ViT with is_SPT=False, is_LSA=False at the size
                        models/create_model.py gives it (dim 192, depth 9, 12 heads of 16, mlp_dim_ratio 2, patch 4
                        at 32x32)
    --mixer-cifar DIR   omihub777/MLP-Mixer-CIFAR: mlp_mixer.py's MLPMixer at main.py's defaults (hidden 128, 8
                        layers, patch 4, hidden_s 64, hidden_c 512)

A checkout or an extracted copy, run unchanged (its exact GELU, LayerNorm eps 1e-5, the ViT's bias-free to_qkv);
nothing of it is copied into zoo. zoo's model is built under `sp` from the recipe (zoo.config.resolve of `--model vit`
/ `--model mixer`: its model options, which set qkv_bias, norm_eps and activation to the reference's, drop path 0) at
the recipe's shape and at a small one (width 32, depth 2, 16x16 images in patches of 4), its weights mapped onto the
reference's state_dict (`to_spt_vit`, `to_mixer_cifar`; loaded strict: every name and shape), and both are run on
the same random images in [-1, 1]. Checked:

    parameters  zoo's count is the reference's
    logits      max |l_zoo - l_ref| / max |l_ref| on one batch                                  <= 1e-5
    gradients   of the mean cross-entropy: ||g_zoo - g_ref|| / ||g_ref|| per tensor             <= 1e-4
                but the Mixer's token-mixing output biases (mlp1.fc2.bias), whose gradient is 0 on both sides but
                for rounding (a constant added to every channel of a token, which the LayerNorm over the channels
                on every path after it removes): their norm, on each side                 <= 1e-6 of the whole's
    losses      --steps optimizer steps on fresh batches at the recipe's peak LR, held constant, with the recipe's
                loss (label smoothing 0.1; the ViT through the reference's LabelSmoothingCrossEntropy): zoo's
                optimizer chain (zoo.optim at the recipe's OptimConfig) against torch's AdamW with the same LR,
                betas, eps and weight decay on every parameter (the ViT's: main.py's AdamW(model.parameters(), lr,
                weight_decay)); the losses' relative difference at each step                    <= 1e-5

Reported, unchecked, for the Mixer: "adam-l2", the reference's own optimizer (torch.optim.Adam(weight_decay=5e-5):
5e-5 w added to the gradient) against zoo's recipe (decoupled, lr 5e-5 w a step). Exits 1 when a check fails.

    python bench/reference_parity.py --spt-lsa ../SPT_LSA_ViT --mixer-cifar ../MLP-Mixer-CIFAR
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import zoo.models
import zoo.param
from zoo import optim
from zoo.config import resolve
from zoo.export.fold import folded_params
from zoo.train.step import loss_and_metrics

LOGIT_RTOL, GRAD_RTOL, LOSS_RTOL, VANISHING_RTOL = 1e-5, 1e-4, 1e-5, 1e-6
# The Mixer's token-mixing output bias adds one constant to every channel of its token, which the LayerNorm over the
# channels that follows on every path removes: its gradient is 0 but for rounding, on both sides
VANISHING = "mlp1.fc2.bias"
QKV = ("q", "k", "v")
# The small shape, on both sides: zoo's model options (the recipe's other options kept)
SMALL = {"vit": dict(width=32, depth=2, in_shape=(16, 16, 3), patch=4, head_dim=8, mlp_ratio=2),
         "mixer": dict(width=32, depth=2, in_shape=(16, 16, 3), patch=4, token_dim=16, mlp_ratio=4)}
# zoo's config fields the report shows
SHOWN = {"vit": ("width", "depth", "in_shape", "patch", "head_dim", "mlp_ratio", "qkv_bias", "norm_eps", "activation"),
         "mixer": ("width", "depth", "in_shape", "patch", "token_dim", "mlp_ratio", "norm_eps", "activation")}

# zoo's path -> the reference's name: the ViT's block i ("transformer.layers.i.") and the rest
SPT_BLOCK = {"0.norm.weight": "ln1/gain", "0.norm.bias": "ln1/bias", "0.fn.to_out.0.weight": "attn/o/kernel",
             "0.fn.to_out.0.bias": "attn/o/bias", "1.norm.weight": "ln2/gain", "1.norm.bias": "ln2/bias",
             "1.fn.net.0.weight": "mlp/fc1/kernel", "1.fn.net.0.bias": "mlp/fc1/bias",
             "1.fn.net.3.weight": "mlp/fc2/kernel", "1.fn.net.3.bias": "mlp/fc2/bias"}
SPT_TOP = {"to_patch_embedding.1.weight": "embed/kernel", "to_patch_embedding.1.bias": "embed/bias",
           "mlp_head.0.weight": "norm/gain", "mlp_head.0.bias": "norm/bias", "mlp_head.1.weight": "head/kernel",
           "mlp_head.1.bias": "head/bias"}
# the Mixer's block i ("mixer_layers.i."): token mixing mlp1 (Conv1d over the tokens, kernel size 1), channels mlp2
MIXER_BLOCK = {"mlp1.ln.weight": "ln1/gain", "mlp1.ln.bias": "ln1/bias", "mlp1.fc1.weight": "token_mlp/fc1/kernel",
               "mlp1.fc1.bias": "token_mlp/fc1/bias", "mlp1.fc2.weight": "token_mlp/fc2/kernel",
               "mlp1.fc2.bias": "token_mlp/fc2/bias", "mlp2.ln.weight": "ln2/gain", "mlp2.ln.bias": "ln2/bias",
               "mlp2.fc1.weight": "channel_mlp/fc1/kernel", "mlp2.fc1.bias": "channel_mlp/fc1/bias",
               "mlp2.fc2.weight": "channel_mlp/fc2/kernel", "mlp2.fc2.bias": "channel_mlp/fc2/bias"}
MIXER_TOP = {"patch_emb.0.bias": "embed/bias", "ln.weight": "norm/gain", "ln.bias": "norm/bias",
             "clf.weight": "head/kernel", "clf.bias": "head/bias"}


def _params(model: nnx.Module) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, np.float32) for k, v in folded_params(model).items()}


def to_spt_vit(model: nnx.Module) -> dict[str, np.ndarray]:
    """The state_dict of SPT_LSA_ViT's ViT (is_SPT=False) holding zoo's ViT (its SP form: zoo's Dense kernels are
    (out, in), torch's Linear order; to_qkv = [W_q; W_k; W_v]). The reference's to_qkv has no bias: a ValueError for
    a zoo ViT with q, k, v biases (its recipe has none: qkv_bias False)."""
    p = _params(model)
    if any(f"stack/blocks/attn/{k}/bias" in p for k in QKV):
        raise ValueError("the reference's to_qkv has no bias: build zoo's ViT with qkv_bias=False (as its recipe)")
    out = {name: p[path] for name, path in SPT_TOP.items()}
    out["cls_token"], out["pos_embedding"] = p["cls/table"][None], p["pos/table"][None]
    for i in range(p["stack/blocks/ln1/gain"].shape[0]):
        for name, path in SPT_BLOCK.items():
            out[f"transformer.layers.{i}.{name}"] = p[f"stack/blocks/{path}"][i]
        out[f"transformer.layers.{i}.0.fn.to_qkv.weight"] = np.concatenate(
            [p[f"stack/blocks/attn/{k}/kernel"][i] for k in QKV])
    return out


def to_mixer_cifar(model: nnx.Module) -> dict[str, np.ndarray]:
    """The state_dict of MLP-Mixer-CIFAR's MLPMixer (no cls token) holding zoo's Mixer: the patch embedding's
    Conv2d (n, C, p, p) is zoo's patch kernel (n, p p C) (patches flattened row, column, channel), the token-mixing
    Conv1d's (out, in, 1) zoo's token-mixing kernels (out, in)."""
    p = _params(model)
    patch, channels = model.cfg.patch, model.cfg.in_shape[-1]
    w = p["embed/kernel"]
    out = {"patch_emb.0.weight": w.reshape(w.shape[0], patch, patch, channels).transpose(0, 3, 1, 2)}
    out |= {name: p[path] for name, path in MIXER_TOP.items()}
    for i in range(p["stack/blocks/ln1/gain"].shape[0]):
        for name, path in MIXER_BLOCK.items():
            v = p[f"stack/blocks/{path}"][i]
            out[f"mixer_layers.{i}.{name}"] = v[..., None] if name.startswith("mlp1.fc") and v.ndim == 2 else v
    return out


# ---- the references, imported from the given directory


def spt_lsa(root: Path) -> types.SimpleNamespace:
    """models/vit.py's ViT and utils/losses.py's LabelSmoothingCrossEntropy. models/__init__.py imports every model of
    the repository (two need timm): the package is registered without it, then models.vit imported."""
    if not (root / "models" / "vit.py").is_file():
        raise SystemExit(f"error: {root} has no models/vit.py (give an SPT_LSA_ViT checkout with --spt-lsa)")
    pkg = types.ModuleType("models")
    pkg.__path__ = [str(root / "models")]
    sys.modules["models"] = pkg
    sys.path.insert(0, str(root))  # models.vit imports utils.drop_path
    vit = importlib.import_module("models.vit")
    losses = importlib.import_module("utils.losses")
    return types.SimpleNamespace(ViT=vit.ViT, LabelSmoothingCrossEntropy=losses.LabelSmoothingCrossEntropy)


def mixer_cifar(root: Path) -> types.SimpleNamespace:
    """mlp_mixer.py's MLPMixer (imported by path; its `import torchsummary`, used only under __main__, stubbed where
    torchsummary is not installed)."""
    if not (root / "mlp_mixer.py").is_file():
        raise SystemExit(f"error: {root} has no mlp_mixer.py (give an MLP-Mixer-CIFAR checkout with --mixer-cifar)")
    if importlib.util.find_spec("torchsummary") is None:
        sys.modules["torchsummary"] = types.ModuleType("torchsummary")
    spec = importlib.util.spec_from_file_location("mlp_mixer_cifar", root / "mlp_mixer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return types.SimpleNamespace(MLPMixer=module.MLPMixer)


def reference_model(name: str, ref: types.SimpleNamespace, cfg, size: str):
    """The reference model at the recipe's size (its own numbers, create_model.py's and main.py's) or at zoo's
    small config, no dropout or drop path."""
    if name == "vit":
        kw = dict(img_size=32, patch_size=4, num_classes=10, dim=192, mlp_dim_ratio=2, depth=9, heads=12,
                  dim_head=192 // 12) if size == "recipe" else \
            dict(img_size=cfg.in_shape[0], patch_size=cfg.patch, num_classes=cfg.num_classes, dim=cfg.width,
                 mlp_dim_ratio=cfg.mlp_ratio, depth=cfg.depth, heads=cfg.width // cfg.head_dim, dim_head=cfg.head_dim)
        return ref.ViT(**kw, stochastic_depth=0.0, is_SPT=False, is_LSA=False)
    kw = dict(img_size=32, patch_size=4, hidden_size=128, hidden_s=64, hidden_c=512, num_layers=8,
              num_classes=10) if size == "recipe" else \
        dict(img_size=cfg.in_shape[0], patch_size=cfg.patch, hidden_size=cfg.width, hidden_s=cfg.token_dim,
             hidden_c=cfg.mlp_ratio * cfg.width, num_layers=cfg.depth, num_classes=cfg.num_classes)
    return ref.MLPMixer(in_channels=3, **kw, drop_p=0.0, off_act=False, is_cls_token=False)


# ---- the comparison


def zoo_model(name: str, size: str, seed: int):
    """zoo's model under sp from the recipe (its model options, drop path 0) at the recipe's shape or the small one,
    and the recipe's config."""
    run = resolve({"model": name})
    opts = {**run.model.options, "drop_path": 0.0}
    if size == "recipe":
        shape = {k: getattr(run.model, k) for k in ("width", "depth", "base_width", "base_depth")
                 if getattr(run.model, k) is not None}
    else:
        shape, opts = {}, {**opts, **SMALL[name]}
    cfg = zoo.models.config(name, **shape, **opts)
    return zoo.models.create(name, cfg, zoo.param.get("sp"), nnx.Rngs(seed)), run


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def batches(cfg, batch: int, count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` batches of random images in [-1, 1], (B, H, W, C), and labels."""
    rng = np.random.default_rng(seed)
    return [(rng.uniform(-1, 1, (batch, *cfg.in_shape)).astype(np.float32),
             rng.integers(0, cfg.num_classes, batch).astype(np.int64)) for _ in range(count)]


def torch_pass(model, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
    """Logits, mean cross-entropy and its gradient per parameter, in eval mode."""
    import torch
    import torch.nn.functional as F

    model.eval()
    model.zero_grad()
    logits = model(torch.from_numpy(x.transpose(0, 3, 1, 2)).contiguous())
    loss = F.cross_entropy(logits, torch.from_numpy(y))
    loss.backward()
    return logits.detach().numpy(), loss.item(), {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


def zoo_pass(model, to_ref, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    batch = {"x": jnp.asarray(x), "y": jnp.asarray(y, jnp.int32)}

    def loss(p):
        m = nnx.merge(graphdef, p, rest)
        return loss_and_metrics(m, batch, None, False)[0], m(batch["x"])[0]

    (value, logits), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
    return np.asarray(logits), float(value), to_ref(nnx.merge(graphdef, grads, rest))


def zoo_steps(model, run, data) -> tuple[list[float], nnx.Module]:
    """The losses of len(data) steps of zoo's optimizer (the recipe's, at its peak LR held constant) with the
    recipe's label smoothing, and the model after."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    tx = optim.build(dataclasses.replace(run.optim, schedule="constant", warmup=0), zoo.param.get("sp"), params)

    @jax.jit
    def step(params, opt, x, y):
        def loss(p):
            return loss_and_metrics(nnx.merge(graphdef, p, rest), {"x": x, "y": y}, None, False, jnp.float32,
                                    run.loop.label_smoothing)[0]

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, value

    opt, losses = tx.init(params), []
    for x, y in data:
        params, opt, value = step(params, opt, jnp.asarray(x), jnp.asarray(y, jnp.int32))
        losses.append(float(value))
    return losses, nnx.merge(graphdef, params, rest)


def torch_steps(model, make_opt, criterion, data) -> list[float]:
    import torch

    model.eval()  # no dropout or drop path (both are 0 here)
    opt, losses = make_opt(model.parameters()), []
    for x, y in data:
        loss = criterion(model(torch.from_numpy(x.transpose(0, 3, 1, 2)).contiguous()), torch.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def compare(name: str, ref: types.SimpleNamespace, size: str, args) -> dict:
    import torch

    model, run = zoo_model(name, size, args.seed)
    cfg, o, smoothing = model.cfg, run.optim, run.loop.label_smoothing
    to_ref = to_spt_vit if name == "vit" else to_mixer_cifar
    vanishing = {f"mixer_layers.{i}.{VANISHING}" for i in range(cfg.depth)} if name == "mixer" else set()
    sd = {k: torch.from_numpy(np.array(v)) for k, v in to_ref(model).items()}
    first, *rest = batches(cfg, args.batch, args.steps + 1, args.seed + 1)
    ours = zoo_pass(model, to_ref, *first)
    our_losses, trained = zoo_steps(model, run, rest)
    trained_sd = to_ref(trained)
    if name == "vit":  # main.py: AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
        criterion = ref.LabelSmoothingCrossEntropy(smoothing) if smoothing else torch.nn.CrossEntropyLoss()
        assert (o.b1, o.b2, o.eps) == (0.9, 0.999, 1e-8), "the recipe's betas and eps are no longer main.py's"
    else:  # its train.py: nn.CrossEntropyLoss(label_smoothing=...), Adam(lr, betas, weight_decay): L2
        criterion = torch.nn.CrossEntropyLoss(label_smoothing=smoothing)
    kw = dict(lr=o.lr, betas=(o.b1, o.b2), eps=o.eps, weight_decay=o.weight_decay)
    optimizers = {"unchanged": functools.partial(torch.optim.AdamW, **kw)}
    if name == "mixer":
        optimizers["adam-l2"] = functools.partial(torch.optim.Adam, **kw)
    reference = reference_model(name, ref, cfg, size)
    reference.load_state_dict(sd, strict=True)
    logits, loss, grads = torch_pass(reference, *first)
    assert set(grads) == set(ours[2]), set(grads) ^ set(ours[2])
    total = np.sqrt(sum(np.sum(np.square(g)) for g in grads.values()))
    checked = {"logits": float(np.abs(ours[0] - logits).max() / np.abs(logits).max()), "loss": (ours[1], loss),
               "grads": {k: rel(ours[2][k], g) for k, g in grads.items() if k not in vanishing},
               "vanishing": max((float(max(np.linalg.norm(ours[2][k]), np.linalg.norm(grads[k])) / total)
                                 for k in vanishing), default=0.0)}
    rows = []
    for variant, make_opt in optimizers.items():
        reference.load_state_dict(sd, strict=True)
        theirs = torch_steps(reference, make_opt, criterion, rest)
        after = {k: rel(trained_sd[k], v.detach().numpy()) for k, v in reference.state_dict().items()
                 if k not in vanishing}
        rows.append((checked if variant == "unchanged" else {}) | {
            "variant": variant, "checked": variant == "unchanged", "losses": list(zip(our_losses, theirs, strict=True)),
            "loss_gap": max(abs(a - b) / abs(b) for a, b in zip(our_losses, theirs, strict=True)),
            "params_after": max(after.values()), "params_after_at": max(after, key=after.get)})
    params = {"zoo": int(sum(v.size for v in folded_params(model).values())),
              "reference": int(sum(p.numel() for p in reference.parameters()))}
    m = rows[0]
    checks = {"parameters": params["zoo"] == params["reference"], "logits": m["logits"] <= LOGIT_RTOL,
              "grads": max(m["grads"].values()) <= GRAD_RTOL, "losses": m["loss_gap"] <= LOSS_RTOL}
    if vanishing:
        checks["vanishing"] = m["vanishing"] <= VANISHING_RTOL
    return {"model": name, "size": size, "config": {k: getattr(cfg, k) for k in SHOWN[name]}, "params": params,
            "optimizer": {**kw, "label_smoothing": smoothing}, "rows": rows, "checks": checks}


def report(results: list[dict], args) -> str:
    lines = [f"zoo (sp, f32, the recipe's model options) against the reference code unchanged, batch {args.batch}, "
             f"{args.steps} optimizer steps", "",
             "| model | size | comparison | logits | loss at step 0 (zoo / reference) | gradients: largest (tensor) "
             "| losses over the steps | parameters after | checked |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for row in r["rows"]:
            cells = ["", "", ""]
            if "grads" in row:
                worst = max(row["grads"], key=row["grads"].get)
                cells = [f"{row['logits']:.1e}", f"{row['loss'][0]:.7f} / {row['loss'][1]:.7f}",
                         f"{row['grads'][worst]:.1e} ({worst})"]
            lines.append(f"| {r['model']} | {r['size']} | {row['variant']} | " + " | ".join(cells) +
                         f" | {row['loss_gap']:.1e} | {row['params_after']:.1e} ({row['params_after_at']}) | "
                         f"{'yes' if row['checked'] else 'no'} |")
    lines.append("")
    for r in results:
        c, p, o = r["config"], r["params"], r["optimizer"]
        lines.append(f"{r['model']} {r['size']}: " + ", ".join(f"{k} {v}" for k, v in c.items()) +
                     f"; parameters zoo {p['zoo']:,}, reference {p['reference']:,}; lr {o['lr']:g}, betas "
                     f"{o['betas']}, eps {o['eps']:g}, weight decay {o['weight_decay']:g}, label smoothing "
                     f"{o['label_smoothing']:g}; checks " + ", ".join(f"{k} {v}" for k, v in r["checks"].items()))
        if "vanishing" in r["checks"]:
            lines.append(f"  the token-mixing output biases ({VANISHING}, not in the gradients' column): gradient norm "
                         f"at most {r['rows'][0]['vanishing']:.1e} of the whole gradient's on either side (<= "
                         f"{VANISHING_RTOL:g}): 0 but for rounding")
    lines.append(f"tolerances (unchanged): logits {LOGIT_RTOL:g}, gradients {GRAD_RTOL:g}, losses {LOSS_RTOL:g}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spt-lsa", help="an aanna0701/SPT_LSA_ViT checkout (the ViT's reference)")
    p.add_argument("--mixer-cifar", help="an omihub777/MLP-Mixer-CIFAR checkout (the Mixer's reference)")
    p.add_argument("--sizes", default="small,recipe", help="which shapes: small, recipe or both")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch's CPU threads")
    p.add_argument("--json", help="also write the rows and checks here")
    args = p.parse_args(argv)
    if not (args.spt_lsa or args.mixer_cifar):
        p.error("give --spt-lsa DIR, --mixer-cifar DIR or both")
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    refs = {}
    if args.spt_lsa:
        refs["vit"] = spt_lsa(Path(args.spt_lsa).resolve())
    if args.mixer_cifar:
        refs["mixer"] = mixer_cifar(Path(args.mixer_cifar).resolve())
    results = [compare(name, ref, size, args) for name, ref in refs.items() for size in args.sizes.split(",")]
    print(report(results, args))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if not all(all(r["checks"].values()) for r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
