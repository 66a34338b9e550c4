"""Where the physical rule files (`rules/physical/*.dl`) are: source tree or installed wheel."""

from __future__ import annotations

from pathlib import Path

from loom_common import rules
from loom_ddlog import Program

MAIN = "physical.dl"
COUNTED = ("NodeFlow", "DpFlow", "HoverboardFlow")
"""The outputs the engine gives as counts of derivations and does not keep: the flows,
which `Images` keeps with counts anyway (`FlowTable`): a second copy of every node's
flows would be memory for nothing the controller reads."""


def rules_dir() -> Path:
    """Return the directory holding `physical.dl` and the files it imports."""
    return rules.rules_dir(__file__, "physical", MAIN)


def main_file() -> Path:
    """Return the rule program's entry file (it imports the others)."""
    return rules_dir() / MAIN


def load(path: Path | None = None, *, workers: int = 1) -> Program:
    """The rule program (`path`, by default `main_file()`) started as a controller runs
    it: only outputs kept, the flows counted (`COUNTED`)."""
    return Program.load([path or main_file()], workers=workers, internal=False,
                        counted=COUNTED)  # fmt: skip
