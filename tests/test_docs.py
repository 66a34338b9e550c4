"""The systemd units in docs/systemd name daemons and flags that exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from loom_common.ovsdb import tool

UNITS = sorted((Path(__file__).parent.parent / "docs" / "systemd").glob("*.service"))


def _exec_start(unit: Path) -> list[str]:
    text = unit.read_text().replace("\\\n", " ")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def test_there_are_units() -> None:
    names = {u.name for u in UNITS}
    assert names >= {"loom-api.service", "loom-config-db.service", "loom-universal-db.service",
                     "loom-logical@.service", "loom-physical@.service"}  # fmt: skip


@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_a_unit_restarts_its_daemon_with_flags_it_takes(unit: Path) -> None:
    text = unit.read_text()
    assert "Restart=on-failure" in text
    assert "StartLimitBurst=" in text
    argv = _exec_start(unit)
    if "-m" in argv:  # a Loom daemon: python -m MODULE FLAGS
        module = argv[argv.index("-m") + 1]
        helper = [sys.executable, "-m", module, "--help"]
    else:
        helper = [tool(Path(argv[0]).name), "--help"]
    shown = subprocess.run(helper, capture_output=True, text=True, check=True).stdout
    for flag in {re.split("[=]", a)[0] for a in argv if a.startswith("--")}:
        assert flag in shown, f"{unit.name}: {flag} is not a flag of {helper[:-1]}"
