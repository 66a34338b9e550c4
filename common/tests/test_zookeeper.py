"""ZooKeeper deployment on real servers: standalone, a 3-member ensemble, the `zk` policy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from loom_common import testing
from loom_common.ovsdb import free_ports
from loom_common.procs import DaemonError, pid_exists
from loom_common.zookeeper import (
    ZooKeeperEnsemble,
    ZooKeeperError,
    ZooKeeperServer,
    classpath,
    four_letter_word,
    parse_srvr,
)


def kazoo(hosts: str, timeout: float = 2.0) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=15)
    return client


@pytest.fixture
def client(zk: ZooKeeperServer) -> Iterator[KazooClient]:
    c = kazoo(zk.hosts)
    try:
        yield c
    finally:
        c.stop()
        c.close()


# -- no server needed ------------------------------------------------------------------------


def test_parse_srvr() -> None:
    answer = "Zookeeper version: 3.8.0\nZxid: 0x2\nMode: follower\nNode count: 5\n"
    assert parse_srvr(answer) == {
        "Zookeeper version": "3.8.0",
        "Zxid": "0x2",
        "Mode": "follower",
        "Node count": "5",
    }


def test_four_letter_word_to_a_closed_port_is_none() -> None:
    (port,) = free_ports(1)
    assert four_letter_word(port, "ruok", timeout=0.5) is None


def test_classpath_needs_the_server_jar(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperError, match=r"zookeeper\.jar not found"):
        classpath(tmp_path)
    (tmp_path / "zookeeper.jar").touch()
    assert classpath(tmp_path) == str(tmp_path / "zookeeper.jar")
    (tmp_path / "slf4j-simple.jar").touch()
    assert classpath(tmp_path) == f"{tmp_path}/zookeeper.jar:{tmp_path}/slf4j-simple.jar"


def test_member_needs_its_myid_among_peers(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="myid"):
        ZooKeeperServer(tmp_path, myid=1)


ZK_TEST = """
import pytest

@pytest.mark.zk
def test_needs_zk():
    pass

def test_plain():
    pass
"""

INI = """
[pytest]
markers = zk: needs ZooKeeper
"""


@pytest.fixture
def no_zookeeper(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend ZooKeeper is not installed, outside CI."""
    monkeypatch.setattr(testing, "missing_zookeeper", lambda: ["java"])
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("LOOM_REQUIRE_INTEGRATION", raising=False)


@pytest.mark.usefixtures("no_zookeeper")
def test_missing_zookeeper_skips_zk_tests_locally(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(ZK_TEST)
    result = pytester.runpytest_inprocess("-p", "loom_common.testing", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*java not installed (apt-get install zookeeper)*"])


@pytest.mark.usefixtures("no_zookeeper")
@pytest.mark.parametrize(("var", "value"), [("CI", "true"), ("LOOM_REQUIRE_INTEGRATION", "1")])
def test_missing_zookeeper_fails_zk_tests_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    pytester.makeini(INI)
    pytester.makepyfile(ZK_TEST)
    result = pytester.runpytest_inprocess("-p", "loom_common.testing")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*java not installed*"])


# -- a standalone server ---------------------------------------------------------------------


@pytest.mark.zk
def test_standalone_files_answers_and_serves_kazoo(
    zk: ZooKeeperServer, client: KazooClient
) -> None:
    assert zk.hosts == f"127.0.0.1:{zk.port}"
    assert zk.mode() == "standalone"
    assert four_letter_word(zk.port, "ruok") == "imok"
    config = zk.config_path.read_text()
    assert f"clientPort={zk.port}\n" in config
    assert "clientPortAddress=127.0.0.1\n" in config
    assert "tickTime=200\n" in config
    assert zk.pid_path.read_text().strip() == str(zk.pid)
    assert zk.log_path.exists()
    assert zk.session_timeout_range == (0.4, 4.0)
    client.create("/loom/x", b"1", makepath=True)
    assert client.get("/loom/x")[0] == b"1"
    # The server grants what a test asks for within 2..20 ticks.
    short = kazoo(zk.hosts, timeout=1.0)
    try:
        assert short._session_timeout == 1000
    finally:
        short.stop()
        short.close()


@pytest.mark.zk
def test_standalone_survives_kill9_and_restarts_on_its_data(zk: ZooKeeperServer) -> None:
    c = kazoo(zk.hosts)
    c.create("/kept", b"v", makepath=True)  # acknowledged: in the transaction log
    c.stop()
    c.close()
    pid, port = zk.pid, zk.port
    assert pid is not None
    zk.kill9()
    assert not zk.running
    assert not pid_exists(pid)
    assert zk.mode() is None
    zk.restart()
    assert zk.pid != pid
    assert zk.port == port
    c = kazoo(zk.hosts)
    try:
        assert c.get("/kept")[0] == b"v"
    finally:
        c.stop()
        c.close()


@pytest.mark.zk
def test_stop_reaps_and_removes_pid_file(zk: ZooKeeperServer) -> None:
    pid = zk.pid
    assert pid is not None
    zk.stop()
    assert not zk.running
    assert not pid_exists(pid)
    assert not zk.pid_path.exists()
    assert four_letter_word(zk.port, "ruok", timeout=0.5) is None


@pytest.mark.zk
def test_port_taken_is_never_ready_and_reports_its_log(zk: ZooKeeperServer, tmp_path: Path) -> None:
    second = ZooKeeperServer(tmp_path / "second", port=zk.port)
    try:
        with pytest.raises(DaemonError, match=r"(?s)zk: (exited|not serving).*Address already"):
            second.start(timeout=20)
        assert not second.running
    finally:
        second.stop()
    assert zk.mode() == "standalone"


# -- an ensemble -----------------------------------------------------------------------------


@pytest.mark.zk
def test_ensemble_replicates_and_survives_leader_kill9(zk_ensemble: ZooKeeperEnsemble) -> None:
    ensemble = zk_ensemble
    assert ensemble.hosts == ",".join(f"127.0.0.1:{m.port}" for m in ensemble.members)
    ports = {m.port for m in ensemble.members}
    for peer in ensemble.members[0].peers:
        ports |= {peer.peer_port, peer.election_port}
    assert len(ports) == 9  # client, peer and election ports all distinct
    modes = sorted(m.mode() or "" for m in ensemble.members)
    assert modes == ["follower", "follower", "leader"]
    leader = ensemble.leader()
    assert leader is not None
    followers = [m for m in ensemble.members if m is not leader]

    writer = kazoo(followers[0].hosts)
    reader = kazoo(followers[1].hosts)
    anywhere = kazoo(ensemble.hosts, timeout=4.0)
    try:
        writer.create("/loom/a", b"1", makepath=True)
        reader.sync("/loom/a")
        assert reader.get("/loom/a")[0] == b"1"

        leader.kill9()
        for member in followers:
            member.wait_serving(timeout=30)  # two of three: a quorum elects a new leader
        assert ensemble.leader() in followers
        anywhere.retry(anywhere.create, "/loom/b", b"2")
        assert anywhere.retry(anywhere.get, "/loom/a")[0] == b"1"

        ensemble.restart_member(leader)  # same data directory: it rejoins and catches up
        assert leader.mode() == "follower"
        late = kazoo(leader.hosts)
        try:
            late.sync("/loom/b")
            assert late.get("/loom/b")[0] == b"2"
        finally:
            late.stop()
            late.close()
    finally:
        for c in (writer, reader, anywhere):
            c.stop()
            c.close()
