"""The databases' health checks (`OvsdbServer.health`, `python -m loom_common.health`) on real
ovsdb-servers: healthy, hung, in failure mode on a full disk (held until space returns),
and a RAFT member whose log is torn rejoining its cluster from the others."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from loom_common.health import EXIT_HOLD, EXIT_UNHEALTHY, verdict_of
from loom_common.ovsdb import (
    MIN_FREE_BYTES,
    TORN_LOG,
    OvsdbCluster,
    OvsdbServer,
    health_verdict,
)
from loom_common.supervise import HEALTHY, HealthPolicy, Verdict
from loom_common.testing import SmallDisk, register_log, wait_for
from loom_schemas import CONFIG_SCHEMA, schema_path

pytestmark = pytest.mark.ovs

STATUS = """7582
Name: Loom_Config
Cluster ID: 1112 (1112b353-ae1b-4303-9dde-e2c127fe5a20)
Server ID: 7582 (7582f713-2ea2-4a6c-a826-9df2ff21c27a)
Address: tcp:127.0.0.1:21142
Status: {status}
Role: leader
"""


def _verdict(output: str | None, error: str | None = None, free: int = 10 << 20) -> Verdict:
    return health_verdict("Loom_Config", clustered=True, output=output, error=error, free=free,
                          needed=MIN_FREE_BYTES)  # fmt: skip


def test_what_cluster_status_says_makes_the_verdict() -> None:
    assert _verdict(STATUS.format(status="cluster member")) == HEALTHY
    # An election, or peers that are down: not the member's fault, a restart mends nothing.
    assert _verdict(STATUS.format(status="disconnected from the cluster (election timeout)")) == (
        HEALTHY)  # fmt: skip
    failed = _verdict(STATUS.format(status="failed"))
    assert failed.state == "fault"
    assert "failure mode" in failed.reason
    closed = _verdict(None, "unknown cluster")
    assert closed.state == "fault"
    assert "closed" in closed.reason
    assert _verdict(None, "ovs-appctl: cannot connect").state == "unanswered"
    assert _verdict(None, None).state == "unanswered"
    held = _verdict(STATUS.format(status="failed"), free=4096)
    assert held.state == "hold"
    assert "4096 bytes free" in held.reason
    standalone = health_verdict("Loom_Config", clustered=False, output="Loom_Config\n_Server\n",
                                error=None, free=0, needed=1)  # fmt: skip
    assert standalone == HEALTHY  # a standalone server on a full disk mends by itself
    gone = health_verdict("Loom_Config", clustered=False, output="_Server\n", error=None,
                          free=10 << 20, needed=1)  # fmt: skip
    assert gone == Verdict("fault", "it no longer serves Loom_Config")


def test_the_command_acts_on_faults_in_a_row_and_holds_on_a_hold() -> None:
    policy = HealthPolicy(interval=0.0, failures=3, unanswered=3)
    fault, hold = Verdict("fault", "failed"), Verdict("hold", "disk full")
    answers = iter([fault, HEALTHY, fault, fault, fault])
    assert verdict_of(lambda: next(answers), policy, 3)[0] == 0
    assert verdict_of(lambda: fault, policy, 3) == (EXIT_UNHEALTHY,
                                                    "unhealthy: failed (3 in a row)")  # fmt: skip
    assert verdict_of(lambda: hold, policy, 3)[0] == EXIT_HOLD


def test_healthy_servers_standalone_and_clustered(
    config_db: OvsdbServer, config_db_cluster: OvsdbCluster
) -> None:
    assert config_db.health() == HEALTHY
    for member in config_db_cluster.members:
        assert member.health() == HEALTHY


def test_a_hung_server_is_unanswered_within_the_timeout(config_db: OvsdbServer) -> None:
    pid = config_db.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        verdict = config_db.health(timeout=1.0)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert verdict.state == "unanswered", verdict
    wait_for(lambda: config_db.health() == HEALTHY, 10, "healthy again once resumed")


@pytest.fixture
def cluster_on_small_disk(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[
        tuple[SmallDisk, OvsdbCluster]]:  # fmt: skip
    assert os.geteuid() == 0, "a full disk is a tmpfs the test mounts: it runs as root"
    with SmallDisk(tmp_path / "disk", "16m") as disk:
        cluster = OvsdbCluster(disk.path / "cluster", schema_path(CONFIG_SCHEMA))
        for member in cluster.members:
            register_log(request, member.log_path)
        try:
            yield disk, cluster.start()
        finally:
            cluster.stop()


def _transact(cluster: OvsdbCluster, op: Mapping[str, object]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ovsdb-client", "--timeout=3", "transact", cluster.unix_remote,
                           json.dumps(["Loom_Config", op])], capture_output=True, text=True,
                          check=False)  # fmt: skip


def _write(cluster: OvsdbCluster, generation: int) -> subprocess.CompletedProcess[str]:
    pad = ["map", [["pad", "x" * 500]]]
    op = {"op": "update", "table": "Loom_Global", "where": [],
          "row": {"generation": generation, "external_ids": pad}}  # fmt: skip
    return subprocess.run(["ovsdb-client", "--timeout=3", "transact", cluster.unix_remote,
                           json.dumps(["Loom_Config", op])], capture_output=True, text=True,
                          check=False)  # fmt: skip


def _health_command(member: OvsdbServer) -> list[str]:
    return [sys.executable, "-m", "loom_common.health", "--ctl", str(member.ctl_path), "--db",
            "Loom_Config", "--file", str(member.db_path), "--clustered", "--interval",
            "0.2"]  # fmt: skip


def test_a_full_disk_puts_members_in_failure_mode_held_until_space_returns(
    cluster_on_small_disk: tuple[SmallDisk, OvsdbCluster],
) -> None:
    disk, cluster = cluster_on_small_disk
    insert = {"op": "insert", "table": "Loom_Global", "row": {"generation": 1}}
    assert _transact(cluster, insert).returncode == 0
    disk.fill()

    writes = iter(range(2, 10**6))

    def all_held() -> bool:
        _write(cluster, next(writes))
        return all(m.health().state == "hold" for m in cluster.members)

    wait_for(all_held, 30, "every member unhealthy and held on the full disk")
    held = subprocess.run(_health_command(cluster.members[0]), capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert held.returncode == EXIT_HOLD, held.stderr
    disk.free()
    for member in cluster.members:
        assert member.health().state == "fault"  # it does not mend by itself
    failing = subprocess.run(_health_command(cluster.members[0]), capture_output=True,
                             text=True, check=False)  # fmt: skip
    assert failing.returncode == EXIT_UNHEALTHY, failing.stderr
    for member in cluster.members:
        member.restart()
    for member in cluster.members:
        cluster.wait_member(member, 30)
        assert member.health() == HEALTHY
    wait_for(lambda: _write(cluster, next(writes)).returncode == 0, 30, "a write again")


def _append_record(path: Path, record: dict[str, object]) -> None:
    """Append one record to an ovsdb log file, as ovsdb-server writes them."""
    body = json.dumps(record, separators=(",", ":")).encode() + b"\n"
    header = f"OVSDB CLUSTER {len(body)} {hashlib.sha1(body).hexdigest()}\n".encode()
    with path.open("ab") as log:
        log.write(header + body)


def test_a_member_whose_log_is_torn_rejoins_from_the_others(
    config_db_cluster: OvsdbCluster,
) -> None:
    cluster = config_db_cluster
    insert = {"op": "insert", "table": "Loom_Global", "row": {"generation": 7}}
    assert _transact(cluster, insert).returncode == 0
    member = next(m for m in cluster.members if "Role: follower" in cluster.member_status(m))
    old_sid = subprocess.run(["ovsdb-tool", "db-sid", str(member.db_path)], capture_output=True,
                             text=True, check=True).stdout.strip()  # fmt: skip
    member.stop()
    # What a full disk left once: a commit index past the last entry the member wrote.
    _append_record(member.db_path, {"commit_index": 1000})
    read = subprocess.run(["ovsdb-server", "--no-chdir", "--unixctl", str(member.ctl_path) + "x",
                           "--remote", f"punix:{member.socket_path}x", str(member.db_path)],
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert TORN_LOG in read.stderr, read.stderr  # as a restart would find it
    member.restart()
    cluster.wait_member(member, 30)
    assert (member.db_path.parent / f"{member.db_path.name}.torn-{old_sid}").exists()
    servers = cluster.member_status(member).partition("Servers:")[2]
    assert old_sid[:4] not in servers
    assert servers.count("tcp:127.0.0.1") == 3
    assert member.health() == HEALTHY
    dump = subprocess.run(["ovsdb-client", "dump", member.unix_remote, "Loom_Config",
                           "Loom_Global", "generation"], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert "7" in dump.stdout.split()
