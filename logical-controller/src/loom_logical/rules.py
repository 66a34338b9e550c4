"""Where the logical rule files (`rules/logical/*.dl`) are: source tree or installed wheel."""

from __future__ import annotations

from pathlib import Path

from loom_common import rules

MAIN = "logical.dl"


def rules_dir() -> Path:
    """Return the directory holding `logical.dl` and the files it imports."""
    return rules.rules_dir(__file__, "logical", MAIN)


def main_file() -> Path:
    """Return the rule program's entry file (it imports the others)."""
    return rules_dir() / MAIN
