"""The parametrization contract: a tag -> init std, forward multiplier, LR, epsilon and weight-decay rules.

In abcd terms (TP IVb Def 2.2.1, section 5 of seed_tp4b_adam.md), with m = n / n0 and r = L / L0 for
parameters inside residual branches (r = 1 elsewhere):

    forward multiplier   m^-a                       (times `readout_mult` on output-kind parameters)
    init std             init_mult * std0 * m^-b    (std0: the SP std at the base width)
    Adam LR multiplier   m^-c * r^-gamma
    gradient pre-scale   m^d  * r^alpha       (Adam epsilon eps * m^-d * r^-alpha; SGD LR m^(d-c) r^(alpha-gamma))
    Muon LR multiplier   m^-(c - k/2) * r^-gamma     (k width axes: the same ||dW||_* scaling as Adam's; zoo.param.
                                                    families; `sp` keeps one global LR under every optimizer)
    branch multiplier    a * r^-alpha                (Depth-muP eq. (1): x <- x + a L^-alpha MS(phi(h)))

At m = 1 and r = 1 every plugin equals SP exactly. Numbers may be traced arrays, so sweeps can vmap over them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from zoo.param import families, predict
from zoo.param.tags import KINDS, Tag
from zoo.schema import comma_items, power, to_float

ABCD = tuple[Any, Any, Any, Any]
SP_TABLE: dict[str, ABCD] = {
    "input": (0, 0, 0, 0),
    "vector": (0, 0, 0, 0),
    "hidden": (0, 0.5, 0, 0),
    "output": (0, 0.5, 0, 0),
    "scalar": (0, 0, 0, 0),
}
MUP_TABLE: dict[str, ABCD] = {
    "input": (0, 0, 0, 1),
    "vector": (0, 0, 0, 1),
    "hidden": (0, 0.5, 1, 1),
    "output": (1, 0, 0, 1),
    "scalar": (0, 0, 0, 0),
}


@dataclasses.dataclass(frozen=True)
class Parametrization:
    """Base plugin. Subclasses set `name`, `table` (per-kind abcd exponents) and their option defaults.

    What a plugin author can rely on: the *stated* rules, i.e. the exponents `abcd` gives each kind (`table`, shifted
    by a gauge where a plugin has one), `global_lr`, `attn_exponent`, alpha and gamma. The audit (zoo.audit.laws)
    derives every law and the coordinate check (zoo.param.predict) every expected slope from them and from theory
    alone (the Muon map c - k/2 included: zoo.param.families.lr_exponent), never from the rule methods below
    (init_std, multiplier, lr_exponent, lr_mult, grad_scale, wd_mult, branch_multiplier, attn_scale): those are what
    the model and the optimizer builder apply, so they are what the checks measure. Override a rule method only to
    apply the stated rules in another way (the multiplier-free form folds multipliers into parameters; `critical`
    chooses a width-free init constant); one that applies another rule than the stated one (a Muon LR with an extra
    1/m on the hidden matrices) fails both checks, by name in the audit and in that kind's own part in the
    coordinate check. To change a rule, state it: a table (or `abcd` with a gauge), or `global_lr`.

    Options every plugin has:
      alpha, gamma: depth exponents (branch multiplier r^-alpha, Adam LR of branch parameters r^-gamma).
      branch_mult: the constant a of the branch multiplier.
      readout_mult: a constant on the output layer's forward multiplier.
      attn_mult: a constant on the attention-logit scale.
      init_mult: a constant on every init std (TP-V's tunable init scale: width-independent, so it transfers).
      zero_init: initialise output-kind weights and attention queries at zero (muP allows it, TP-V); a readout tied
        to the input embedding (the GPT's default) is that embedding, input kind, and stays random.
      freeze: a comma list of kinds that do not train (LR and weight decay 0), e.g. "input,output" as in TP VI's
        depth experiments, which train only the residual blocks.
    """

    name: ClassVar[str] = ""
    table: ClassVar[dict[str, ABCD]] = SP_TABLE
    attn_exponent: ClassVar[float] = 0.5  # logits q.k / d_head^e; muP uses e = 1 (TP-V)
    global_lr: ClassVar[bool] = False  # True: the table's LR exponents under every optimizer family (sp)
    no_depth_law: ClassVar[str] = ""  # why the plugin has no depth scaling a depth sweep could test ("": it has one)

    alpha: Any = 0.0
    gamma: Any = 0.0
    branch_mult: Any = 1.0
    readout_mult: Any = 1.0
    attn_mult: Any = 1.0
    init_mult: Any = 1.0
    zero_init: bool = False
    freeze: str = ""

    def abcd(self, tag: Tag) -> ABCD:
        """The (a, b, c, d) exponents of a tagged parameter."""
        return self.table[tag.kind]

    def multiplier(self, tag: Tag) -> Any:
        """Forward multiplier m^-a (times readout_mult on the output layer)."""
        mult = power(tag.width_mult, -self.abcd(tag)[0], f"{self.name}'s forward width multiplier m^-a")
        return mult * self.readout_mult if tag.kind == "output" else mult

    def tied_exponent(self, readout: Tag, embedding: Tag) -> Any:
        """The width exponent of a readout tied to an input embedding E (f = m^-e h E^T): the output rule
        gauge-shifted onto E's init (TP IVb Prop 2.2.3, theta = b_out - b_in), e = a_out + theta, so that tying keeps
        the untied scaling in every gauge (muP: e = 1, microsoft/mup's MuSharedReadout, also in the table3 gauge
        whose own a_out is 0). Where no shift maps the output's (b, c, d) onto the input's (sp: b differs, c does
        not), no tied model scales as the untied one; the readout keeps its own e = a_out (nanoGPT's tied sp)."""
        a_out, b_out, c_out, d_out = self.abcd(readout)
        _, b_in, c_in, d_in = self.abcd(embedding)
        theta = b_out - b_in
        plain = all(isinstance(v, (int, float)) for v in (theta, c_out, c_in, d_out, d_in))
        if plain and not (math.isclose(c_out - theta, c_in, abs_tol=1e-12)
                          and math.isclose(d_out + theta, d_in, abs_tol=1e-12)):
            theta = 0.0
        return a_out + theta

    def tied_multiplier(self, readout: Tag, embedding: Tag) -> Any:
        """Forward multiplier of a readout tied to an input embedding: m^-tied_exponent times readout_mult."""
        return power(readout.width_mult, -self.tied_exponent(readout, embedding),
                     f"{self.name}'s tied readout multiplier m^-e") * self.readout_mult

    def init_std(self, tag: Tag, std0: float) -> Any:
        """Init std init_mult * std0 * m^-b, or 0 for readouts and queries under zero_init."""
        if self.zeroed(tag):
            return 0.0
        return self.init_mult * std0 * power(tag.width_mult, -self.abcd(tag)[1],
                                             f"{self.name}'s init width factor m^-b")

    def zeroed(self, tag: Tag) -> bool:
        """Whether zero_init starts this parameter at 0: output-kind weights and attention queries (TP-V)."""
        return bool(self.zero_init) and (tag.kind == "output" or tag.role == "query")

    def lr_exponent(self, tag: Tag, family: str = "adam") -> Any:
        """The width exponent c of the LR multiplier m^-c the optimizer builder applies under an optimizer family: the
        rule the table states (zoo.param.families.lr_exponent: the table's c for adam and sgd; c - k/2 for spectral,
        k the parameter's width axes, so ||dW||_* scales as under Adam, spectral_optimizers.md section 2; the table's c
        under every family for a global-LR plugin). An override that applies another rule fails the audit and the
        coordinate check, which judge against the table (class docstring)."""
        return families.lr_exponent(self.abcd(tag)[2], tag.kind, family, self.global_lr)

    def lr_mult(self, tag: Tag, family: str = "adam") -> Any:
        """Per-parameter LR multiplier applied after the base optimizer: m^-c * r^-gamma, c = lr_exponent (depth
        exponents are the same for every family: Adam and Muon both normalise away the branch's r^-alpha); 0 if
        frozen."""
        if self.frozen(tag):
            return 0.0
        return (power(tag.width_mult, -self.lr_exponent(tag, family), f"{self.name}'s LR width factor m^-c")
                * power(tag.depth_ratio, -self.gamma,
                        f"option gamma of {self.name!r}: the LR depth factor (L/L0)^-gamma"))

    def grad_scale(self, tag: Tag) -> Any:
        """Gradient pre-scale m^d * r^alpha before the base optimizer (TP IVb Def 2.2.1 (d); TP VI Def 6.1).

        For Adam this is the same as epsilon * m^-d * r^-alpha; for SGD it makes the LR m^(d-c) r^(alpha-gamma).
        """
        return (power(tag.width_mult, self.abcd(tag)[3], f"{self.name}'s gradient width factor m^d")
                * power(tag.depth_ratio, self.alpha, f"option alpha of {self.name!r}: the gradient depth factor "
                        "(L/L0)^alpha"))

    def wd_mult(self, tag: Tag) -> Any:
        """Decoupled weight decay per step, width-independent (TP IVb 2.10.1), on the weight matrices: every input,
        hidden and output weight, and a scalar-kind matrix (fan_in > 1: a Mixer's token-mixing weights, fixed S ->
        D_S, are matrices the SP recipe decays; their kind says only that no dimension grows). None on vectors (biases,
        norm gains), on scalar-kind biases and gains (fan_in 1: the output bias) and on frozen kinds."""
        if self.frozen(tag) or tag.kind == "vector" or (tag.kind == "scalar" and tag.fan_in <= 1):
            return 0.0
        return 1.0

    def recorded_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """The options a run records in its config (given `options`, those this plugin was built from): the ones
        that rebuild this plugin whatever happens to any file they named."""
        return options

    def frozen(self, tag: Tag) -> bool:
        """Whether the parameter's kind is in the `freeze` list (it keeps its init)."""
        return tag.kind in self.frozen_kinds()

    def frozen_kinds(self) -> tuple[str, ...]:
        """The kinds in the `freeze` list, in KINDS order."""
        kinds = set(comma_items(str(self.freeze), "freeze")) if str(self.freeze).strip() else set()
        unknown = sorted(kinds - set(KINDS))
        if unknown:
            raise ValueError(f"freeze: unknown kind {', '.join(unknown)}; kinds are {', '.join(KINDS)}")
        return tuple(k for k in KINDS if k in kinds)

    def read_numbers(self, *options: str) -> None:
        """Options whose default is None (computed, e.g. completep's gamma = 1 - alpha) given as text, from a command
        line or a config file: read as numbers, or a ValueError naming the option (the text reached the arithmetic)."""
        for option in options:
            value = getattr(self, option)
            if isinstance(value, str):
                try:
                    object.__setattr__(self, option, to_float(value.strip()))
                except ValueError:
                    raise ValueError(f"option {option} of {self.name!r} must be a number, got {value!r}") from None

    def branch_multiplier(self, depth: int, base_depth: int) -> Any:
        """Residual-branch multiplier a * (L / L0)^-alpha."""
        return self.branch_mult * power(depth / base_depth, -self.alpha, f"option alpha of {self.name!r}: the branch "
                                        "multiplier's (L/L0)^-alpha")

    def skip_multiplier(self) -> Any:
        """Multiplier mu of the residual skip path, x <- mu x + branch (1 except in the `critical` plugin)."""
        return 1.0

    def for_model(self, model_name: str, cfg: Any) -> Parametrization:
        """This plugin with any model-dependent defaults filled in (called by zoo.models.create); refused where its
        table puts a forward multiplier m^-a (a != 0) on vector or scalar kinds: zoo's models apply none to biases and
        norm gains (vector) nor to the readout's bias (scalar), so such a rule would silently not be there
        (a model zoo does not build takes it through multiplier_free, which folds it into the parameter)."""
        del cfg
        for kind in ("vector", "scalar"):
            a = self.table_for(kind)[0]
            if isinstance(a, (int, float)) and a != 0:
                raise ValueError(f"{self.name}: {kind} a = {a:g}, but {model_name}'s biases and norm gains carry no "
                                 f"forward multiplier, so m^-a would not be applied; give {kind} kinds a = 0")
        return self

    def check_model(self, model_name: str, cfg: Any) -> None:
        """Refuse an option that acts on nothing in this model, where a run is trained (it would enter the run's
        identity and change nothing); a run already recorded with one is still read. None here."""
        del model_name, cfg

    def report(self, model_name: str, cfg: Any, **_: Any) -> dict[str, float]:
        """What theory says of this plugin on a model, for the run-start report (zoo.diagnostics.run_report, which
        adds measurements); none here, the `critical` plugin's point and chi. Keyword arguments are ignored."""
        del model_name, cfg
        return {}

    def expected_slopes(self, optimizer: str = "adam", axis: str = "width",
                        kinds: tuple[str, ...] = ("input", "vector", "hidden"),
                        head_dim_slope: float = 1.0, branch_only: bool = False,
                        muon_io: bool = False, outside: tuple[str, ...] | None = None,
                        part: str | None = None, at_init: bool = False,
                        own_readout: bool = True) -> dict[str, float]:
        """Group (input, hidden, stream, output, attention) -> predicted log-log slope of the activations' change
        against width or depth, from this plugin's stated rules (class docstring): its abcd table, the LR rule it
        states per optimizer family, (alpha, gamma), its attention exponent and its frozen kinds (a group nothing
        trained moves: NaN); in depth, with branch_only, of the change the residual-branch parameters cause alone,
        and `outside` the kinds of the parameters outside the residual branches (None: some of them train); in
        width, with `part` (a kind, "output" or "readout_bias"), of the change that part's parameters cause alone
        (`at_init`: after the first update, from the gradient at init). `own_readout`: the model has an output-kind
        weight, which zero_init starts at 0 (a readout tied to the input embedding stays random). See
        zoo.param.predict.
        """
        frozen = self.frozen_kinds()
        if axis == "depth":
            outside_trained = outside is None or any(k not in frozen for k in outside)
            return predict.depth_slopes(self.alpha, self.gamma, branch_only, outside_trained, "input" not in frozen)
        if axis != "width":
            raise ValueError(f"axis must be width or depth, got {axis!r}")
        e = float(self.attn_exponent)  # stated: logits q.k / d_head^e
        common = dict(spectral_c=self.spectral_c, muon_io=muon_io, zero_readout=bool(self.zero_init) and own_readout,
                      frozen=frozen)
        if part is not None:
            return predict.part_slopes(self.table_for, part, optimizer, kinds, e, head_dim_slope, **common,
                                       at_init=at_init)
        return predict.width_slopes(self.table_for, optimizer, kinds, e, head_dim_slope, **common)

    def spectral_c(self, kind: str) -> float:
        """The Muon LR exponent the table states for a kind (zoo.param.families.lr_exponent under the spectral
        family): what the checks judge by, whatever lr_exponent applies."""
        return float(families.lr_exponent(float(self.table_for(kind)[2]), kind, "spectral", self.global_lr))

    def instabilities(self, axis: str = "width", kinds: tuple[str, ...] = ("input", "vector", "hidden")) -> list[str]:
        """Why theory says this plugin blows up at init along `axis` (growth in training shows as a positive
        expected slope); empty when it does not. See zoo.param.predict."""
        if axis == "depth":
            return predict.depth_instabilities(self.alpha, self.gamma)
        return predict.init_instabilities(self.table_for, kinds)

    def attn_scale(self, d_head: int, base_d_head: int) -> Any:
        """Attention-logit scale attn_mult * d0^(e - 1/2) / d^e: 1/sqrt(d) at the base head dim."""
        e, what = self.attn_exponent, f"{self.name}'s attention scale (d0/d)^e / sqrt(d0), e = attn_exp"
        return self.attn_mult * power(base_d_head, e - 0.5, what) * power(d_head, -e, what)

    def spec(self) -> dict[str, Any]:
        """A JSON-able description: the plugin name and its options."""
        opts = {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return {"name": self.name, "options": opts}

    def describe(self) -> str:
        """One line per kind with its exponents, for logs."""
        rows = [f"{k}: (a,b,c,d)={tuple(float(x) for x in self.table_for(k))}" for k in KINDS]
        return f"{self.name} alpha={self.alpha} gamma={self.gamma}; " + "; ".join(rows)

    def table_for(self, kind: str) -> ABCD:
        return self.abcd(Tag(kind=kind, fan_in=1, fan_out=1))


def _jsonable(x: Any) -> Any:
    if isinstance(x, (bool, int, float, str)) or x is None:
        return x
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def check_plugin(where: str, plugin: Any) -> None:
    """TypeError naming `where` unless `plugin` is a plugin instance, or stands for one (answers `for_model`, as
    zoo.param.scalars' recorder): a name or a class passed by mistake otherwise fails deep inside, as "'str' object
    has no attribute 'for_model'"."""
    if isinstance(plugin, type) or not hasattr(plugin, "for_model"):
        raise TypeError(f"{where} takes a plugin (zoo.param.get(name)), not {type(plugin).__name__}")

