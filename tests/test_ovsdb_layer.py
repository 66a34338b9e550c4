"""One OVSDB layer (`loom_common.ovsdb`): operations are built by its op builders and nowhere
else, and its pure modules import no I/O.

Read with `ast` from the product members' import packages (the lab, `nvp-tests`, builds
what it likes): no dict literal outside the layer is a transaction operation (an `"op"`
key naming an OVSDB operation, or beside a `"table"`), and no list spells a row's uuid
condition (`["_uuid", "==", ...]`: `ops.where_uuid`). A pure module's imports, followed
through the workspace's modules (as Python runs them: not those under `if TYPE_CHECKING:`;
`from loom_common.ovsdb import X` to the module `X` lives in), reach no socket, TLS,
thread, `select` or `subprocess` module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PRODUCT_SOURCES = [
    "ddlog-gen/python", "schemas/src", "common/src", "api-server/src", "logical-controller/src",
    "ovs-integration/src", "physical-controller/src",
]  # fmt: skip
"""Where the product members' import packages are (not the lab's)."""
LAYER = ROOT / "common/src/loom_common/ovsdb"
OPERATIONS = {"insert", "select", "update", "mutate", "delete", "wait", "commit", "abort",
              "comment", "assert"}  # fmt: skip
IO = {"socket", "ssl", "threading", "select", "selectors", "asyncio", "subprocess"}
PURE = [
    "loom_common.ovsdb.codec", "loom_common.ovsdb.ops", "loom_common.engine_inputs",
    "loom_ovs.tunnels", "loom_physical.flowtexts", "loom_physical.status", "loom_physical.offload",
]  # fmt: skip
"""Modules that do no I/O, and import none."""
ENGINE = ["loom_physical.core", "loom_physical.planner", "loom_ovs.flows",
          "loom_physical.flowsview", "loom_physical.trace"]  # fmt: skip
"""Pure modules that use the engine (`loom_ddlog`: its native encoder, its `Program`)
directly or through `loom_ovs.flows`."""
ENGINE_LOCK = ("loom_ddlog.program", "threading")
"""The one thread module they reach: the engine's `Program` guards its transactions with a
lock (importing `loom_ddlog._native` runs the package, which imports `Program`)."""


def _product_modules() -> list[Path]:
    return sorted(p for source in PRODUCT_SOURCES for p in (ROOT / source).rglob("*.py"))


def _by_hand(tree: ast.Module) -> list[int]:
    """The lines of `tree` that build an operation, or a uuid condition, by hand."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value: v for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant)}  # fmt: skip
            op = keys.get("op")
            named = isinstance(op, ast.Constant) and op.value in OPERATIONS
            if op is not None and (named or "table" in keys):
                lines.append(node.lineno)
        elif isinstance(node, ast.List) and len(node.elts) == 3:
            column, function = node.elts[0], node.elts[1]
            if (isinstance(column, ast.Constant) and column.value == "_uuid"
                    and isinstance(function, ast.Constant) and function.value == "=="):  # fmt: skip
                lines.append(node.lineno)
    return lines


def test_the_scan_finds_operations_built_by_hand() -> None:
    tree = ast.parse(
        'a = {"op": "update", "table": t, "where": [["_uuid", "==", ["uuid", u]]], "row": r}\n'
        'b = {"op": kind, "table": t}\n'
        'c = {"op": op, "flow": text}\n'  # an OpenFlow change, not an OVSDB operation
    )
    assert sorted(_by_hand(tree)) == [1, 1, 2]


def test_no_module_outside_the_layer_builds_an_operation_by_hand() -> None:
    found = {}
    for path in _product_modules():
        where = str(path.relative_to(ROOT))
        if path.is_relative_to(LAYER):
            continue
        lines = _by_hand(ast.parse(path.read_text(), filename=str(path)))
        if lines:
            found[where] = lines
    assert not found, f"build them with loom_common.ovsdb.ops: {found}"


@cache
def _roots() -> dict[str, Path]:
    """Top-level import name -> its directory, for every workspace package."""
    return {
        package.name: package
        for source in [*PRODUCT_SOURCES, "nvp-tests/src"]
        for package in (ROOT / source).iterdir()
        if (package / "__init__.py").exists()
    }


def _path(module: str) -> Path | None:
    """The file of a workspace module (None: not one, or not a module: a name in one)."""
    top, *rest = module.split(".")
    base = _roots().get(top)
    if base is None:
        return None
    where = base.joinpath(*rest)
    if (where / "__init__.py").exists():
        return where / "__init__.py"
    return where.with_suffix(".py") if where.with_suffix(".py").exists() else None


@cache
def _lazy(package: str) -> dict[str, str]:
    """A package's lazily exported names -> their modules (`_HOMES`, PEP 562)."""
    path = _path(package)
    if path is None or path.name != "__init__.py":
        return {}
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "_HOMES" and node.value is not None):  # fmt: skip
            homes: dict[str, str] = ast.literal_eval(node.value)
            return {name: f"{package}.{home}" for name, home in homes.items()}
    return {}


def _imports(module: str) -> list[str]:
    """The modules `module` imports when it runs (not under `if TYPE_CHECKING:`)."""
    path = _path(module)
    assert path is not None, module
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[str] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            children: list[ast.AST] = list(node.orelse)
        else:
            children = list(ast.iter_child_nodes(node))
        for child in children:
            if isinstance(child, ast.Import):
                found.extend(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parent, *([child.module] if child.module else [])])
                found.append(base)
                found.extend(_lazy(base).get(a.name, f"{base}.{a.name}") for a in child.names)
            walk(child)

    walk(ast.parse(path.read_text()))
    return found


def io_reached(start: str) -> set[tuple[str, str]]:
    """(workspace module, I/O module it imports) for every module `start` imports, itself
    and through other workspace modules (a module's packages' `__init__` run first)."""
    seen: set[str] = set()
    todo, reached = [start], set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        if _path(module) is None:
            continue
        for name in _imports(module):
            top = name.partition(".")[0]
            if top in IO:
                reached.add((module, top))
            elif top in _roots():
                todo.append(name)
    return reached


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_imports_no_io(module: str) -> None:
    assert io_reached(module) == set()


def test_the_scan_follows_imports_into_the_workspace() -> None:
    reached = io_reached("loom_ovs.manager")
    assert ("loom_common.ovsdb.client", "socket") in reached  # (from loom_common.ovsdb import)
    assert ("loom_ovs.manager", "ssl") in reached


@pytest.mark.parametrize("module", ENGINE)
def test_the_pure_core_imports_no_io(module: str) -> None:
    """The physical controller's pure core (and its trace and flows view), and the flows it
    computes (`loom_ovs.flows`), reach no I/O module: not the OVSDB client or the node
    manager (its `omap` is the codec's, its `TunnelSpec` `loom_ovs.tunnels`'), not the
    OpenFlow channel (`Flow`, `Key` and `MARK` are `loom_ovs.flows`'), only the engine's
    lock."""
    assert io_reached(module) <= {ENGINE_LOCK}


def test_importing_the_pure_modules_loads_no_io_module() -> None:
    """The same, as Python runs it: a fresh interpreter that imports the codec and the op
    builders has loaded no socket, TLS, thread or select module; one that imports the core
    has not loaded the OVSDB client, the node manager or the OpenFlow channel."""
    code = (
        "import sys\n"
        "import loom_common.ovsdb.codec, loom_common.ovsdb.ops\n"
        f"print(sorted(m for m in {sorted(IO)!r} if m in sys.modules))\n"
        "import loom_physical.core\n"
        "print(sorted(m for m in ('loom_common.ovsdb.client', 'loom_common.ovsdb.replica',"
        " 'loom_ovs.manager', 'loom_ovs.openflow', 'loom_ovs.channel', 'socket', 'ssl')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()  # fmt: skip
    assert out == ["[]", "[]"]


def test_the_package_exports_each_name_from_its_module() -> None:
    """`loom_common.ovsdb`'s lazy exports (`_HOMES`) and the names mypy sees (its
    `TYPE_CHECKING` imports) are the same, and each is its module's."""
    import importlib

    import loom_common.ovsdb as package

    tree = ast.parse((LAYER / "__init__.py").read_text())
    typed = {
        alias.name: node.module.rpartition(".")[2]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and "ovsdb." in node.module
        for alias in node.names
    }
    assert typed == package._HOMES
    for name, home in package._HOMES.items():
        module = importlib.import_module(f"loom_common.ovsdb.{home}")
        assert getattr(package, name) is getattr(module, name)
