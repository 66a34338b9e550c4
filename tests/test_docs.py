"""The systemd units in docs/systemd name daemons and flags that exist, and the databases'
health check they document runs as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from loom_common.ovsdb import OvsdbServer, tool

SYSTEMD = Path(__file__).parent.parent / "docs" / "systemd"
UNITS = sorted(u for u in SYSTEMD.glob("*.service") if "Type=oneshot" not in u.read_text())
"""The daemons' units (a oneshot unit is a check a timer runs, not a daemon)."""


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


HEALTH_UNITS = sorted(SYSTEMD.glob("*-health.service"))


@pytest.mark.parametrize("health", HEALTH_UNITS, ids=[u.name for u in HEALTH_UNITS])
def test_a_database_health_check_runs_as_written_against_a_real_server(
    health: Path, config_db: OvsdbServer, universal_db: OvsdbServer
) -> None:
    text = health.read_text()
    unit = health.name.replace("-health.service", ".service")
    assert f"Requisite={unit}" in text
    assert "SuccessExitStatus=75" in text  # a hold (full disk) is not a failure
    assert f"""test "$EXIT_STATUS" != 1 || systemctl restart {unit}""" in text
    timer = (SYSTEMD / health.name.replace(".service", ".timer")).read_text()
    assert "OnUnitInactiveSec=" in timer
    argv = _exec_start(health)
    assert argv[1:3] == ["-m", "loom_common.health"]
    database = _exec_start(SYSTEMD / unit)
    assert f"--unixctl={argv[argv.index('--ctl') + 1]}" in database
    assert argv[argv.index("--file") + 1] == database[1]
    server = {"Loom_Config": config_db, "Loom_Universal": universal_db}[
        argv[argv.index("--db") + 1]]  # fmt: skip
    # The unit's command with this test's server in place of /run/loom and /var/lib/loom.
    argv[argv.index("--ctl") + 1] = str(server.ctl_path)
    argv[argv.index("--file") + 1] = str(server.db_path)
    argv[argv.index("--interval") + 1] = "0.1"
    done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("healthy")
    server.kill9()
    done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert "unhealthy: ovs-appctl:" in done.stderr
