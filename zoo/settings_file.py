"""Reading a YAML or JSON file of settings (config files, abcd's exponents): numbers read as the command line reads
them, each mapping's keys given once, no aliases; what does not parse is one line naming the file."""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from zoo.files import MAX_DEPTH, read_regular, refuse_special, shallow


class YamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, reading numbers as YAML 1.2, JSON and the command line do (`_numbers_as_typed`: `lr:
    1e-3` is a float, which YAML 1.1 made the string '1e-3'; `steps: 010` is ten), and refusing aliases (`*name`): nine
    nested lists of ten aliases are 10^9 values, which the checks of the options would walk for hours."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "it uses an alias (*name); write the value out",
                                              self.peek_event().start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        """A mapping whose keys are each given once (PyYAML keeps the last of a repeated key silently)."""
        keys = (self.construct_object(k, deep=True) for k, _ in node.value)
        given_once([k for k in keys if isinstance(k, Hashable)])
        return super().construct_mapping(node, deep)


class GivenTwice(ValueError):
    """A key given twice in one mapping of a config file."""


def given_once(keys: list[Any]) -> None:
    """Refuse a key given twice in one mapping of a config file (`width: 32` then `width: 64`): YAML and JSON
    readers keep the last one silently."""
    seen: set[Any] = set()
    for key in keys:
        if key in seen:
            raise GivenTwice(f"{key} is given twice in one mapping; give it once")
        seen.add(key)


def _json_mapping(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    given_once([k for k, _ in pairs])
    return dict(pairs)


def _numbers_as_typed(loader: type[yaml.SafeLoader]) -> None:
    """Numbers in a YAML file read as on the command line and in JSON: decimal integers (`[-+]?[0-9]+`) and decimal
    floats with an optional exponent. YAML 1.1 read `steps: 010` as 8 (octal; --steps 010 is 10), `steps: 1:30` as 90
    (base 60), `width: 0x40` and `0b101` in other bases and `1_000` as 1000; those are strings now, which the
    settings refuse in one line."""
    ints, floats = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
    loader.yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in resolvers if tag not in (ints, floats)]
                                      for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    loader.add_implicit_resolver(ints, re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
    loader.add_implicit_resolver(floats, re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$"
                                                    r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
                                 list("-+0123456789."))
    loader.add_constructor(ints, lambda self, node: int(self.construct_scalar(node)))  # 010 is ten, not octal


_numbers_as_typed(YamlLoader)


def load(path: str, what: str) -> Any:
    """The data of the YAML or JSON file at `path` (JSON by its suffix), `what` naming it in the one-line errors."""
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(f"{what} {path} is a directory, not a YAML or JSON file")
    refuse_special(p, f"{what} {path}")
    if not p.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    try:
        text = read_regular(p, f"{what} {path}").decode()
        data = json.loads(text, object_pairs_hook=_json_mapping) if p.suffix == ".json" else yaml.load(text, YamlLoader)
        return shallow(data, f"{what} {path}")
    except RecursionError:  # the parsers recurse once per level
        raise ValueError(f"{what} {path} nests its values deeper than a settings file does ({MAX_DEPTH} levels at "
                         "most); is it a settings file?") from None
    except GivenTwice as e:
        raise ValueError(f"{what} {path}: {e}") from None
    except (ValueError, yaml.YAMLError) as e:  # JSON's errors, a file that is not UTF-8
        raise ValueError(f"{what} {path} cannot be read as {'JSON' if p.suffix == '.json' else 'YAML'}: "
                         f"{yaml_problem(e) or str(e).splitlines()[0]}") from None


def yaml_problem(e: Exception) -> str | None:
    """A YAML error's problem and where (its first line reads "while scanning for the next token", naming neither)."""
    mark = getattr(e, "problem_mark", None)
    if not isinstance(e, yaml.MarkedYAMLError) or mark is None or not e.problem:
        return None
    return f"line {mark.line + 1}, column {mark.column + 1}: {e.problem}"
