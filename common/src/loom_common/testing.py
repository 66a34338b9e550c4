"""pytest plugin for tests on real daemons: config DB fixtures, CI policy, logs on failure.

Loaded by the root `conftest.py` (`pytest_plugins = ["loom_common.testing"]`).

- `config_db`: a standalone `Loom_Config` ovsdb-server in the test's tmp_path; `kill9()` and
  `restart()` act on the same database file and port.
- `config_db_cluster`: a 3-member RAFT cluster of `Loom_Config`.
- Tests marked `ovs` need ovsdb-server: skipped locally when it is missing, but a failure
  when `CI=true` or `LOOM_REQUIRE_INTEGRATION=1`, so CI never goes green by skipping.
- A failing test's report carries the tails of the logs its daemons wrote.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from loom_common.ovsdb import OvsdbCluster, OvsdbError, OvsdbServer, tool
from loom_schemas import CONFIG_SCHEMA, schema_path

_LOGS = pytest.StashKey[list[Path]]()
LOG_TAIL_LINES = 40


def integration_required() -> bool:
    """True when missing daemons must fail tests instead of skipping them (CI)."""
    return os.environ.get("CI") == "true" or os.environ.get("LOOM_REQUIRE_INTEGRATION") == "1"


OVS_TOOLS = ("ovsdb-server", "ovsdb-tool", "ovsdb-client", "ovs-appctl", "ovs-vswitchd")


def missing_ovs_tools() -> list[str]:
    """Return the OVS programs `ovs` tests need that are not installed."""
    missing = []
    for name in OVS_TOOLS:
        try:
            tool(name)
        except OvsdbError:
            missing.append(name)
    return missing


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or, in CI, fail) `ovs` tests when ovsdb-server and its tools are not installed."""
    if item.get_closest_marker("ovs") is None:
        return
    missing = missing_ovs_tools()
    if not missing:
        return
    message = f"{', '.join(missing)} not installed (apt-get install openvswitch-switch)"
    if integration_required():
        pytest.fail(message)
    pytest.skip(message)


def register_log(request: pytest.FixtureRequest, path: Path) -> None:
    """Attach the tail of the log at `path` to the current test's report if the test fails.

    Args:
        request: the requesting fixture's or test's `request`.
        path: a daemon's log file (it need not exist yet).
    """
    request.node.stash.setdefault(_LOGS, []).append(path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Add the last `LOG_TAIL_LINES` lines of each registered log to a failing report."""
    report = yield
    if report.failed:
        for path in item.stash.get(_LOGS, []):
            try:
                lines = path.read_text(errors="replace").splitlines()
            except FileNotFoundError:
                continue
            report.sections.append((f"log {path}", "\n".join(lines[-LOG_TAIL_LINES:])))
    return report


@pytest.fixture
def config_db(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OvsdbServer]:
    """A running standalone Loom_Config ovsdb-server in `tmp_path`, stopped at teardown.

    `remote` is its loopback TCP address; `kill9()` crashes it and `restart()` starts it
    again on the same database file and port. Its log is attached to a failing report.
    """
    server = OvsdbServer(tmp_path / "config-db", schema_path(CONFIG_SCHEMA))
    register_log(request, server.log_path)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def config_db_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OvsdbCluster]:
    """A running 3-member RAFT cluster of Loom_Config in `tmp_path`, stopped at teardown.

    `remote` lists every member; `members[i].kill9()` crashes one and
    `restart_member(members[i])` brings it back on its file and waits until it rejoins.
    """
    cluster = OvsdbCluster(tmp_path / "config-cluster", schema_path(CONFIG_SCHEMA))
    for member in cluster.members:
        register_log(request, member.log_path)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
