"""The plugin contract on the MLP-ResNet: SP at the base shape, Adam's first step, and clear errors."""

from __future__ import annotations

import math
import re

import jax
import numpy as np
import pytest
from flax import nnx
from param_helpers import SP_INIT_OPTIONS, batch, leaves, program, trajectory

import zoo.param as P
from zoo.param.tags import Tag
from zoo.train.step import loss_and_metrics


@pytest.mark.parametrize("optim", ["adam", "sgd"])
def test_every_plugin_is_sp_at_the_base_shape(optim):
    """design.md section 3 / TP IVb Def 2.2.1 at m = n/n0 = 1, r = L/L0 = 1: every multiplier, init std, LR and
    epsilon factor is SP's, so the init, the outputs and the first 3 updates equal SP's (fp32, rtol 1e-7)."""
    data = batch()
    ref = trajectory(program(P.get("sp"), optim), data)
    for name in P.names():
        got = trajectory(program(P.get(name, **SP_INIT_OPTIONS.get(name, {})), optim), data)
        for t, (a, b) in enumerate(zip(ref, got, strict=True)):
            np.testing.assert_allclose(b["logits"], a["logits"], rtol=1e-7, atol=0, err_msg=f"{name} step {t}")
            for (path, va), vb in zip(leaves(a["params"]).items(), leaves(b["params"]).values(), strict=True):
                np.testing.assert_allclose(vb[...], va[...], rtol=1e-7, atol=0, err_msg=f"{name} {path} step {t}")


@pytest.mark.parametrize("name", P.names())
def test_adam_first_step_is_lr_times_lr_mult_times_sign(name):
    """TP IVb section 2.1 and seed_tp4b_adam.md 6.3: with eps -> 0 Adam's first update is sign(g), so every entry
    with g != 0 moves by exactly lr * m^-c * r^-gamma against its gradient (in W-space also times the forward
    multiplier m^-a, and readout_mult on the readout), with (a, b, c, d) the plugin's exponents for the
    parameter's tag, and entries with g = 0 stay; at n = 4 n0 and L = 2 L0."""
    plugin, lr = P.get(name), 1e-2
    prog = program(plugin, "adam", lr=lr, eps=1e-20, base_width=16, base_depth=2)
    state, data = prog.init(jax.random.key(0)), batch()
    grads = jax.grad(lambda p: loss_and_metrics(nnx.merge(prog.graphdef, p, state["rest"]), data, None, True)[0])(
        state["params"])
    new, _ = prog.train_step(state, data)
    rest, old, g = leaves(state["rest"]), leaves(state["params"]), leaves(grads)
    for path, var in leaves(new["params"]).items():
        tag = var.get_metadata()["tag"]
        w0, w1, gp = (np.asarray(v[...], np.float64) for v in (old[path], var, g[path]))
        assert (gp != 0).mean() > 0.3, f"{path}: too few nonzero gradient entries to test"
        a, _, c, _ = (float(e) for e in plugin.abcd(tag))
        step = lr * tag.width_mult**-c * tag.depth_ratio ** -float(plugin.gamma)
        mult, want = 1.0, step
        if path.endswith("['kernel']"):  # W-space: times the multiplier the model applies, which must be m^-a
            mult = np.asarray(rest[path.replace("['kernel']", "['mult']")][...], np.float64)
            mult = mult.reshape(mult.shape + (1,) * (w1.ndim - mult.ndim))
            want = step * tag.width_mult**-a * (float(plugin.readout_mult) if tag.kind == "output" else 1.0)
        tol = mult * (1e-5 * step + np.spacing(np.abs(w1).astype(np.float32)))  # fp32 update and w0 + update
        np.testing.assert_array_less(np.abs(mult * (w1 - w0) + want * np.sign(gp)), tol, err_msg=f"{name} {path}")


def test_unknown_plugin_option_or_value_lists_what_exists():
    """design.md section 10: bad input gives one clear error naming the choices."""
    with pytest.raises(ValueError, match="unknown parametrization 'nope'") as err:
        P.get("nope")
    assert all(name in str(err.value) for name in P.names())
    with pytest.raises(ValueError, match="no option 'nope'") as err:
        P.get("mup", nope=1)
    assert all(option in str(err.value) for option in P.options("mup"))
    with pytest.raises(ValueError, match="ivb, table3, mean_field"):
        P.get("mup", gauge="nope")
    with pytest.raises(ValueError, match="must be a number"):
        P.get("depth_mup", alpha="half")
    with pytest.raises(ValueError, match="four numbers"):
        P.get("abcd", hidden="0,0.5,1")
    with pytest.raises(ValueError, match="option gamma of 'completep' must be a number, got 'abc'"):
        P.get("completep", gamma="abc")  # a None default (1 - alpha) took any text, which reached the arithmetic
    with pytest.raises(ValueError, match=r"s in \[0, 1\]"):
        P.get("ntk_mup", s=2.0)
    for key in ("init_mult", "readout_mult"):  # 0 trained nothing without a word
        with pytest.raises(ValueError, match=f"option {key} of 'sp' multiplies .*: it must be positive, got 0"):
            P.get("sp", **{key: "0"})


@pytest.mark.parametrize("options, message", [
    ({"init_mult": "1e-50"}, "option init_mult of 'sp' 1e-50 is below float32's smallest normal number"),
    ({"branch_mult": "-1e-45"}, "option branch_mult of 'sp' -1e-45 is below float32's smallest normal number"),
    ({"readout_mult": "1e300"}, "option readout_mult of 'sp' 1e+300 is beyond float32's largest number"),
    ({"attn_mult": 1e39}, "option attn_mult of 'sp' 1e+39 is beyond float32's largest number"),
])
def test_an_option_float32_makes_0_or_inf_is_refused(options, message):
    """init_mult=1e-50 is 0 in float32: the run trained nothing (loss ln 10 throughout) with exit status 0, and
    branch_mult=1e300 wrote a run dir before its loss became nan ('lower --lr')."""
    with pytest.raises(ValueError, match=re.escape(message)):
        P.get("sp", **options)
    assert P.get("sp", branch_mult=0.0).branch_mult == 0.0  # every branch off: a choice, not an underflow


@pytest.mark.parametrize("plugin, options, tag, message", [
    ("abcd", {"hidden": "200,0,0,0"}, ("hidden", 64), r"abcd's forward width multiplier m\^-a is 2\^-200"),
    ("abcd", {"input": "-1e300,0,0,0"}, ("input", 64), r"abcd's forward width multiplier m\^-a is 2\^1e\+300 = inf"),
])
def test_an_exponent_float32_cannot_hold_is_refused(plugin, options, tag, message):
    """A forward multiplier m^-a beyond float32 (Python's OverflowError escaped as 'unexpected', or a silent 0 that
    trained nothing) and an attention scale d^-e beyond it (ZeroDivisionError) are one ValueError naming the rule."""
    kind, width = tag
    with pytest.raises(ValueError, match=message):
        P.get(plugin, **options).multiplier(Tag(kind, fan_in=width, fan_out=width, width_mult=2.0))
    with pytest.raises(ValueError, match="abcd's attention scale"):
        P.get("abcd", attn_exp=100.0).attn_scale(64, 32)


def test_freeze_keeps_the_listed_kinds_at_their_init():
    """The `freeze` option every plugin takes (TP VI trains only the residual blocks): after 3 AdamW steps with
    weight decay the frozen kinds (input, output) equal their init exactly, every other kind moved; an unknown kind
    is one clear error."""
    prog = program(P.get("depth_mup", freeze="input, output"), "adamw", base_width=32, base_depth=2)
    state, data = prog.init(jax.random.key(0)), batch()
    for _ in range(3):
        state, _ = prog.train_step(state, data)
    before = leaves(prog.init(jax.random.key(0))["params"])
    for path, var in leaves(state["params"]).items():
        moved = not np.array_equal(np.asarray(var[...]), np.asarray(before[path][...]))
        assert moved == (var.get_metadata()["tag"].kind not in ("input", "output")), path
    with pytest.raises(ValueError, match="freeze: unknown kind hiden; kinds are input, hidden"):
        program(P.get("sp", freeze="hiden"))
    with pytest.raises(ValueError, match="freezes every parameter of the model: nothing would train"):
        program(P.get("sp", freeze="input,hidden,output,vector,scalar"))


def test_freeze_is_one_setting_in_any_order_and_only_as_text():
    """`output, input` and `input,output` freeze the same kinds, so they are one run's identity (a resume with the
    other order is the same run); a settings file's YAML list is refused by name, not read as its Python text."""
    assert P.get("completep", freeze="output, input").freeze == "input,output"
    assert P.stored_options("mup", {"freeze": "vector,input"}) == {"freeze": "input,vector"}
    assert P.get("sp").freeze == ""
    with pytest.raises(ValueError, match="option freeze of 'ntk' must be a string, got \\['input'\\]"):
        P.get("ntk", freeze=["input"])


@pytest.mark.parametrize("name", ["mup", "depth_mup", "ntk"])
def test_init_mult_scales_every_init_std_and_nothing_else(name):
    """init_mult c (TP-V's tunable init scale) draws every parameter as c times the same draw: the random ones are
    c times those of c = 1 (same seed; rtol 1e-6, the product's rounding), the constant ones (norm gains, zero
    biases) unchanged; the first
    Adam step is the same size (its LR rules do not see c). `critical` refuses it (sigma_w is its init scale)."""
    c = 0.375
    plain, scaled = (program(P.get(name, **o), base_width=32, base_depth=2) for o in ({}, {"init_mult": str(c)}))
    a, b = leaves(plain.init(jax.random.key(0))["params"]), leaves(scaled.init(jax.random.key(0))["params"])
    for path, va in a.items():
        va, vb = np.asarray(va[...]), np.asarray(b[path][...])
        constant = np.all(va == va.ravel()[0])
        np.testing.assert_allclose(vb, va if constant else c * va, rtol=1e-6, atol=0, err_msg=path)
    data = batch()
    steps = [p.train_step(p.init(jax.random.key(0)), data)[0]["params"] for p in (plain, scaled)]
    for path in a:
        moved = [np.abs(np.asarray(leaves(s)[path][...]) - np.asarray(init[path][...])).max()
                 for s, init in zip(steps, (a, b), strict=True)]
        np.testing.assert_allclose(moved[1], moved[0], rtol=1e-3, err_msg=path)
    with pytest.raises(ValueError, match="init_mult does not apply"):
        P.get("critical", init_mult=2.0)


@pytest.mark.parametrize("name", ["sp", "ntk", "mup", "mean_field", "depth_mup", "completep", "ntk_mup", "abcd",
                                  "critical"])
def test_zero_init_starts_readouts_and_queries_at_zero_under_every_plugin(name):
    """zero_init starts readouts and attention queries at 0 (TP-V) under every plugin; critical's own init (sigma_w /
    sqrt(fan_in) on every hidden matrix) skipped it for the queries: a GPT under critical with zero_init=true drew its
    query kernel at sigma_w / sqrt(fan_in) (0.16 at width 40) while its readout was 0."""
    opts = {"sigma_w": 1.0, "sigma_b": 0.0, "mu": 1.0} if name == "critical" else {}
    plugin, plain = P.get(name, zero_init=True, **opts), P.get(name, **opts)
    query, key, readout = (Tag("hidden", 40, 40, width_mult=2.5, role="query"),
                           Tag("hidden", 40, 40, width_mult=2.5, role="key"), Tag("output", 40, 7, width_mult=2.5))
    assert plugin.init_std(query, 0.25) == plugin.init_std(readout, 0.25) == 0.0
    assert plugin.init_std(key, 0.25) == plain.init_std(key, 0.25) > 0.0  # the rest keeps its init


@pytest.mark.parametrize("plugin", ["depth_mup", "completep"])
@pytest.mark.parametrize("alpha, depth, base_depth", [(2000.0, 2, 8), (90.0, 3, 1), (-70.0, 12, 3), (70.0, 3, 1),
                                                      (-45.0, 12, 3)])
def test_a_depth_factor_beyond_float32_is_refused_naming_the_option(plugin, alpha, depth, base_depth):
    """(L/L0)^-alpha at an alpha far outside the family: Python's OverflowError (2000 at L/L0 = 1/4: 4^2000), or a
    number float32 turns into 0 or inf in the model (3^-90 = 1e-43, 4^70 = 1e42), is refused in one line naming the
    option; one float32 holds passes (3^-70 = 4e-34, 4^45 = 1e27)."""
    log_factor = -alpha * math.log(depth / base_depth)
    exact = math.exp(log_factor) if log_factor < 700 else math.inf
    tiny, big = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)
    p = P.get(plugin, alpha=alpha, gamma=0.0)
    if tiny <= exact <= big:
        assert p.branch_multiplier(depth, base_depth) == pytest.approx(exact)
    else:
        with pytest.raises(ValueError, match=f"option alpha of '{plugin}': the branch multiplier's .* outside "
                                             "float32's range"):
            p.branch_multiplier(depth, base_depth)


def test_a_name_where_a_plugin_belongs_is_one_clear_error():
    """zoo.models.create(..., "mup", ...) failed as "'str' object has no attribute 'for_model'", zoo.optim.build as
    "'str' object has no attribute 'frozen'", zoo.param.get(123) as "argument of type 'int' is not iterable"."""
    from flax import nnx

    import zoo.models
    import zoo.optim

    with pytest.raises(TypeError, match=r"zoo.models.create takes a plugin \(zoo.param.get\(name\)\), not str"):
        zoo.models.create("mlp_resnet", zoo.models.config("mlp_resnet", width=8, depth=1), "mup", nnx.Rngs(0))
    with pytest.raises(TypeError, match=r"zoo.optim.build takes a plugin \(zoo.param.get\(name\)\), not type"):
        zoo.optim.build(zoo.optim.OptimConfig(), P.PLUGINS.get("mup"), {})
    with pytest.raises(TypeError, match=r"zoo.param.get takes a plugin's name \(one of abcd, .*\), not int"):
        P.get(123)


@pytest.mark.parametrize("model", ["gpt", "mlp_resnet"])
def test_a_bias_init_on_a_model_without_biases_is_refused_for_training(model):
    """critical's sigma_b draws the residual branches' biases; on a model built without them (GPT's and the
    MLP-ResNet's default) it changed nothing, bit for bit, and entered the run's identity: a run to train is refused.
    A run recorded with it before is still read (its model is built: an export, a sample, an audit, a fork)."""
    import zoo.models as M
    from zoo.config import RunConfig
    from zoo.train.setup import setup

    with pytest.raises(ValueError, match=f"sigma_b=0.3 draws the residual branches' biases, and this {model} has none"):
        P.get("critical", sigma_b=0.3).check_model(model, M.config(model))
    P.get("critical", sigma_b=0.0).check_model(model, M.config(model))
    P.get("critical", sigma_b=0.3).check_model(model, M.config(model, bias=True))
    data = {"data": "synthetic:text", "seq_len": 8, "model_opt": {"head_dim": 8}} if model == "gpt" else {}
    cfg = RunConfig.from_flat({"model": model, "param": "critical", "param_opt": {"sigma_b": 0.3}, "width": 16,
                               "depth": 1, "data": "synthetic", "steps": 1, **data})
    with pytest.raises(ValueError, match="sigma_b=0.3 draws"):
        setup(cfg)
    assert setup(cfg, reading=True).plugin.sigma_b == 0.3
