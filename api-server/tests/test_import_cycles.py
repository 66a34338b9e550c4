"""The import graph of `loom_api` has no cycle (the Neutron modules' included).

A module's imports are read from its source with `ast`, at module level and inside
functions alike: an import moved into a function hides a cycle from Python at load time but
not from a reader, so it counts. `from package import name` is an edge to `package.name`
when that is a module, else to `package`; the implicit import of a module's parent packages
is no edge (every package would otherwise be in a cycle with the submodules its
`__init__` imports).
"""

from __future__ import annotations

import ast
from pathlib import Path

import loom_api

Graph = dict[str, set[str]]


def modules(root: Path, package: str) -> dict[str, Path]:
    """Return every module of the package under `root` (its folder), by dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(root: Path, package: str) -> Graph:
    """Return, for each module of the package, the package's modules it imports anywhere."""
    found = modules(root, package)
    graph: Graph = {}
    for name, path in found.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.add(sub if sub in found else base)
        graph[name] = {t for t in targets if t in found and t != name}
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """Return the graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_loom_api_has_no_import_cycle() -> None:
    root = Path(loom_api.__file__).parent
    graph = import_graph(root, "loom_api")
    assert "loom_api.neutron.addressing" in graph["loom_api.neutron.ports"]
    assert cycles(graph) == []


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg import a\n")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("from .. import c\n")
    (package / "c.py").write_text("def f():\n    from pkg import a\n    return a\n")
    graph = import_graph(package, "pkg")
    assert graph["pkg.sub.b"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    (package / "c.py").write_text("def f():\n    return 1\n")
    assert cycles(import_graph(package, "pkg")) == []
