"""zoo's GPT against nanoGPT's own model.py, step by step: the same weights, the same batches, AdamW with nanoGPT's
optimizer settings on both sides, f32, dropout 0.

zoo's GPT under `sp` at its defaults (nanoGPT's model) is initialised, its weights copied into nanoGPT's GPT
(bench/nanogpt_weights.py: the fused c_attn, the tied wte/lm_head, biases, LayerNorms), and both train on the same
tiny-shakespeare windows: zoo through its own optimizer chain (zoo.optim: AdamW, b2 0.99, eps 1e-8, weight decay
0.1 on the tensors its plugin decays, the global-norm clip at 1.0), nanoGPT through its configure_optimizers (torch
AdamW, decay on every tensor of 2+ dimensions) and clip_grad_norm_(1.0), each step's LR nanoGPT's get_lr (the char
config's warmup of 100). Checked, and printed:

    losses      relative difference at each step: <= 1e-5 over the first 10 steps, <= 1e-4 over all
    gradients   ||g_zoo - g_nanoGPT|| / ||g_nanoGPT|| per tensor at step 0: <= 1e-4
    decay       the tensors zoo decays are the ones configure_optimizers puts in its decay group
    dropout     with dropout 0.2 (--dropout) at the last step's weights, on 64 windows, the mean training-mode loss
                over 200 draws of the masks (--masks) on each side: at most 4 standard errors apart (each side draws
                its own masks)
    schedule    the gpt recipe's LR at each of its steps (warmup 100 peaking after it, 5001 steps) against get_lr at
                the char config's (warmup 100, max_iters 5000: nanoGPT trains iterations 0..5000): <= 1e-5

and, not part of the check: the parameters' relative distance after the last step, and the first loss in bf16
(zoo's bf16 dtype, nanoGPT under CPU autocast).
Exits 1 when a check fails.

    python bench/nanogpt_parity.py --nanogpt ../nanoGPT                  # width 128, depth 2, 4 heads, T 64, batch 8
    python bench/nanogpt_parity.py --nanogpt ../nanoGPT --bias           # with biases in Linear and LayerNorm
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from nanogpt_char import char_splits, checkout, get_lr, shape_args, windows
from nanogpt_weights import to_nanogpt

import zoo.models
import zoo.param
from zoo import optim, schedule
from zoo.config import resolve
from zoo.train.step import build_program, loss_and_metrics

ROOT = Path(__file__).resolve().parents[1]
WD, BETAS, CLIP = 0.1, (0.9, 0.99), 1.0
FIRST, FIRST_RTOL, ALL_RTOL, GRAD_RTOL = 10, 1e-5, 1e-4, 1e-4
DROPOUT_SES = 4.0  # two means equal in distribution differ by more than 4 standard errors with probability 6e-5
DROPOUT_BATCH = 64  # windows of the dropout check's batch (of the val split): more tokens, a smaller standard error


def zoo_program(args: argparse.Namespace, vocab: int, dtype: str = "float32", dropout: float = 0.0):
    cfg = zoo.models.config("gpt", width=args.width, depth=args.depth, head_dim=args.width // args.heads,
                            seq_len=args.block, vocab_size=vocab, dropout=dropout, bias=args.bias, dtype=dtype)
    plugin = zoo.param.get("sp")
    ocfg = optim.OptimConfig(name="adamw", lr=args.lr, b1=BETAS[0], b2=BETAS[1], eps=1e-8, weight_decay=WD,
                             clip_norm=CLIP)  # constant schedule: each step's LR is set from get_lr
    return build_program(lambda r: zoo.models.create("gpt", cfg, plugin, r), plugin, ocfg, jnp.dtype(dtype)), plugin


def as_model(prog, state, params) -> nnx.Module:
    return nnx.merge(prog.graphdef, params, state["rest"])


def zoo_grads(prog, state, batch) -> dict[str, np.ndarray]:
    """The gradient of the batch loss, in nanoGPT's names."""
    grads = jax.grad(lambda p: loss_and_metrics(as_model(prog, state, p), batch, None, False)[0])(state["params"])
    return to_nanogpt(as_model(prog, state, grads))


def nanogpt_model(args: argparse.Namespace, vocab: int, weights: dict[str, np.ndarray], dropout: float = 0.0):
    import torch  # here, not at the top: parsing the flags needs no torch
    sys.path.insert(0, args.nanogpt)
    from model import GPT, GPTConfig  # nanoGPT's

    with contextlib.redirect_stdout(sys.stderr):
        model = GPT(GPTConfig(block_size=args.block, vocab_size=vocab, n_layer=args.depth, n_head=args.heads,
                              n_embd=args.width, dropout=dropout, bias=args.bias))
        model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in weights.items()}, strict=True)
        opt = model.configure_optimizers(WD, args.lr, BETAS, "cpu")
    assert model.lm_head.weight is model.transformer.wte.weight
    return model, opt


def decay_matches(prog, state, plugin, model, opt) -> bool:
    """zoo's decayed tensors (its plugin's weight-decay rule) are configure_optimizers' decay group."""
    rules = optim.rules(plugin, state["params"], optim.OptimConfig(name="adamw"))
    filled = jax.tree.map(lambda p, w: jnp.full(p.shape, w, jnp.float32), state["params"], rules.wd_mult)
    zoo_decayed = {k for k, v in to_nanogpt(as_model(prog, state, filled)).items() if np.all(v > 0)}
    names = {id(p): n for n, p in model.named_parameters()}
    torch_decayed = {names[id(p)] for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    return zoo_decayed - {"lm_head.weight"} == torch_decayed


def schedule_gap(lr: float) -> dict[str, float]:
    """The gpt recipe's schedule (zoo.config.resolve's, at this LR) against get_lr at the char config (warmup 100,
    max_iters 5000: iterations 0..5000, min 0.1 lr): the largest relative difference during the warmup and after
    it."""
    cfg = resolve({"model": "gpt", "lr": lr})
    steps = np.arange(cfg.loop.steps)
    ours = lr * np.asarray(jax.vmap(schedule.schedule_shape(cfg.optim, schedule.last_step(cfg.loop.steps)))(steps))
    theirs = np.array([get_lr(int(t), lr, 100, 5000, 0.1 * lr) for t in steps])
    rel = np.abs(ours - theirs) / theirs
    return {"warmup": float(rel[:100].max()), "after": float(rel[100:].max())}


def bf16_first_loss(args, vocab, model, x, y) -> dict[str, float]:
    """The first batch's loss in bf16: zoo's bfloat16 dtype (f32 stream, LayerNorm, softmax and loss) and nanoGPT
    under torch's CPU autocast, from the same weights."""
    import torch
    prog, _ = zoo_program(args, vocab, "bfloat16")
    state = prog.init(jax.random.key(args.seed))
    model_bf16 = as_model(prog, state, state["params"])
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        theirs = float(model(torch.from_numpy(x), torch.from_numpy(y))[1])
    ours = float(loss_and_metrics(model_bf16, {"x": jnp.asarray(x), "y": jnp.asarray(y)}, None, False,
                                  jnp.bfloat16)[0])
    return {"zoo": ours, "nanogpt": theirs}


def dropout_means(args: argparse.Namespace, vocab: int, prog, state, x: np.ndarray, y: np.ndarray) -> dict:
    """The mean training-mode loss over --masks dropout draws at rate --dropout, on both sides at the same weights
    (zoo's `state`) and batch, with each mean's standard error: each side draws its own masks, so the two agree in
    distribution, not draw by draw, when dropout sits where nanoGPT puts it (embeddings, attention probabilities,
    branch outputs) at the same scale. Checked: the means differ by at most DROPOUT_SES combined standard errors."""
    import torch

    dprog, _ = zoo_program(args, vocab, dropout=args.dropout)
    model = nnx.merge(dprog.graphdef, state["params"], state["rest"])
    batch = {"x": jnp.asarray(x, jnp.int32), "y": jnp.asarray(y, jnp.int32)}
    loss = nnx.jit(lambda m, key: loss_and_metrics(m, batch, key, True)[0])
    ours = np.array([float(loss(model, jax.random.key(i))) for i in range(args.masks)])
    theirs_model, _ = nanogpt_model(args, vocab, to_nanogpt(as_model(prog, state, state["params"])), args.dropout)
    theirs_model.train()
    with torch.no_grad():
        theirs = np.array([theirs_model(torch.from_numpy(x), torch.from_numpy(y))[1].item()
                           for _ in range(args.masks)])
    out = {"rate": args.dropout, "masks": args.masks, **{
        side: {"mean": float(v.mean()), "se": float(v.std(ddof=1) / np.sqrt(len(v)))}
        for side, v in (("zoo", ours), ("nanogpt", theirs))}}
    out["ses_apart"] = abs(out["zoo"]["mean"] - out["nanogpt"]["mean"]) / math.hypot(out["zoo"]["se"],
                                                                                      out["nanogpt"]["se"])
    return out


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(b), 1e-30))


def run(args: argparse.Namespace) -> dict:
    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    splits, vocab = char_splits(args.data)
    prog, plugin = zoo_program(args, vocab)
    state = jax.jit(prog.init)(jax.random.key(args.seed))
    weights = to_nanogpt(as_model(prog, state, state["params"]))
    model, opt = nanogpt_model(args, vocab, weights)
    step_fn = jax.jit(prog.train_step)
    rng = np.random.default_rng(args.seed)
    rows, grads = [], {}
    for step in range(args.steps):
        x, y = windows(splits["train"], rng.integers(0, len(splits["train"]) - args.block, args.batch), args.block)
        lr = get_lr(step, args.lr, args.warmup, 5000, 0.1 * args.lr)
        batch = {"x": jnp.asarray(x, jnp.int32), "y": jnp.asarray(y, jnp.int32)}
        if step == 0:
            ours = zoo_grads(prog, state, batch)
        state, metrics = step_fn({**state, "opt": optim.set_lr(state["opt"], lr)}, batch)
        for group in opt.param_groups:
            group["lr"] = lr
        _, loss = model(torch.from_numpy(x), torch.from_numpy(y))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if step == 0:
            theirs = {n: p.grad.numpy() for n, p in model.named_parameters()}
            grads = {n: rel(ours[n], g) for n, g in theirs.items()}
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        rows.append({"step": step, "lr": lr, "zoo": float(metrics["loss"]), "nanogpt": loss.item()})
    final = to_nanogpt(as_model(prog, state, state["params"]))
    params = {n: rel(final[n], p.detach().numpy()) for n, p in model.named_parameters()}
    gaps = [abs(r["zoo"] - r["nanogpt"]) / abs(r["nanogpt"]) for r in rows]
    x0, y0 = windows(splits["train"], np.random.default_rng(args.seed).integers(
        0, len(splits["train"]) - args.block, args.batch), args.block)
    xd, yd = windows(splits["val"], np.random.default_rng(args.seed).integers(
        0, len(splits["val"]) - args.block, DROPOUT_BATCH), args.block)
    dropout = dropout_means(args, vocab, prog, state, xd, yd)
    schedule = schedule_gap(args.lr)
    checks = {"losses_first": max(gaps[:FIRST]) <= FIRST_RTOL, "losses_all": max(gaps) <= ALL_RTOL,
              "schedule": max(schedule.values()) <= FIRST_RTOL,
              "grads": max(grads.values()) <= GRAD_RTOL, "decay": decay_matches(prog, state, plugin, model, opt),
              "dropout": dropout["ses_apart"] <= DROPOUT_SES}
    with torch.no_grad():
        model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in weights.items()})
    return {"shape": {k: getattr(args, k) for k in ("width", "depth", "heads", "block", "batch", "bias", "steps")},
            "rows": rows, "loss_gap_first": max(gaps[:FIRST]), "loss_gap_all": max(gaps), "grad_gap": grads,
            "param_gap": params, "schedule_gap": schedule, "dropout": dropout,
            "bf16_first_loss": bf16_first_loss(args, vocab, model, x0, y0), "checks": checks}


def report(out: dict) -> str:
    s = out["shape"]
    lines = [f"zoo's GPT (sp, f32, dropout 0) against nanoGPT's model.py: width {s['width']}, depth {s['depth']}, "
             f"{s['heads']} heads, context {s['block']}, batch {s['batch']}, bias {s['bias']}, {s['steps']} AdamW "
             "steps", "", "| step | LR | zoo loss | nanoGPT loss | relative difference |", "|---|---|---|---|---|"]
    for r in out["rows"]:
        if r["step"] < FIRST or (r["step"] + 1) % 10 == 0:
            gap = abs(r["zoo"] - r["nanogpt"]) / r["nanogpt"]
            lines.append(f"| {r['step']} | {r['lr']:.3e} | {r['zoo']:.7f} | {r['nanogpt']:.7f} | {gap:.1e} |")
    worst_g = max(out["grad_gap"], key=out["grad_gap"].get)
    worst_p = max(out["param_gap"], key=out["param_gap"].get)
    c, bf, d = out["checks"], out["bf16_first_loss"], out["dropout"]
    lines += ["", f"losses: largest relative difference {out['loss_gap_first']:.1e} over the first {FIRST} steps "
              f"(<= {FIRST_RTOL:g}: {c['losses_first']}), {out['loss_gap_all']:.1e} over all (<= {ALL_RTOL:g}: "
              f"{c['losses_all']})",
              f"gradients at step 0: largest relative difference {out['grad_gap'][worst_g]:.1e} ({worst_g}; "
              f"<= {GRAD_RTOL:g}: {c['grads']})",
              f"weight decay on the same tensors as configure_optimizers: {c['decay']}",
              f"parameters after the last step: largest relative difference {out['param_gap'][worst_p]:.1e} "
              f"({worst_p})",
              f"the gpt recipe's LR schedule against get_lr (warmup 100, max_iters 5000): largest relative difference "
              f"{out['schedule_gap']['warmup']:.1e} in the warmup, {out['schedule_gap']['after']:.1e} after it (<= "
              f"{FIRST_RTOL:g}: {c['schedule']})",
              f"first loss in bf16: zoo {bf['zoo']:.5f}, nanoGPT (CPU autocast) {bf['nanogpt']:.5f}; f32 "
              f"{out['rows'][0]['nanogpt']:.5f}",
              f"with dropout {d['rate']:g} at the last step's weights, the mean training-mode loss over {d['masks']} "
              f"draws of the masks: zoo {d['zoo']['mean']:.5f} +- {d['zoo']['se']:.5f}, nanoGPT "
              f"{d['nanogpt']['mean']:.5f} +- {d['nanogpt']['se']:.5f} (standard errors), {d['ses_apart']:.1f} "
              f"standard errors apart (<= {DROPOUT_SES:g}: {c['dropout']})"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shape_args(p, width=128, depth=2, heads=4, block=64, batch=8)
    p.add_argument("--data", default=str(ROOT / "data" / "tinyshakespeare.txt"))
    p.add_argument("--bias", action="store_true", help="biases in Linear and LayerNorm on both sides")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dropout", type=float, default=0.2, help="the rate of the dropout check (the char config's)")
    p.add_argument("--masks", type=int, default=200, help="draws of the dropout masks on each side")
    p.add_argument("--json", help="also write the rows and checks here")
    args = p.parse_args(argv)
    args.nanogpt = str(checkout(args.nanogpt))
    out = run(args)
    print(report(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    if not all(out["checks"].values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
