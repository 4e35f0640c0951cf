"""The multiplier-free form of a plugin (zoo.param.multiplier_free): TP IVb's gauge shift t = -a on every parameter,
the branch multiplier folded into the matrix ending each branch and the attention-logit scale into the query.

The zoo's MLP-ResNet and GPT, written in SP form (built under `sp` at base width = width and base depth = depth:
no multipliers, logits q.k / sqrt(d)), trained with infer_tags -> rescale_init -> zoo.optim.build(free, tags), must
follow their native training under the plugin: after each of 5 steps W_free = c W_native for every parameter, with
c the multiplier folded into it, and the logits and losses agree. Both width multipliers (2 and 4) are taken at one
width (64 over base widths 32 and 16): their runs share one compiled program.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import zoo.models as M
import zoo.param as P
from zoo import optim
from zoo.param.tags import Tag
from zoo.train.step import loss_and_metrics, run_once_options
from zoo.tree import key_path

WIDTH, BASE_WIDTHS, DEPTH, BASE_DEPTH, STEPS = 64, (32, 16), 4, 1, 5
MODELS = {
    "mlp_resnet": (dict(in_shape=(8,), num_classes=4, bias=True, pre_ln=True, activation="relu"),
                   {"^stack/blocks/": ("stacked", "branch"), "^stack/blocks/w1/": "branch_output",
                    "^head/kernel$": "readout"}),  # (classes, width) = (4, 64): a leading axis the depth's size
    # rescale_init maps LeCun SP weights; a table that is also the readout cannot carry both its multipliers folded
    # (the SP form has no readout multiplier)
    "gpt": (dict(vocab_size=11, seq_len=8, head_dim=16, scale_heads=False, num_heads=2, dropout=0.0, init_std=None,
                 scaled_residual_init=False, tie_embeddings=False, bias=True),
            {"^stack/blocks/": ("stacked", "branch"), "/attn/q/": "query", "/(attn/o|mlp/fc2)/": "branch_output",
             "/table$": "in_out"}),
}
PLUGINS = {
    "mup": P.get("mup"),
    "depth_mup": P.get("depth_mup"),
    "ntk_mup": P.get("ntk_mup", s=0.5),
    # muP's input in TP-V's Table-8 gauge and hidden weights in the mean-field gauge, with every constant set
    "abcd": P.get("abcd", input="-0.5,0.5,0.5,0.5", hidden="0.5,0,0.5,1.5", output="1,0,0,1", vector="0,0,0,1",
                  attn_exp=1.0, alpha=0.5, gamma=0.5, branch_mult=0.8, readout_mult=2.0, attn_mult=1.5),
}
# the key bias adds q.b_k to a whole row of logits, which softmax ignores: its gradient is 0 in exact arithmetic and
# float noise otherwise (which Adam turns into sign steps); it is compared through the logits it does not change
NULL_DIRECTION = "attn/k/bias"
OPTIM = {"adam": optim.OptimConfig(name="adam", lr=3e-3, weight_decay=0.01),
         "sgd": optim.OptimConfig(name="sgd", lr=0.1, weight_decay=0.01)}


def config(model: str, width: int, base_width: int | None = None):
    """The native config (base width `base_width`, base depth 1) or, without a base width, its SP form (base = the
    size itself)."""
    base = dict(base_width=base_width, base_depth=BASE_DEPTH) if base_width else dict(base_width=width,
                                                                                      base_depth=DEPTH)
    return M.config(model, width=width, depth=DEPTH, scan=True, **base, **MODELS[model][0])


def create(model: str, width: int, plugin: str, base_width: int | None) -> nnx.Module:
    """The model under plugin `plugin` (a name in PLUGINS, or "sp" for the SP form), seed 0."""
    return M.create(model, config(model, width, base_width), P.get("sp") if plugin == "sp" else PLUGINS[plugin],
                    nnx.Rngs(0))


@functools.cache
def initial_states(model: str, width: int) -> dict[str, tuple]:
    """(params, rest) of the SP form ("sp") and of every plugin's native model at each base width ("name@base"),
    from one program compiled without backend optimisation (it runs once; eager inits compile a kernel per op and
    shape)."""
    combos = {"sp": ("sp", None)} | {f"{name}@{base}": (name, base) for base in BASE_WIDTHS for name in PLUGINS}
    return run_once(jax.jit(lambda: {k: nnx.split(create(model, width, *c), nnx.Param, ...)[1:]
                                     for k, c in combos.items()}))


def split(model: str, width: int, plugin: str, base_width: int | None = None):
    """(graphdef, params, rest) of the initialised model (native at `base_width`, or the SP form)."""
    graphdef = nnx.split(nnx.eval_shape(lambda: create(model, width, plugin, base_width)), nnx.Param, ...)[0]
    return graphdef, *initial_states(model, width)["sp" if base_width is None else f"{plugin}@{base_width}"]


def batch(model: str) -> dict[str, jax.Array]:
    kx, ky = jax.random.split(jax.random.key(7))
    if model == "gpt":
        return {"x": jax.random.randint(kx, (4, 8), 0, 11), "y": jax.random.randint(ky, (4, 8), 0, 11)}
    return {"x": jax.random.normal(kx, (8, 8)), "y": jax.random.randint(ky, (8,), 0, 4)}


def run_once(fn, *args):
    """The jitted `fn` on `args`, compiled without XLA's backend optimisation (each program here runs once)."""
    return fn.lower(*args).compile(compiler_options=run_once_options())(*args)


def trainer(model: str, width: int):
    """A jitted run of `STEPS` steps of each optimizer on the SP-form architecture, vmapped over runs whose
    multipliers (in `rest`), parameters and per-parameter optimizer trees are arguments: the native and the
    multiplier-free runs of every plugin share one compile."""
    graphdef = split(model, width, "sp")[0]

    def run_one(cfg, params, rest, rules, data):
        tx = optim.chain(cfg, *rules)

        def step(carry, _):
            params, opt = carry
            loss, grads = jax.value_and_grad(
                lambda p: loss_and_metrics(nnx.merge(graphdef, p, rest), data, None, True)[0])(params)
            updates, opt = tx.update(grads, opt, params)
            params = optax.apply_updates(params, updates)
            return (params, opt), (loss, nnx.merge(graphdef, params, rest)(data["x"])[0])

        (params, _), (losses, logits) = jax.lax.scan(step, (params, tx.init(params)), length=STEPS)
        return params, losses, logits

    @jax.jit
    def run(params, rest, rules, data):
        return {name: jax.vmap(functools.partial(run_one, cfg), in_axes=(0, 0, 0, None))(params, rest, rules, data)
                for name, cfg in OPTIM.items()}

    return run


def relabel(tree, like):
    """`tree`'s leaves in the structure of `like` (same parameter paths, other tags in the nnx metadata)."""
    return jax.tree.unflatten(jax.tree.structure(like), jax.tree.leaves(tree))


def as_f32(tree):
    """Rule trees as f32 arrays."""
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), tree)


def native_inputs(model, width, base_width, name):
    """(params, rest, rules) of the native model, in the SP-form structure."""
    plugin = PLUGINS[name]
    _, params, rest = split(model, width, name, base_width)
    _, sp_params, sp_rest = split(model, width, "sp")
    rules = [as_f32(relabel(r, sp_params)) for r in optim.rules(plugin, params)]
    return relabel(params, sp_params), relabel(rest, sp_rest), rules


def free_inputs(model, width, base_width, name):
    """(params, rest, rules) of the SP-form model through infer_tags -> rescale_init -> the chain's rules, and
    its tags and multiplier-free plugin."""
    base = nnx.state(nnx.eval_shape(lambda: M.create(model, config(model, base_width), P.get("sp"), nnx.Rngs(0))),
                     nnx.Param)
    _, params, rest = split(model, width, "sp")
    tags = P.infer_tags(base, params, base_width=base_width, width=width, rules=MODELS[model][1], depth=DEPTH,
                        base_depth=BASE_DEPTH, layout="out_in")  # zoo's Dense kernels are (out, in), its tables not
    heads = dict(head_dim=width // 2, base_head_dim=base_width // 2) if model == "gpt" else {}
    free = P.multiplier_free(PLUGINS[name], tags, **heads)
    return (P.rescale_init(params, tags, free), rest, [as_f32(r) for r in optim.rules(free, tags)]), tags, free


def folded(tree, tags, free):
    """Path -> c * W for every parameter W of `tree`."""
    c = {key_path(p): free.folded(t) for p, t in jax.tree_util.tree_flatten_with_path(tags)[0]}
    return {key_path(p): np.asarray(w, np.float64) * c[key_path(p)]
            for p, w in jax.tree_util.tree_flatten_with_path(tree)[0]}


def paths(tree) -> dict:
    return {key_path(p): np.asarray(w, np.float64) for p, w in jax.tree_util.tree_flatten_with_path(tree)[0]}


def assert_close(got, want, what, rtol=1e-4):
    """Normwise: ||got - want|| <= rtol ||want|| (Adam turns an entry whose gradient is float noise into a step of
    any size: such entries are isolated and do not move the norm)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err, scale = np.linalg.norm(got - want), np.linalg.norm(want)
    assert err <= rtol * scale, (what, err, scale)


def premise(model: str, width: int) -> None:
    """What `trainer` relies on: a native model (at each base width) equals the SP-form graph run with the native
    parameters and multipliers (the graphs differ only in tags and base sizes, which the forward pass does not
    read)."""
    sp_graph, sp_params, sp_rest = split(model, width, "sp")
    natives = [split(model, width, "abcd", base) for base in BASE_WIDTHS]
    x = batch(model)["x"]

    graphdefs = [g for g, _, _ in natives]

    @jax.jit
    def both(native_inputs, sp_inputs):  # one compile for every graph
        return ([nnx.merge(g, p, r)(x)[0] for g, (p, r) in zip(graphdefs, native_inputs, strict=True)],
                [nnx.merge(sp_graph, p, r)(x)[0] for p, r in sp_inputs])

    want, got = run_once(both, [(p, r) for _, p, r in natives],
                         [(relabel(p, sp_params), relabel(r, sp_rest)) for _, p, r in natives])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.long
@pytest.mark.parametrize("model", sorted(MODELS))
def test_multiplier_free_training_equals_native(model):
    """mup, depth_mup, ntk_mup (s = 1/2) and a Depth-muP-like abcd plugin in other gauges (attn_exp = 1, branch,
    readout and attention constants set), at 2x and 4x the base width (64 over 32 and 16) and 4x the base depth,
    f32, Adam and SGD with weight decay: the initial parameters W_free = c W_native (rtol 1e-6), and after each of 5
    steps the losses and logits agree to rtol 1e-4, and after the last W_free = c W_native to rtol 1e-4, for every
    parameter (normwise; the key bias, a null direction of softmax, only through the logits)."""
    premise(model, WIDTH)
    runs, meta = [], []
    for base_width in BASE_WIDTHS:
        for name in PLUGINS:
            free, tags, realization = free_inputs(model, WIDTH, base_width, name)
            runs += [native_inputs(model, WIDTH, base_width, name), free]
            meta.append(((name, f"m={WIDTH // base_width}"), (tags, realization)))
    stacked = [jax.tree.map(lambda *xs: jnp.stack(xs), *part) for part in zip(*runs, strict=True)]
    out = run_once(trainer(model, WIDTH), *stacked, batch(model))
    for i, (name, (tags, realization)) in enumerate(meta):
        init_n, init_f = (jax.tree.map(lambda x, j=j: x[j], stacked[0]) for j in (2 * i, 2 * i + 1))
        want = folded(init_n, tags, realization)
        for path, w in paths(init_f).items():
            assert_close(w, want[path], (name, "init", path), rtol=1e-6)
        for optimizer, (params, losses, logits) in out.items():
            assert_close(losses[2 * i + 1], losses[2 * i], (name, optimizer, "losses"))
            for t in range(STEPS):
                assert_close(logits[2 * i + 1, t], logits[2 * i, t], (name, optimizer, "logits", t))
            want = folded(jax.tree.map(lambda x, j=2 * i: x[j], params), tags, realization)
            for path, w in paths(jax.tree.map(lambda x, j=2 * i + 1: x[j], params)).items():
                if not path.endswith(NULL_DIRECTION):
                    assert_close(w, want[path], (name, optimizer, "params", path))
            assert not np.allclose(logits[2 * i, -1], logits[2 * i, 0])  # it trained


def test_rules_of_a_tag_tree_equal_the_models_own():
    """zoo.optim.build on a pytree of Tags: the per-parameter trees equal those from the nnx metadata."""
    _, params, _ = split("gpt", 64, "depth_mup", 32)
    tags = jax.tree.map(lambda v: v.get_metadata()["tag"], params, is_leaf=lambda x: isinstance(x, nnx.Variable))
    assert all(isinstance(t, Tag) for t in jax.tree.leaves(tags, is_leaf=lambda x: isinstance(x, Tag)))
    for a, b in zip(optim.rules(PLUGINS["depth_mup"], params), optim.rules(PLUGINS["depth_mup"], tags), strict=True):
        assert jax.tree.leaves(a) == jax.tree.leaves(b)


def test_a_plain_dict_of_tags_builds_a_chain():
    """zoo.optim.build takes a plain pytree of Tags; the first Adam step of a hidden weight under muP moves each
    entry by lr * m^-1 (sign(g) at step 1, TP IVb 2.1), an input weight's by lr."""
    tags = {"w_in": Tag("input", 3, 64, width_mult=4.0), "w": Tag("hidden", 64, 64, width_mult=4.0)}
    params = {"w_in": jnp.ones((3, 64)), "w": jnp.ones((64, 64))}
    tx = optim.build(optim.OptimConfig(name="adam", lr=0.1), P.get("mup"), tags)
    grads = jax.tree.map(lambda p: jnp.full_like(p, 0.5), params)
    updates, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(updates["w"], -0.1 / 4.0, rtol=1e-5)
    np.testing.assert_allclose(updates["w_in"], -0.1, rtol=1e-5)


def test_what_has_no_place_to_go_is_refused_in_one_line():
    """critical's skip multiplier mu scales the residual stream (no parameter): refused unless mu = 1; a branch
    multiplier != 1 needs branch_output leaves; a query needs the head dims."""
    with pytest.raises(ValueError, match="critical: the skip multiplier mu scales the residual stream") as err:
        P.multiplier_free(P.get("critical"))  # mu the model's to give (it read "mu (None)")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"the skip multiplier mu \(0.5\) scales"):
        P.multiplier_free(P.get("critical", sigma_w=1.0, sigma_b=0.0, mu=0.5))
    P.multiplier_free(P.get("critical", sigma_w=1.0, sigma_b=0.0, mu=1.0))
    branch = {"w": Tag("hidden", 8, 8, width_mult=2.0, branch=True, depth=8, base_depth=2)}
    with pytest.raises(ValueError, match="mark the matrix that ends each residual branch"):
        P.multiplier_free(P.get("depth_mup"), branch)
    P.multiplier_free(P.get("mup"), branch)  # no depth exponent: the branch multiplier is 1
    query = {"q": Tag("hidden", 8, 8, width_mult=2.0, role="query")}
    with pytest.raises(ValueError, match="head_dim"):
        P.multiplier_free(P.get("mup"), query)


def test_folded_multipliers():
    """c = m^-a (times readout_mult), times branch_mult (L/L0)^-alpha on a branch output and s(d, d0) sqrt(d) on a
    query: depth_mup at m = 4, L/L0 = 4, head dim 64 over a base 16 (muP's logits q.k/d: s sqrt(d) = sqrt(d0/d))."""
    free = P.multiplier_free(P.get("depth_mup", readout_mult=3.0), head_dim=64, base_head_dim=16)
    tag = functools.partial(Tag, fan_in=64, fan_out=64, width_mult=4.0)
    np.testing.assert_allclose(free.folded(tag("output")), 3.0 / 4.0)
    np.testing.assert_allclose(free.folded(tag("hidden", branch=True, depth=8, base_depth=2, role="branch_output")),
                               0.5)
    np.testing.assert_allclose(free.folded(tag("hidden", role="query")), 0.5)
    np.testing.assert_allclose(free.folded(tag("input")), 1.0)
    # the init factor: muP's output std (b = 0 -> after the shift b = 1, std0/m) over SP's (std0/sqrt(m))
    np.testing.assert_allclose(free.init_factor(tag("output")), 3.0 * 4.0**-0.5)


def test_critical_biases_with_no_multiplier_free_form_are_refused():
    """critical with mu = 1 passed multiplier_free, but its sigma_b (std of residual-branch biases, N(0, sigma_b^2))
    was dropped: the free form's factor on such a bias was 1, so the model's zero biases stayed zero (std 0, not
    0.4). Now one line; sigma_b = 0 still has a free form, whose hidden factor is sigma_w."""
    with pytest.raises(ValueError) as err:
        P.multiplier_free(P.get("critical", sigma_w=1.4, sigma_b=0.4, mu=1.0))
    assert "residual-branch biases with std 0.4" in str(err.value) and "\n" not in str(err.value)
    free = P.multiplier_free(P.get("critical", sigma_w=1.4, sigma_b=0.0, mu=1.0))
    hidden = P.Tag("hidden", 64, 64, width_mult=2.0, branch=True, depth=4, base_depth=1)
    assert float(free.init_factor(hidden)) == pytest.approx(1.4)
