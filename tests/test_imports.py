"""Each workspace member imports only what its pyproject.toml declares, and declares only what
it imports; no product package imports the lab (`nvp-tests`: `loom_lab`, `loom_nvp`) or a
plotting library.

Imports are read with `ast` from every module of a member's import package (an import under
`if TYPE_CHECKING:` or inside a function counts like any other), and compared with the
member's `[project] dependencies` (and its optional extras). A workspace member's import name
comes from its build configuration; a third-party import's distribution from the installed
metadata (`importlib.metadata.packages_distributions`).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parent.parent
PRODUCT = [
    "ddlog-gen", "schemas", "common", "api-server", "logical-controller", "ovs-integration",
    "physical-controller",
]  # fmt: skip
"""The product members (the workspace's members but the lab)."""
LAB = "nvp-tests"
FORBIDDEN = {"matplotlib": "a plotting library is the lab's"}
"""Imports no product package may make, whatever it declares (the lab's own import names are
added by `forbidden`)."""


def _project(member: str) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / member / "pyproject.toml").read_text())
    return project


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _package_dirs(member: str) -> list[Path]:
    """The import packages a member builds (hatch's wheel packages, maturin's python-source)."""
    project = _project(member)
    maturin = project.get("tool", {}).get("maturin")
    if maturin is not None:
        source = ROOT / member / maturin["python-source"]
        return sorted(p for p in source.iterdir() if (p / "__init__.py").exists())
    packages = project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    return [ROOT / member / p for p in packages]


@cache
def workspace_packages() -> dict[str, str]:
    """Import name -> distribution name of every workspace member."""
    members = _project(".")["tool"]["uv"]["workspace"]["members"]
    assert set(PRODUCT) | {LAB} == set(members), "PRODUCT and LAB are to name every member"
    return {
        package.name: _name(_project(member)["project"]["name"])
        for member in members
        for package in _package_dirs(member)
    }


def forbidden() -> dict[str, str]:
    """Import name -> why no product package may import it."""
    lab = {package.name: "the lab's" for package in _package_dirs(LAB)}
    return {**FORBIDDEN, **lab}


def declared(member: str) -> set[str]:
    """The distributions a member declares: its dependencies and its optional extras'."""
    project = _project(member)["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return {_name(r) for r in requirements}


def _optional(tree: ast.Module) -> set[ast.AST]:
    """The import statements of `tree` inside a `try:` that catches ImportError: a module used
    if present (python-ovs's logging in every daemon), not a dependency."""
    optional: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            optional |= {n for stmt in node.body for n in ast.walk(stmt)}
    return optional


def imports(member: str) -> dict[str, set[str]]:
    """Top-level import name -> the modules (relative to the member) that import it (not
    counting optional imports, `_optional`)."""
    found: dict[str, set[str]] = {}
    for package in _package_dirs(member):
        for path in sorted(package.rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            optional = _optional(tree)
            for node in ast.walk(tree):
                if node in optional:
                    continue
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.partition(".")[0]
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT / member)))
    return found


def distributions(top: str, member: str) -> set[str]:
    """The distributions an import name may come from; empty for the standard library and
    the member's own packages."""
    own = {p.name for p in _package_dirs(member)}
    if top in own or top in sys.stdlib_module_names or top == "__future__":
        return set()
    if top in workspace_packages():
        return {workspace_packages()[top]}
    installed = packages_distributions().get(top)
    assert installed, f"{member} imports {top}, which no installed distribution provides"
    return {_name(d) for d in installed}


@pytest.mark.parametrize("member", [*PRODUCT, LAB])
def test_a_member_imports_only_what_it_declares(member: str) -> None:
    deps = declared(member)
    undeclared = {
        top: sorted(where)
        for top, where in imports(member).items()
        if (dists := distributions(top, member)) and not dists & deps
    }
    assert not undeclared, f"{member} imports without declaring them: {undeclared}"


@pytest.mark.parametrize("member", [*PRODUCT, LAB])
def test_a_member_declares_only_what_it_imports(member: str) -> None:
    used = set()
    for top in imports(member):
        used |= distributions(top, member)
    assert declared(member) <= used, f"{member} declares unused: {declared(member) - used}"


@pytest.mark.parametrize("member", PRODUCT)
def test_no_product_package_imports_the_lab_or_a_plotting_library(member: str) -> None:
    found = imports(member)
    bad = {top: (why, sorted(found[top])) for top, why in forbidden().items() if top in found}
    assert not bad, f"{member} imports {bad}"


def test_the_check_sees_an_undeclared_import() -> None:
    """The checks read what they claim to: a product package that imports the lab, and one
    that imports a workspace package it does not declare, are both seen."""
    assert {"loom_lab", "loom_nvp", "matplotlib"} <= set(forbidden())
    assert "loom_physical" in imports(LAB)  # the lab benchmarks the physical controller
    assert distributions("loom_physical", "api-server") == {"loom-physical-controller"}
    assert "loom-physical-controller" not in declared("api-server")
    assert distributions("json", "api-server") == set()
    assert distributions("loom_api", "api-server") == set()
