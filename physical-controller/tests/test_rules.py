"""The localization rules on their golden script (rules/physical/tests), in the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loom_physical.rules import main_file

TESTS = Path(__file__).resolve().parents[2] / "rules" / "physical" / "tests"
LOOM_DDLOG = Path(sys.executable).parent / "loom-ddlog"


def test_localize_golden() -> None:
    script = TESTS / "localize.dat"
    done = subprocess.run([str(LOOM_DDLOG), "run", str(main_file())], input=script.read_text(),
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == (TESTS / "localize.dump.expected").read_text()
    # What the golden pins: remote ports by tunnel, local ones by resubmit, zones bound.
    assert "output:20" in done.stdout
    assert "ct(table=12,zone=3)" in done.stdout
