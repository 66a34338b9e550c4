"""pytest plugin for tests on real daemons: config DB fixtures, CI policy, logs on failure.

Loaded by the root `conftest.py` (`pytest_plugins = ["loom_common.testing"]`).

- `config_db`: a standalone `Loom_Config` ovsdb-server in the test's tmp_path; `kill9()` and
  `restart()` act on the same database file and port.
- `config_db_cluster`: a 3-member RAFT cluster of `Loom_Config`.
- `pki`: one PKI (`loom_common.pki`) for the session's nodes and controllers, and
  `tls_controller(pki, name)`: a physical controller's `listen` and `tls` arguments for it.
- Tests marked `ovs` need ovsdb-server: skipped locally when it is missing, but a failure
  when `CI=true` or `LOOM_REQUIRE_INTEGRATION=1`, so CI never goes green by skipping.
- `serve_db(request, state_dir, schema)`: the same for fixtures of their own.
- `wait_for(predicate, timeout, what)`: how tests wait for a state (never a bare sleep).
- `loom_up(*args, cwd=...)`: a `loom up` process as an operator runs it, yielded with what
  it printed up to "Ctrl-C stops everything." (its banner, and the demo's matrix with
  `--demo`), stopped with its daemons when done, even on failure.
- `SmallDisk(path, size)`: a tmpfs of `size` mounted on `path` (root), filled and freed on
  demand, unmounted on exit: a full disk under a database.
- A failing test's report carries the tails of the logs its daemons wrote.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from loom_common.ovsdb import OvsdbCluster, OvsdbError, OvsdbServer, tool
from loom_common.ovsdb.server import PORT_RANGE_ENV, port_range
from loom_common.pki import Pki
from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, schema_path

_LOGS = pytest.StashKey[list[Path]]()
LOG_TAIL_LINES = 40


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `predicate` until it returns something true and return that; fail the test
    (`AssertionError` naming `what`) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """The session's PKI: nodes (`Sandbox(pki=)`) and controllers get certificates from it,
    as under `loom up`."""
    return Pki(tmp_path_factory.mktemp("pki")).ensure()


def tls_controller(pki: Pki, name: str = "physical-0") -> dict[str, Any]:
    """`PhysicalController` keyword arguments for a controller nodes reach over TLS."""
    return {"listen": "pssl:0:127.0.0.1", "tls": pki.issue(name, "controller")}


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


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, give this worker its share of the free ports (`LOOM_PORT_RANGE`,
    inherited by the daemons its tests start): worker i of n the i-th of n equal shares."""
    worker = _xdist_worker()
    if not worker.startswith("gw") or PORT_RANGE_ENV in os.environ:
        return
    index, count = int(worker[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    low, high = port_range()
    size = (high - low) // max(count, 1)
    os.environ[PORT_RANGE_ENV] = f"{low + index * size}-{low + (index + 1) * size - 1}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the files of end-to-end tests first (`_weight`), and ids of
    their own for items that share one."""
    if _xdist_worker():
        weight: dict[Path, int] = {}
        for item in items:
            weight[item.path] = min(weight.get(item.path, 2), _weight(item))
        items.sort(key=lambda item: weight[item.path])  # (stable: a file's order is kept)
    _own_ids(items)


def _xdist_worker() -> str:
    """This process's pytest-xdist worker id (`gw0`, ...), "" when it is none."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def _weight(item: pytest.Item) -> int:
    """0 for an end-to-end or `slow` test, 1 for one on a daemon, 2 for the rest: the
    workers take the files in this order, the longest first, so that no long file starts
    last and runs on one worker while the other is done."""
    if item.get_closest_marker("system") or item.get_closest_marker("slow"):
        return 0
    return 1 if item.get_closest_marker("ovs") or item.get_closest_marker("zk") else 2


def _own_ids(items: list[pytest.Item]) -> None:
    """Give items that share a node id (schemathesis's, one per API operation, all carry
    their test function's) ids of their own from their names: pytest-xdist hands tests to
    workers by node id, and ran one of 80 such items."""
    seen = collections.Counter(item.nodeid for item in items)
    for item in items:
        if seen[item.nodeid] > 1 and item.parent is not None:
            # (pytest 9 keeps a structured id, parsed from its text)
            item._id = type(item._id).parse(f"{item.parent.nodeid}::{item.name}")


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--update-snapshots`: snapshot tests rewrite their golden files instead of comparing."""
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        default=False,
        help="rewrite the golden files of snapshot tests (review the diff like code)",
    )


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


@contextlib.contextmanager
def serve_db(request: pytest.FixtureRequest, state_dir: Path, schema: str) -> Iterator[OvsdbServer]:
    """A running standalone ovsdb-server for `schema` (`CONFIG_SCHEMA` or `UNIVERSAL_SCHEMA`)
    in `state_dir`, its log attached to a failing report, stopped on exit."""
    name = "universal" if schema == UNIVERSAL_SCHEMA else "config"
    server = OvsdbServer(state_dir, schema_path(schema), name=name)
    register_log(request, server.log_path)
    try:
        yield server.start()
    finally:
        server.stop()


READY_LINE = "Ctrl-C stops everything."
"""The last line `loom up` prints once everything (and the demo) is up."""


@contextlib.contextmanager
def loom_up(*args: str, cwd: Path | None = None,
            timeout: float = 60.0) -> Iterator[tuple[subprocess.Popen[str], str]]:  # fmt: skip
    """Run `loom up ARGS...` (in `cwd`; none of the caller's `LOOM_` variables but its
    share of ports, so a developer's own token or URL cannot leak in); yield it and what it
    printed up to `READY_LINE` (a JSON object's message with `--log-format json`).

    It runs in a session of its own: on exit it gets SIGTERM (it stops its daemons and the
    demo's nodes), and if it has not ended within `timeout` seconds its whole process group
    is killed by PID.
    """
    loom = Path(sys.executable).parent / "loom"
    kept = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_") or k == PORT_RANGE_ENV}
    proc = subprocess.Popen(
        [str(loom), "up", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
        env=kept,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if READY_LINE in line:
                break
        yield proc, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        proc.stdout.close()


class SmallDisk:
    """A tmpfs of `size` (`mount -o size=`: `8m`) on `path`, made for a test (root only);
    `fill()` takes every free byte with one file, `free()` deletes it. Unmounted on exit,
    after whatever ran on it was stopped (lazily if a process still holds it)."""

    def __init__(self, path: Path, size: str) -> None:
        self.path = path
        self.size = size
        self.filler = path / "filler"

    def __enter__(self) -> SmallDisk:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size}", "loom-test",
                        str(self.path)], check=True, capture_output=True)  # fmt: skip
        return self

    def fill(self) -> None:
        """Write one file until the filesystem refuses another byte."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            chunk = 1 << 20
            while chunk:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError:
                    chunk //= 2
        finally:
            os.close(fd)

    def free(self) -> None:
        """Give the space back."""
        self.filler.unlink(missing_ok=True)

    def __exit__(self, *exc: object) -> None:
        done = subprocess.run(["umount", str(self.path)], capture_output=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", "--lazy", str(self.path)], capture_output=True,
                           check=False)  # fmt: skip


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
    with serve_db(request, tmp_path / "config-db", CONFIG_SCHEMA) as server:
        yield server


@pytest.fixture
def universal_db(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OvsdbServer]:
    """A running standalone Loom_Universal ovsdb-server in `tmp_path`, stopped at teardown."""
    with serve_db(request, tmp_path / "universal-db", UNIVERSAL_SCHEMA) as server:
        yield server


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


# ZooKeeper (issue 4): the `zk` and `zk_ensemble` fixtures and the `zk` marker's policy, the
# same as the `ovs` one: tests marked `zk` are skipped locally when java or Debian's
# ZooKeeper jar is missing, and fail instead when `CI=true` or `LOOM_REQUIRE_INTEGRATION=1`.

from loom_common.zookeeper import (  # noqa: E402 (this section is appended to the plugin)
    ZooKeeperEnsemble,
    ZooKeeperServer,
    missing_zookeeper,
)

# Short ticks let tests use sessions of 0.4 to 4 s (the server allows 2 to 20 ticks).
ZK_TEST_TICK_MS = 200


def require_zookeeper() -> None:
    """Skip the current test (fail it in CI) when java or ZooKeeper is not installed."""
    missing = missing_zookeeper()
    if not missing:
        return
    message = f"{', '.join(missing)} not installed (apt-get install zookeeper)"
    if integration_required():
        pytest.fail(message)
    pytest.skip(message)


@pytest.hookimpl(specname="pytest_runtest_setup")
def pytest_runtest_setup_zk(item: pytest.Item) -> None:
    """Skip (or, in CI, fail) `zk` tests when java or ZooKeeper is not installed."""
    if item.get_closest_marker("zk") is not None:
        require_zookeeper()


@pytest.fixture
def zk(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ZooKeeperServer]:
    """A running standalone ZooKeeper in `tmp_path` (tick 200 ms), stopped at teardown.

    `hosts` is its Kazoo connection string; `kill9()` crashes it and `restart()` starts it
    again on the same data directory and port. Its log is attached to a failing report.
    """
    require_zookeeper()
    server = ZooKeeperServer(tmp_path / "zk", tick_ms=ZK_TEST_TICK_MS)
    register_log(request, server.log_path)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def zk_ensemble(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ZooKeeperEnsemble]:
    """A running 3-member ZooKeeper ensemble in `tmp_path` (tick 200 ms), stopped at teardown.

    `hosts` lists every member; `members[i].kill9()` crashes one and
    `restart_member(members[i])` brings it back on its data directory.
    """
    require_zookeeper()
    ensemble = ZooKeeperEnsemble(tmp_path / "zk-ensemble", tick_ms=ZK_TEST_TICK_MS)
    for member in ensemble.members:
        register_log(request, member.log_path)
    try:
        yield ensemble.start()
    finally:
        ensemble.stop()


# A test that asks for a real daemon carries the daemon's marker, so that
# `-m "not ovs and not zk"` (`make test-fast`) starts none: one that does not fails before
# the daemon is started, naming the marker to add.
DAEMON_FIXTURES = {
    "ovs": ("config_db", "universal_db", "config_db_cluster"),
    "zk": ("zk", "zk_ensemble"),
}
"""The plugin's fixtures that start daemons, by the marker a test using them needs."""


@pytest.hookimpl(specname="pytest_runtest_setup", tryfirst=True)
def pytest_runtest_setup_markers(item: pytest.Item) -> None:
    """Fail a test that uses a daemon's fixture but lacks the daemon's marker."""
    names = set(getattr(item, "fixturenames", ()))
    for marker, fixtures in DAEMON_FIXTURES.items():
        used = sorted(names.intersection(fixtures))
        if used and item.get_closest_marker(marker) is None:
            pytest.fail(f"{item.nodeid} uses {', '.join(used)} (a real daemon) but is not "
                        f"marked {marker}: add @pytest.mark.{marker}", pytrace=False)  # fmt: skip
