"""`.pre-commit-config.yaml` runs the linters `make test` runs, command for command: its
hooks are local (nothing downloaded at hook time) and their entries are the commands of the
Makefile's lint targets, in order, as `make -n` prints them (variables and continued lines
expanded as make runs them)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
LINTERS = ["lint", "typecheck"]
"""The targets of `make test` that lint; the others install, build or run tests."""


def _prerequisites(target: str) -> list[str]:
    for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{target}:"):
            return line.split(":", 1)[1].split("##", 1)[0].split()
    raise AssertionError(f"no target {target} in the Makefile")


def _make_commands(*targets: str) -> list[str]:
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "UV=uv", *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [line for line in out.stdout.splitlines() if line.strip()]


def _hooks() -> list[dict[str, Any]]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    return [hook for repo in config["repos"] for hook in repo["hooks"]]


def test_make_test_lints_with_these_targets() -> None:
    prerequisites = _prerequisites("test")
    assert [t for t in prerequisites if t in LINTERS] == LINTERS
    others = [t for t in prerequisites if t not in LINTERS]
    assert all(t == "install" or t.startswith("test-") for t in others), others


def test_the_hooks_are_local_and_run_on_the_whole_tree() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert [repo["repo"] for repo in config["repos"]] == ["local"]
    for hook in _hooks():
        assert hook["language"] == "system", hook["id"]
        assert hook["pass_filenames"] is False, hook["id"]
        assert "args" not in hook, hook["id"]


def test_the_hooks_are_the_makefiles_lint_commands() -> None:
    commands = _make_commands(*LINTERS)
    assert len(commands) >= 4
    assert [hook["entry"] for hook in _hooks()] == commands
