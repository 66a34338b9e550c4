"""ovsdb-server deployment on real servers: standalone durability and a 3-member RAFT cluster."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loom_common.ovsdb import OvsdbCluster, OvsdbServer, tool

pytestmark = pytest.mark.ovs


def transact(remote: str, *ops: dict[str, object]) -> list[dict[str, object]]:
    """Run one transaction with ovsdb-client and return its result."""
    out = subprocess.run(
        [tool("ovsdb-client"), "--timeout=10", "transact", remote,
         json.dumps(["Loom_Config", *ops])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    result: list[dict[str, object]] = json.loads(out)
    assert not any("error" in op for op in result), result
    return result


def zone_names(remote: str) -> list[str]:
    result = transact(remote, {"op": "select", "table": "Transport_Zone", "where": []})
    rows = result[0]["rows"]
    assert isinstance(rows, list)
    return sorted(row["name"] for row in rows)


def insert_zone(remote: str, name: str) -> None:
    transact(
        remote,
        {"op": "insert", "table": "Transport_Zone",
         "row": {"name": name, "encap": "geneve", "revision": 1}},
    )  # fmt: skip


def test_standalone_survives_kill9(config_db: OvsdbServer) -> None:
    insert_zone(config_db.remote, "tz-a")
    pid = config_db.pid
    config_db.kill9()
    assert not config_db.running
    config_db.restart()
    assert config_db.pid != pid
    assert zone_names(config_db.remote) == ["tz-a"]


def test_standalone_stop_reaps_and_restart_keeps_port(config_db: OvsdbServer) -> None:
    port = config_db.port
    config_db.stop()
    assert not config_db.running
    with pytest.raises(subprocess.CalledProcessError):
        zone_names(config_db.remote)
    config_db.restart()
    assert config_db.port == port
    assert zone_names(config_db.remote) == []


def test_existing_db_is_reused(tmp_path: Path, config_db: OvsdbServer) -> None:
    insert_zone(config_db.remote, "kept")
    config_db.stop()
    again = OvsdbServer(config_db.state_dir, config_db.schema)
    with again:
        assert zone_names(again.remote) == ["kept"]


def test_compact_and_size(config_db: OvsdbServer) -> None:
    for i in range(20):
        insert_zone(config_db.remote, f"tz-{i}")
    before = config_db.db_size()
    config_db.compact()
    assert 0 < config_db.db_size() <= before


def test_cluster_replicates_and_survives_member_kill9(config_db_cluster: OvsdbCluster) -> None:
    first, second, third = config_db_cluster.members
    insert_zone(first.remote, "tz-1")
    assert zone_names(second.remote) == ["tz-1"]
    first.kill9()
    insert_zone(second.remote, "tz-2")
    assert zone_names(third.remote) == ["tz-1", "tz-2"]
    first.restart()
    config_db_cluster.wait_member(first, 60)
    assert "Status: cluster member" in config_db_cluster.member_status(first)
    assert zone_names(first.remote) == ["tz-1", "tz-2"]
