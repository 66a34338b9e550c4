"""The systemd units in docs/systemd name daemons and flags that exist, and the databases'
health check they document runs as written; the guides' links and images lead to files that
exist, the benchmarks guide names commands that exist, and it stays a guide (its history
goes to docs/benchmarks-log.md)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from loom_common.ovsdb import OvsdbServer, tool

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
SYSTEMD = DOCS / "systemd"
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


def _unit_param(unit: Path) -> object:
    """A unit as a parameter, marked `ovs` when its daemon is an OVS program (asked `--help`)."""
    ovs = "-m" not in _exec_start(unit)  # not python -m MODULE
    return pytest.param(unit, id=unit.name, marks=[pytest.mark.ovs] if ovs else [])


@pytest.mark.parametrize("unit", [_unit_param(u) for u in UNITS])
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


@pytest.mark.ovs
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


GUIDES = sorted([ROOT / "README.md", *DOCS.glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
"""A Markdown link's or image's target: `[text](target)`, `![alt](target)`."""


@pytest.mark.parametrize("guide", GUIDES, ids=[g.name for g in GUIDES])
def test_a_guides_links_and_images_lead_to_files_that_exist(guide: Path) -> None:
    for target in LINK.findall(guide.read_text()):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        path = (guide.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{guide.name}: {target} (relative to {guide.parent.name}/)"


BENCHMARKS = DOCS / "benchmarks.md"
GUIDE_LINES = 300
"""The benchmarks guide's length at most: what each benchmark measures, how, its command and
its latest figures fit; a run-by-run history does not (docs/benchmarks-log.md keeps it)."""


def test_the_benchmarks_guide_stays_a_guide() -> None:
    lines = BENCHMARKS.read_text().splitlines()
    assert len(lines) <= GUIDE_LINES, (
        f"docs/benchmarks.md is {len(lines)} lines: move its history to docs/benchmarks-log.md"
    )
    assert (DOCS / "benchmarks-log.md").exists()


def _commands(text: str) -> list[str]:
    """The first word of every command line of the `sh` blocks in `text`."""
    words, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside and line.strip() == "```sh"
            continue
        if inside and line.strip():
            words.append(" ".join(shlex.split(line, comments=True)[:2]))
    return words


def test_the_benchmarks_guide_names_commands_that_exist() -> None:
    make = (ROOT / "Makefile").read_text()
    commands = _commands(BENCHMARKS.read_text())
    assert len(commands) >= 8
    for command in commands:
        program, _, first = command.partition(" ")
        if program == "make":
            assert re.search(rf"^{re.escape(first)}:", make, re.M), f"no make target {first}"
        else:
            assert program.startswith(".venv/bin/"), command
            name = program.removeprefix(".venv/bin/")
            assert (Path(sys.prefix) / "bin" / name).exists(), f"no entry point {name}"
