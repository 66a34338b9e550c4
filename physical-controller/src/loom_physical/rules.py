"""Where the physical rule files (`rules/physical/*.dl`) are: source tree or installed wheel."""

from __future__ import annotations

from pathlib import Path

_SOURCE = Path(__file__).resolve().parents[3] / "rules" / "physical"
_WHEEL = Path(__file__).resolve().parent / "rules"
MAIN = "physical.dl"


def rules_dir() -> Path:
    """Return the directory holding `physical.dl` and the files it imports."""
    for candidate in (_SOURCE, _WHEEL):
        if (candidate / MAIN).is_file():
            return candidate
    raise FileNotFoundError(f"{MAIN} not found under {_SOURCE} or {_WHEEL}")


def main_file() -> Path:
    """Return the rule program's entry file (it imports the others)."""
    return rules_dir() / MAIN
