"""A plugin's numbers at one shape as data, so that one compiled program serves every plugin of that shape.

While a model is built it asks its plugin for numbers (`ASKED`: init stds, forward multipliers, the attention-logit
scale, branch and skip multipliers). Each answer is a function of the question alone (the method and its
arguments: a Tag, a depth, a head dim), never of the order it is asked in. `record` builds the model with every
answer written down, keyed by its question; `replay` gives the model a plugin that answers the same questions from a
list of values, which may be traced arrays: an init program traced under `replay` takes the plugin's numbers as an
argument instead of holding them as constants, so SP, muP or any plugin of the same shape lowers to the same program
(design.md section 3: plugin scalars may be traced). An answer is stored as the float32 array the model makes of
it (`jnp.asarray(answer, float32)`, or `std * normal` in float32), so a replayed model is the recorded one bit for
bit. An init std of exactly 0 stays the constant 0: a model fills such a parameter with its constant instead of
drawing it (a bias, a norm gain, a zero-initialised readout), which a traced 0 would make it draw and multiply by 0
(the same values, a larger init program); which stds are 0 is then part of the program. Everything else (the
plugin's name, its frozen kinds, `for_model`'s checks) is the plugin's own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

ASKED = ("init_std", "multiplier", "tied_multiplier", "branch_multiplier", "skip_multiplier", "attn_scale")
Question = tuple[Any, ...]


class _Answering:
    """`plugin` with the ASKED methods answered by `answer(plugin, question)`; `for_model` keeps answering so."""

    def __init__(self, plugin: Any, answer: Callable[[Any, Question], Any]):
        self._plugin, self._answer = plugin, answer

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._plugin, name)
        if name == "for_model":
            return lambda *args, **kwargs: _Answering(value(*args, **kwargs), self._answer)
        if name in ASKED:
            return lambda *args, **kwargs: self._answer(self._plugin, (name, args, tuple(sorted(kwargs.items()))))
        return value


def record(build: Callable[[Any], Any], plugin: Any) -> tuple[Any, dict[Question, np.ndarray]]:
    """`build(plugin)` (e.g. an abstract model: `nnx.eval_shape`) and the answers `plugin` gave meanwhile, in the order
    first asked, each as a float32 array."""
    answers: dict[Question, np.ndarray] = {}

    def answer(inner: Any, question: Question) -> Any:
        name, args, kwargs = question
        value = getattr(inner, name)(*args, **dict(kwargs))
        answers.setdefault(question, np.asarray(value, np.float32))
        return value

    return build(_Answering(plugin, answer)), answers


def zero_stds(answers: dict[Question, np.ndarray]) -> frozenset[Question]:
    """The init-std questions answered with exactly 0 (replayed as the constant 0)."""
    return frozenset(q for q, v in answers.items() if q[0] == "init_std" and not np.any(v))


def replay(plugin: Any, questions: Sequence[Question], values: Sequence[Any], zeros: frozenset = frozenset()) -> Any:
    """`plugin` answering `questions[i]` with `values[i]` (traced or not), and those in `zeros` (`zero_stds`) with
    the constant 0.0; a question not recorded is a KeyError naming it (the model asked something at replay it did not
    ask at record: a bug, not a user error)."""
    index = {q: i for i, q in enumerate(questions)}

    def answer(inner: Any, question: Question) -> Any:
        del inner
        if question not in index:
            raise KeyError(f"the model asked its plugin {question[0]}{question[1]}, which was not recorded")
        return 0.0 if question in zeros else values[index[question]]

    return _Answering(plugin, answer)
