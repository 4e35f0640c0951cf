"""Named registries (plugins, models, data sources) that outside packages extend without editing zoo.

A name resolves, in order, to: an entry registered in zoo (one `register` line), an entry of an installed
package's Python entry-point group (`zoo.params`, `zoo.models`, `zoo.data`: `name = "my_pkg.module:Object"` in
its pyproject.toml), or, when it has the form `my_pkg.module:Object`, that object imported directly (so a plugin
in a user's own file works from every command line as `--param my_file:MyParam`, with its folder on the path).

Importing runs the module's code, so a `module:Object` is imported only where the user named it: on the command
line (--model, --param, --allow-import, each `allow_import`ed), or in Python. A file never names code to import: a
config file, a run dir's config.json or a checkpoint's metadata (which may come from anyone) that names one is
refused in one line (`refuse_code`) saying which flag allows it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ALLOWED: set[str] = set()  # the module:Object names the user gave (command-line flags), which files may name too


def import_flags(*names: str) -> str:
    """The --allow-import flags a command needs to read a file naming these models and plugins (one per module:Object
    name), each with a leading space: for the commands zoo prints."""
    return "".join(f" --allow-import {shlex.quote(n)}" for n in dict.fromkeys(names) if ":" in n)


def allow_import(name: str) -> None:
    """Let files name `name` (module:Object): the user gave it (--model, --param, --allow-import)."""
    ALLOWED.add(name)


class NamesCode(ValueError):
    """A file names a model or plugin by module:Object that is neither registered nor installed nor allowed."""


class Registry:
    def __init__(self, what: str, group: str, check: Callable[[str, Any], Any] | None = None):
        """`what` names an entry in messages ("parametrization"); `group` is the entry-point group; `check` validates
        an entry (and may return it converted) before it is registered."""
        self.what, self.group, self.check = what, group, check or (lambda name, obj: obj)
        self.entries: dict[str, Any] = {}
        self._lazy: dict[str, str] = {}
        self._packages: dict[str, str] = {}  # an entry point's name -> the package that installed it
        self._clashes: dict[str, str] = {}  # a name two installed packages register: why it is refused
        self._scanned = False

    def register(self, name: str, obj: Any) -> Any:
        """Add `obj` under `name`; an "module:attr" string is imported on first use."""
        if isinstance(obj, str):
            self._lazy[name] = obj
        else:
            self.entries[name] = self.check(name, obj)
        return obj

    def register_class(self, cls: Any) -> Any:
        """Add a class under its own `name` (checked); usable as a decorator. TypeError if `check` refuses it, or
        if another class holds the name (a second "mup" would replace zoo's for every model and tool in the process,
        while the runs it writes name "mup", which any other process reads as zoo's)."""
        try:
            cls = self.check(repr(cls), cls)
        except ValueError as e:
            raise TypeError(str(e)) from None
        held = self.entries.get(cls.name, self._lazy.get(cls.name))
        if held is not None and held is not cls and held != f"{cls.__module__}:{cls.__qualname__}":
            where = held if isinstance(held, str) else f"{held.__module__}:{held.__qualname__}"
            raise TypeError(f"the {self.what} name {cls.name!r} is taken (by {where}): give "
                            f"{cls.__module__}:{cls.__qualname__} a name of its own")
        self._lazy.pop(cls.name, None)  # an entry point to this very class, whose module is registering it
        return self.register(cls.name, cls)

    def names(self) -> list[str]:
        """Every name zoo and the installed packages register."""
        self._scan()
        return sorted({*self.entries, *self._lazy})

    def get(self, name: str) -> Any:
        if name not in self.entries and name not in self._lazy:
            self._scan()
        if name in self._clashes:
            raise ValueError(self._clashes[name])
        if name in self._lazy:
            try:
                self.entries[name] = self.check(name, _import(self._lazy[name], self.what))  # a failure stays to say
            except ValueError as e:
                if name not in self._packages:
                    raise
                raise ValueError(f"{e} (the entry point {name} = {self._lazy[name]} of the installed package "
                                 f"{self._packages[name]})") from None
            del self._lazy[name]
        if name in self.entries:
            return self.entries[name]
        if ":" in name:
            return self.register(name, _import(name, self.what))
        raise ValueError(f"unknown {self.what} {name!r}; choose from {', '.join(self.names())} (or give "
                         "module:Object)")

    def importable(self, name: str) -> bool:
        """Whether `get(name)` may import what it needs: a registered or installed name, or a module:Object the user
        allowed (`allow_import`)."""
        if ":" not in name or name in ALLOWED:
            return True
        self._scan()
        return name in self._lazy or name in self.entries

    def refuse_code(self, name: str, where: str) -> None:
        """A `name` that `where` (a file) gives is not code to import (`importable`); NamesCode otherwise, before
        anything is imported. A run dir under ./runs/ shipped its own module (`model: runs.x.payload:Net`), which
        reading the run ran."""
        if self.importable(name):
            return
        raise NamesCode(f"{where} names the {self.what} {name!r}, code to import that is neither registered in zoo "
                        "nor installed; a file (a config, a run dir, a checkpoint) never makes zoo import code: if you "
                        f"trust it, give --allow-import {name}")

    def _scan(self) -> None:
        """The entry points of installed packages, once. A name zoo holds stays zoo's, and a name two packages give
        other objects is neither's (`get` refuses it): the first on the path took it, without a word, and another
        package installed could change what --param NAME trains. A warning line for each."""
        if self._scanned:
            return
        self._scanned = True
        found: dict[str, dict[str, str]] = {}  # name -> {module:Object: its package}; one package found twice is one
        for ep in importlib.metadata.entry_points(group=self.group):
            found.setdefault(ep.name, {})[ep.value] = getattr(ep.dist, "name", None) or "an installed package"
        for name, objects in found.items():
            named = " and ".join(f"{package} ({value})" for value, package in sorted(objects.items(),
                                                                                      key=lambda vp: vp[::-1]))
            if name in self.entries or name in self._lazy:
                print(f"warning: {named} registers the {self.what} {name!r}, which zoo's own holds: left out (give "
                      f"it as module:Object)", file=sys.stderr)
            elif len(objects) > 1:
                self._clashes[name] = f"{named} each register the {self.what} {name!r}: give the one meant as " \
                                      "module:Object, or uninstall the other"
                print(f"warning: {self._clashes[name]}", file=sys.stderr)
            else:
                (self._lazy[name], self._packages[name]), = objects.items()


def named_subclass(base: type, what: str) -> Callable[[str, Any], type]:
    """A Registry `check`: the entry is a subclass of `base` with a non-empty `name` (a plugin's, a policy's)."""
    def check(name: str, cls: Any) -> type:
        if not (isinstance(cls, type) and issubclass(cls, base)) or not cls.name:
            raise ValueError(f"{name!r} is not a {what} (a {base.__name__} subclass with a non-empty `name`)")
        return cls
    return check


def _import(path: str, what: str) -> Any:
    """The object at "package.module:attr" (the current folder is searched too, as `python -m` does). A module whose
    own code fails as it is imported, sys.exit included, is one ValueError saying so (an installed model calling
    sys.exit ended every command, --help too, which reads every model's recipe, silently with its status)."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ValueError(f"a {what} given by path is module:Object, got {path!r}")
    if str(Path.cwd()) not in sys.path and "" not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"cannot import the {what} {path!r}: {e}") from None
    except (Exception, SystemExit) as e:
        why = f"it called sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"{type(e).__name__}: {e}"
        raise ValueError(f"importing the {what} {path!r} failed in its own code: {why}") from None
    try:
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise ValueError(f"module {module!r} has no {attr!r} (the {what} {path!r})") from None
    return obj
