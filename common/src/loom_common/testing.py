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
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from loom_common.ovsdb import OvsdbCluster, OvsdbServer
from loom_schemas import CONFIG_SCHEMA, schema_path

_LOGS = pytest.StashKey[list[Path]]()


def integration_required() -> bool:
    """True when missing daemons must fail tests instead of skipping them (CI)."""
    return os.environ.get("CI") == "true" or os.environ.get("LOOM_REQUIRE_INTEGRATION") == "1"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or, in CI, fail) `ovs` tests when ovsdb-server is not installed."""
    if item.get_closest_marker("ovs") is None:
        return
    missing = [t for t in ("ovsdb-server", "ovsdb-tool") if shutil.which(t) is None]
    if not missing:
        return
    message = f"{', '.join(missing)} not installed (apt-get install openvswitch-switch)"
    if integration_required():
        pytest.fail(message)
    pytest.skip(message)


def register_log(request: pytest.FixtureRequest, path: Path) -> None:
    """Attach `path` to the current test's report if the test fails."""
    request.node.stash.setdefault(_LOGS, []).append(path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """Add the tails of the test's daemon logs to a failing report."""
    report = yield
    if getattr(report, "failed", False):
        for path in item.stash.get(_LOGS, []):
            try:
                tail = "\n".join(path.read_text(errors="replace").splitlines()[-40:])
            except FileNotFoundError:
                continue
            report.sections.append((f"log {path.name}", tail))  # type: ignore[attr-defined]
    return report


@pytest.fixture
def config_db(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OvsdbServer]:
    """A running standalone Loom_Config ovsdb-server, stopped at teardown."""
    server = OvsdbServer(tmp_path / "config-db", schema_path(CONFIG_SCHEMA))
    register_log(request, server.log_path)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def config_db_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OvsdbCluster]:
    """A running 3-member RAFT cluster of Loom_Config, stopped at teardown."""
    cluster = OvsdbCluster(tmp_path / "config-cluster", schema_path(CONFIG_SCHEMA))
    for member in cluster.members:
        register_log(request, member.log_path)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
