"""How zoo's modules import one another: the layers import nothing above them (the loop no diagnostics or command
line, the plugins nothing but what they need), and there is no circle: every `import` and `from ... import` in zoo/
(at module level, inside functions, under TYPE_CHECKING; relative ones resolved), read statically with ast, makes a
graph of zoo's modules that must have no cycle. A package is not taken to import its submodules' importers:
`import zoo.a.b` runs zoo/a/__init__.py, but an edge goes only to the module named."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import deque
from pathlib import Path

from cli_utils import ROOT, child_env

ZOO = ROOT / "zoo"


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under `package` (a package is its __init__.py)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that module `name` (at `path`) imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            targets += [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    found = set()
    for target in targets:
        while target and target not in known:  # `import zoo.x.y` of a name in zoo.x: the module zoo.x
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def cycles(package: Path) -> list[list[str]]:
    """One shortest cycle, [a, b, ..., a], through each group of modules that import one another (Tarjan's strongly
    connected components)."""
    files = modules(package)
    graph = {name: sorted(imported(name, path, set(files))) for name, path in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set(stack[stack.index(v):])
            del stack[stack.index(v):]
            groups.append(group)

    for v in graph:
        if v not in index:
            visit(v)
    return [shortest_cycle(graph, group) for group in groups if len(group) > 1]


def shortest_cycle(graph: dict[str, list[str]], group: set[str]) -> list[str]:
    """Breadth-first from the group's first module back to itself."""
    start = min(group)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        if start in graph[v]:
            path = [v]
            while path[-1] != start:
                path.append(came_from[path[-1]])
            return path[::-1] + [start]
        for w in graph[v]:
            if w in group and w not in came_from and w != start:
                came_from[w] = v
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group always has one


def test_zoo_has_no_import_cycles():
    assert cycles(ZOO) == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles(ZOO))


def test_a_cycle_is_found_and_named(tmp_path):
    """The finder sees a function-level import, a relative one and one under TYPE_CHECKING, and names the cycle."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub.b import B\n")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                      "if TYPE_CHECKING:\n    from .c import C\nB = 1\n")
    (pkg / "sub" / "c.py").write_text("from .. import a\nC = 1\n")
    (pkg / "d.py").write_text("import pkg.a\nimport pkg.sub\n")
    assert cycles(pkg) == [["pkg.a", "pkg.sub.b", "pkg.sub.c", "pkg.a"]]
    (pkg / "a.py").write_text("def f():\n    return 1\n")
    assert cycles(pkg) == []


def test_the_loop_imports_nothing_above_it():
    """`import zoo.train.loop` (and the rest of zoo.train) loads no diagnostics, no command line."""
    code = ("import sys, zoo.train.loop, zoo.train.load, zoo.train.hooks\n"
            "print([m for m in sys.modules if m.startswith(('zoo.diagnostics', 'zoo.cli', 'zoo.sweeps', "
            "'zoo.export', 'zoo.papers', 'zoo.audit'))])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=child_env(), capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_plugins_import_nothing_above_them():
    """zoo/param is the bottom floor: no module there imports zoo.diagnostics, zoo.models or zoo.train, not even
    inside a function (param/critical.py used to import diagnostics, a circle with diagnostics/jacobian.py)."""
    import ast
    from pathlib import Path

    import zoo.param

    above = ("zoo.diagnostics", "zoo.models", "zoo.train", "zoo.sweeps", "zoo.data")
    for path in Path(zoo.param.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.startswith(above)], (path.name, names)
