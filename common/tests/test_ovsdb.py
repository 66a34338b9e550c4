"""ovsdb-server deployment on real servers: standalone durability and a 3-member RAFT cluster."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from loom_common.ovsdb import (
    EPHEMERAL_RANGE,
    JEMALLOC,
    OvsdbCluster,
    OvsdbError,
    OvsdbServer,
    RawConnection,
    Replica,
    TransactError,
    compact,
    free_ports,
    readable,
    schema_name,
    tool,
)
from loom_common.ovsdb.server import PORT_RANGE_ENV
from loom_common.procs import DaemonError, pid_exists
from loom_common.testing import wait_for
from loom_schemas import CONFIG_SCHEMA, schema_path

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


def zone_rows(remote: str) -> list[dict[str, object]]:
    result = transact(remote, {"op": "select", "table": "Transport_Zone", "where": []})
    rows = result[0]["rows"]
    assert isinstance(rows, list)
    return rows


def zone_names(remote: str) -> list[str]:
    return sorted(str(row["name"]) for row in zone_rows(remote))


def insert_zone(remote: str, name: str) -> None:
    transact(
        remote,
        {"op": "insert", "table": "Transport_Zone",
         "row": {"name": name, "encap": "geneve", "revision": 1}},
    )  # fmt: skip


def test_free_ports_are_distinct() -> None:
    ports = free_ports(6)
    assert len(set(ports)) == 6
    low = int(EPHEMERAL_RANGE.read_text().split()[0])
    assert all(1024 <= p < low for p in ports), "outside the kernel's ephemeral range"
    assert not set(ports) & set(free_ports(6)), "a port handed out twice"


def test_free_ports_keep_to_the_share_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORT_RANGE_ENV, "20000-20049")
    ports = free_ports(20)
    assert all(20000 <= p <= 20049 for p in ports), ports
    monkeypatch.setenv(PORT_RANGE_ENV, "20000-40000000")
    with pytest.raises(OvsdbError, match="LOOM_PORT_RANGE='20000-40000000': not LOW-HIGH"):
        free_ports(1)
    monkeypatch.setenv(PORT_RANGE_ENV, "many")
    with pytest.raises(OvsdbError, match="LOOM_PORT_RANGE"):
        free_ports(1)


def test_standalone_files_and_remote(config_db: OvsdbServer) -> None:
    assert config_db.remote == f"tcp:127.0.0.1:{config_db.port}"
    assert config_db.db_name == "Loom_Config"
    assert config_db.db_path.exists()
    assert config_db.socket_path.exists()
    assert config_db.pid_path.read_text().strip() == str(config_db.pid)
    assert "Loom_Config" in config_db.appctl("ovsdb-server/list-dbs").split()
    assert zone_names(config_db.unix_remote) == []


def test_standalone_survives_kill9(config_db: OvsdbServer) -> None:
    insert_zone(config_db.remote, "tz-a")  # acknowledged: committed to the file
    pid = config_db.pid
    assert pid is not None
    config_db.kill9()
    assert not config_db.running
    assert not pid_exists(pid)
    config_db.restart()
    assert config_db.pid != pid
    assert zone_names(config_db.remote) == ["tz-a"]


def test_standalone_stop_reaps_and_restart_keeps_port(config_db: OvsdbServer) -> None:
    port, pid = config_db.port, config_db.pid
    assert pid is not None
    config_db.stop()
    assert not config_db.running
    assert not pid_exists(pid)
    with pytest.raises(subprocess.CalledProcessError):
        zone_names(config_db.remote)
    config_db.restart()
    assert config_db.port == port
    assert zone_names(config_db.remote) == []


def test_existing_db_is_reused(config_db: OvsdbServer) -> None:
    insert_zone(config_db.remote, "kept")
    config_db.stop()
    again = OvsdbServer(config_db.state_dir, config_db.schema)
    with again:
        assert zone_names(again.remote) == ["kept"]
    assert not again.running


def test_changed_schema_converts_existing_db(tmp_path: Path) -> None:
    schema = json.loads(schema_path(CONFIG_SCHEMA).read_text())
    schema.pop("cksum", None)
    schema["version"] = "99.0.0"
    schema["tables"]["Transport_Zone"]["columns"]["color"] = {
        "type": {"key": "string", "min": 0, "max": 1}
    }
    newer = tmp_path / "newer.ovsschema"
    newer.write_text(json.dumps(schema))
    state = tmp_path / "db"
    with OvsdbServer(state, schema_path(CONFIG_SCHEMA)) as old:
        insert_zone(old.remote, "tz-old")
    with OvsdbServer(state, newer) as new:
        assert schema_name(newer) == "Loom_Config"
        version = subprocess.run(
            [tool("ovsdb-tool"), "db-version", str(new.db_path)],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert version == "99.0.0"
        (row,) = zone_rows(new.remote)
        assert row["name"] == "tz-old"
        assert row["color"] == ["set", []]


def test_port_taken_is_not_ready_and_reports_its_log(tmp_path: Path) -> None:
    """ovsdb-server keeps retrying a taken port; we time out, stop it, and show its log."""
    with OvsdbServer(tmp_path / "a", schema_path(CONFIG_SCHEMA)) as first:
        second = OvsdbServer(tmp_path / "b", schema_path(CONFIG_SCHEMA), port=first.port)
        try:
            with pytest.raises(DaemonError, match=r"(?s)not ready after 2s.*already in use"):
                second.start(timeout=2)
            assert not second.running
        finally:
            second.stop()
        assert zone_names(first.remote) == []


def test_compact_and_size(config_db: OvsdbServer) -> None:
    for i in range(20):
        insert_zone(config_db.remote, f"tz-{i}")
    before = config_db.db_size()
    config_db.compact()
    assert 0 < config_db.db_size() <= before


def test_cluster_forms_replicates_and_survives_leader_kill9(
    config_db_cluster: OvsdbCluster,
) -> None:
    cluster = config_db_cluster
    assert cluster.remote == ",".join(f"tcp:127.0.0.1:{m.port}" for m in cluster.members)
    for member in cluster.members:
        assert "Status: cluster member" in cluster.member_status(member)
    leader = cluster.leader()
    assert leader is not None
    followers = [m for m in cluster.members if m is not leader]

    insert_zone(followers[0].remote, "tz-1")  # a write through a follower
    assert zone_names(followers[1].remote) == ["tz-1"]
    assert zone_names(leader.remote) == ["tz-1"]

    leader.kill9()
    assert not leader.running
    insert_zone(followers[0].remote, "tz-2")  # two of three: still a majority
    assert zone_names(followers[1].remote) == ["tz-1", "tz-2"]
    assert cluster.leader() in followers

    cluster.restart_member(leader)  # same file: it rejoins and catches up
    assert "Status: cluster member" in cluster.member_status(leader)
    assert zone_names(leader.remote) == ["tz-1", "tz-2"]
    insert_zone(leader.remote, "tz-3")
    assert zone_names(followers[0].remote) == ["tz-1", "tz-2", "tz-3"]


def test_cluster_through_the_combined_remote(config_db_cluster: OvsdbCluster) -> None:
    """`ovsdb-client` (like the IDL) accepts the comma-separated remote list."""
    insert_zone(config_db_cluster.remote, "tz-any")
    assert zone_names(config_db_cluster.remote) == ["tz-any"]


def test_raw_connection_to_a_cluster_passes_over_dead_and_cut_off_members(
    config_db_cluster: OvsdbCluster,
) -> None:
    """`RawConnection` (the controllers' client) takes the combined remote: it connects to a
    live member that is in its cluster, never to a dead one or to one cut off from the
    majority (it could serve stale data)."""
    cluster = config_db_cluster
    dead, *alive = cluster.members
    dead.kill9()
    for n in range(12):  # each connection starts at a random member
        conn = RawConnection(cluster.remote, db="Loom_Config", timeout=10)
        try:
            assert conn.remote in {m.remote for m in alive}
            ops = [{"op": "insert", "table": "Transport_Zone",
                    "row": {"name": f"tz-{n}", "encap": "geneve", "revision": 1}}]  # fmt: skip
            conn.transact("Loom_Config", ops)  # a write through either member
        finally:
            conn.close()
    assert len(zone_names(alive[0].remote)) == 12

    alive[0].kill9()  # the last member has no majority: it stops being connected

    def cut_off() -> bool:
        status = transact_server(alive[1].remote)
        return status["connected"] is False

    wait_for(cut_off, 30, "the last member to notice it lost its cluster")
    with pytest.raises(OvsdbError, match="not connected to its cluster"):
        RawConnection(cluster.remote, db="Loom_Config", timeout=10)


def transact_server(remote: str) -> dict[str, object]:
    """The `_Server` database's row about Loom_Config on one server."""
    out = subprocess.run(
        [tool("ovsdb-client"), "--timeout=10", "transact", remote,
         json.dumps(["_Server", {"op": "select", "table": "Database",
                                 "where": [["name", "==", "Loom_Config"]]}])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    row: dict[str, object] = json.loads(out)[0]["rows"][0]
    return row


def test_keep_alive_answers_probes_while_the_owner_is_busy(config_db: OvsdbServer) -> None:
    """ovsdb-server drops a client that ignores its probes for 5 + 5 s; a connection with
    keep-alive survives being left alone, and its thread hands on updates with a wake-up."""
    plain = RawConnection(config_db.remote, timeout=30)
    kept = RawConnection(config_db.remote, timeout=30)
    woken = threading.Event()
    kept.keep_alive(0.5, woken.set)
    try:
        kept.call("monitor", ["Loom_Config", None, {"Transport_Zone": {"columns": ["name"]}}])

        def dropped() -> bool:  # the plain connection, never polled, is dropped
            return "no response to inactivity probe" in config_db.log_path.read_text()

        wait_for(dropped, 30, "ovsdb-server to drop the silent connection")
        insert_zone(config_db.remote, "tz-while-busy")
        wait_for(woken.is_set, 10, "the keep-alive thread to report the update")
        updates = kept.poll()
        assert [u["method"] for u in updates] == ["update"]
        assert "tz-while-busy" in json.dumps(updates)
        assert kept.transact("Loom_Config", [{"op": "comment", "comment": "alive"}])
        with pytest.raises((OSError, OvsdbError)):
            plain.transact("Loom_Config", [{"op": "comment", "comment": "gone"}])
    finally:
        plain.close()
        kept.close()


def test_raw_connection_reads_large_replies_with_braces_in_strings(config_db: OvsdbServer) -> None:
    """Replies of many chunks parse once complete, also when strings hold unbalanced
    braces (which the reader's brace count cannot see through)."""
    names = [f"tz-{n}-{'{' * (n % 3)}{'}' * (n % 2)}" for n in range(3000)]
    ops = [{"op": "insert", "table": "Transport_Zone",
            "row": {"name": name, "encap": "geneve", "revision": 1}} for name in names]  # fmt: skip
    conn = RawConnection(config_db.remote, timeout=30)
    try:
        conn.transact("Loom_Config", ops)
        initial = conn.call("monitor", ["Loom_Config", None, {"Transport_Zone": {}}])
        got = sorted(row["new"]["name"] for row in initial["Transport_Zone"].values())
        assert got == sorted(names)
        insert_zone(config_db.remote, "tz-{late")
        update = wait_for(conn.poll, 10, "the update")
        assert "tz-{late" in json.dumps(update)
    finally:
        conn.close()


@pytest.mark.parametrize("text", ["plain", "caf\u00e9 \U0001f600 {"])
def test_raw_connection_splits_messages_that_arrive_together(text: str) -> None:
    """Notifications sent back to back, whole or cut anywhere, come out one by one and in
    order, ASCII or not (the split is where the first message ends, in characters)."""
    messages = [{"method": "update", "params": [None, {"n": n, "s": text * n}], "id": None}
                for n in range(6)]  # fmt: skip
    wire = "".join(" " * (n % 2) + json.dumps(m, ensure_ascii=False)
                   for n, m in enumerate(messages)).encode()  # fmt: skip
    for cut in (len(wire), 7, len(wire) // 2 + 3):
        ours, theirs = socket.socketpair()
        conn = RawConnection.accepted(ours, "pair")
        try:
            got: list[dict[str, object]] = []
            for start in range(0, len(wire), cut):
                theirs.sendall(wire[start : start + cut])
                got += wait_for(conn.poll, 10, "a message") if start + cut >= len(wire) else []
            while len(got) < len(messages):
                got += wait_for(conn.poll, 10, "the rest")
            assert got == messages
        finally:
            conn.close()
            theirs.close()


def test_a_connection_past_1024_descriptors(config_db: OvsdbServer) -> None:
    """A controller with thousands of nodes has descriptors past `select`'s limit (1,024):
    a connection, its replies and its waits work there (poll, not select)."""
    pipes = [os.pipe() for _ in range(600)]
    try:
        conn = RawConnection(config_db.remote, timeout=30)
        try:
            assert conn.fileno() > 1024
            insert_zone(config_db.remote, "far")
            conn.call("monitor", ["Loom_Config", None, {"Transport_Zone": {}}])
            insert_zone(config_db.remote, "farther")
            assert "farther" in json.dumps(wait_for(conn.poll, 10, "the update"))
            assert readable([conn.fileno(), pipes[-1][0]], 0) == set()
            os.write(pipes[-1][1], b"x")
            assert readable([conn.fileno(), pipes[-1][0]], 1) == {pipes[-1][0]}
        finally:
            conn.close()
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)


def test_ovsdb_server_runs_with_jemalloc(config_db: OvsdbServer) -> None:
    """`make install` installs Debian's libjemalloc2, and servers run with it preloaded."""
    assert JEMALLOC is not None, "libjemalloc2 is not installed: run make install"
    assert config_db.pid is not None
    maps = Path(f"/proc/{config_db.pid}/maps").read_text()
    assert "libjemalloc.so.2" in maps


def test_transactions_in_flight_with_large_replies(config_db: OvsdbServer) -> None:
    """`transact_each` keeps two transactions in flight, each reply larger than the
    socket's buffers (the server writes one while we write the next: neither may block
    the other), and yields every one's results in order; a failed one raises."""
    batches = [
        [{"op": "insert", "table": "Transport_Zone",
          "row": {"name": f"tz-{b}-{n}", "encap": "geneve", "revision": 1}}
         for n in range(20000)]
        for b in range(4)
    ]  # fmt: skip
    conn = RawConnection(config_db.unix_remote, timeout=30)  # small, fixed buffers
    try:
        results = list(conn.transact_each("Loom_Config", iter(batches)))
        assert [len(r) for r in results] == [20000] * 4
        select = {"op": "select", "table": "Transport_Zone", "where": [],
                  "columns": ["_uuid", "name"]}  # fmt: skip
        (selected,) = conn.transact("Loom_Config", [select])
        by_uuid = {row["_uuid"][1]: row["name"] for row in selected["rows"]}
        for b, result in enumerate(results):
            assert [by_uuid[r["uuid"][1]] for r in result] == [f"tz-{b}-{n}" for n in range(20000)]
        duplicate = [{"op": "insert", "table": "Transport_Zone",
                      "row": {"name": "tz-0-0", "encap": "geneve", "revision": 1}}]  # fmt: skip
        with pytest.raises(TransactError):
            list(conn.transact_each("Loom_Config", [duplicate]))
        assert conn.transact("Loom_Config", [{"op": "comment", "comment": "still usable"}])
    finally:
        conn.close()


def test_calls_in_flight_keep_their_order_and_at_most_their_window(
    config_db: OvsdbServer,
) -> None:
    """`call_each` yields each call's result in order with at most `window` requests sent
    and not answered; a lazy `params` is built as the calls go; an error raises and leaves
    the connection usable."""
    conn = RawConnection(config_db.unix_remote, timeout=30)
    unanswered: list[int] = []

    def params() -> Iterator[list[str]]:
        for i in range(6):
            unanswered.append(len(conn._waiting))  # requests in flight when this one is made
            yield [f"call-{i}"]

    try:
        results = list(conn.call_each("echo", params(), window=2))
        assert results == [[f"call-{i}"] for i in range(6)]
        assert max(unanswered) == 1  # the window: this one and one before it
        with pytest.raises(TransactError):
            list(conn.call_each("no-such-method", [[]]))
        assert conn.call("echo", ["after"]) == ["after"]
    finally:
        conn.close()


def test_replies_taken_out_of_order_reach_their_requests(config_db: OvsdbServer) -> None:
    """A reply that arrives while another request's is awaited is kept for its own request
    (with two in flight, nothing depends on the server answering in order)."""
    conn = RawConnection(config_db.unix_remote, timeout=30)
    try:
        first = conn._request("echo", ["first"])
        second = conn._request("echo", ["second"])
        assert conn._reply(second, "echo") == ["second"]  # the first's reply came before it
        assert first in conn._early  # kept (waiting for it otherwise would never end)
        assert conn._reply(first, "echo") == ["first"]
        assert conn.call("echo", ["third"]) == ["third"]
    finally:
        conn.close()


def test_replica_without_inserts_still_sees_rows_present_changed_and_deleted(
    config_db: OvsdbServer,
) -> None:
    """A table in `no_inserts` arrives whole at the start, then only its modifications
    (with every replicated column) and deletions: not the rows inserted meanwhile."""
    insert_zone(config_db.remote, "tz-before")
    replica = Replica(
        config_db.unix_remote, "Loom_Config",
        {"Transport_Zone": ["name", "encap"], "Logical_Switch": ["name"]},
        no_inserts=frozenset({"Transport_Zone"}),
    )  # fmt: skip
    try:
        assert [row["name"] for _, _, row in replica.start() if row] == ["tz-before"]
        insert_zone(config_db.remote, "tz-after")
        transact(
            config_db.remote,
            {"op": "insert", "table": "Logical_Switch",
             "row": {"name": "ls", "tenant": "t", "tunnel_key": 1, "revision": 1,
                     "replication_mode": "source"}},
        )  # fmt: skip

        def switch_seen() -> list[tuple[str, str, object]]:
            return [c for c in replica.poll() if c[0] == "Logical_Switch"]

        wait_for(switch_seen, 10, "the other table's insert")  # after the zone's, if sent
        assert sorted(r["name"] for r in replica.rows["Transport_Zone"].values()) == ["tz-before"]
        transact(
            config_db.remote,
            {"op": "update", "table": "Transport_Zone", "where": [["name", "==", "tz-after"]],
             "row": {"encap": "vxlan"}},
        )  # fmt: skip
        changed = wait_for(replica.poll, 10, "the modification")
        assert [(t, row and row["name"], row and row["encap"]) for t, _, row in changed] == [
            ("Transport_Zone", "tz-after", "vxlan")
        ]
        transact(
            config_db.remote,
            {"op": "delete", "table": "Transport_Zone", "where": [["name", "==", "tz-before"]]},
        )
        deleted = wait_for(replica.poll, 10, "the deletion")
        assert [(t, row) for t, _, row in deleted] == [("Transport_Zone", None)]
        assert [r["name"] for r in replica.rows["Transport_Zone"].values()] == ["tz-after"]
    finally:
        replica.close()


def test_an_unkept_table_passes_its_rows_through_and_keeps_none(
    config_db: OvsdbServer,
) -> None:
    """A table in `unkept` reports its rows as a kept one does but holds none of them; a
    restart reports every row read again (not those deleted meanwhile: the owner knows
    what it holds) and counts one more read of every row (`reads`)."""
    insert_zone(config_db.remote, "tz-a")
    insert_zone(config_db.remote, "tz-b")
    replica = Replica(
        config_db.unix_remote, "Loom_Config",
        {"Transport_Zone": ["name", "encap"], "Logical_Switch": ["name"]},
        unkept=frozenset({"Transport_Zone"}),
    )  # fmt: skip
    try:
        assert replica.reads == 0
        started = replica.start()
        assert replica.reads == 1
        assert sorted(row["name"] for t, _, row in started if row) == ["tz-a", "tz-b"]
        assert "Transport_Zone" not in replica.rows
        assert replica.rows["Logical_Switch"] == {}
        by_name = {row["name"]: u for _, u, row in started if row}

        transact(
            config_db.remote,
            {"op": "update", "table": "Transport_Zone", "where": [["name", "==", "tz-a"]],
             "row": {"encap": "vxlan"}},
        )  # fmt: skip
        changed = wait_for(replica.poll, 10, "the modification")
        # the whole row, though the replica had none to merge the change into
        assert changed == [("Transport_Zone", by_name["tz-a"], {"name": "tz-a", "encap": "vxlan"})]
        assert replica.reads == 1

        replica.close()
        transact(
            config_db.remote,
            {"op": "delete", "table": "Transport_Zone", "where": [["name", "==", "tz-b"]]},
        )
        insert_zone(config_db.remote, "tz-c")
        again = replica.start()
        assert replica.reads == 2
        assert sorted(row["name"] for _, _, row in again if row) == ["tz-a", "tz-c"]
        assert [c for c in again if c[2] is None] == []
    finally:
        replica.close()


def test_a_staged_read_is_the_database_as_of_its_last_table(config_db: OvsdbServer) -> None:
    """A `staged` replica reads a table at a time. A transaction committed between two
    tables' reads (here: after the zones are read, before the switches) is in what
    `start()` returns once: the zone's change from the updates, the switch from its read."""
    insert_zone(config_db.remote, "tz-a")

    class Meddling(RawConnection):
        def call_noting(self, method: str, params: list[Any]) -> tuple[Any, list[Any]]:
            if params[1] == ["initial", "Logical_Switch"]:
                transact(
                    config_db.remote,
                    {"op": "update", "table": "Transport_Zone", "where": [],
                     "row": {"encap": "vxlan"}},
                    {"op": "insert", "table": "Logical_Switch",
                     "row": {"name": "ls", "tenant": "t", "tunnel_key": 1, "revision": 1,
                             "replication_mode": "source"}},
                )  # fmt: skip
            return super().call_noting(method, params)

    for unkept in (frozenset(), frozenset({"Logical_Switch"})):
        replica = Replica(
            config_db.unix_remote, "Loom_Config",
            {"Transport_Zone": ["name", "encap"], "Logical_Switch": ["name"]},
            staged=True, unkept=unkept,
            connect=lambda: Meddling(config_db.unix_remote),
        )  # fmt: skip
        try:
            started = replica.start()
            zones = [row for t, _, row in started if t == "Transport_Zone"]
            switches = [row for t, _, row in started if t == "Logical_Switch"]
            assert zones[-1] == {"name": "tz-a", "encap": "vxlan"}, started
            assert switches == [{"name": "ls"}], started
            assert replica.rows["Transport_Zone"]
            assert replica.poll() == []
            transact(
                config_db.remote,
                {"op": "delete", "table": "Logical_Switch", "where": []},
                {"op": "update", "table": "Transport_Zone", "where": [], "row": {"encap": "stt"}},
            )  # fmt: skip
            later = wait_for(replica.poll, 10, "a later transaction's updates")
            assert sorted((t, bool(row)) for t, _, row in later) == [
                ("Logical_Switch", False),
                ("Transport_Zone", True),
            ]
        finally:
            replica.close()
        transact(
            config_db.remote,
            {"op": "update", "table": "Transport_Zone", "where": [], "row": {"encap": "geneve"}},
        )


def test_a_sent_transaction_outlives_another_thread_pumping(config_db: OvsdbServer) -> None:
    """`send_transact` returns at once; its reply, taken in by someone else's `poll` (the
    keep-alive thread's), is still there for `finish_transact`."""
    conn = RawConnection(config_db.remote, timeout=10)
    try:
        request = conn.send_transact("Loom_Config", [{"op": "comment", "comment": "sent"}])
        # someone else reads the connection until the reply has arrived
        wait_for(lambda: (conn.poll(), bool(conn._early))[1], 10, "the reply to be taken in")
        assert conn.finish_transact(request) == [{}]
    finally:
        conn.close()


def test_compact_rows_are_equal_and_share_what_they_hold_alike() -> None:
    text = (
        b'{"bfd": ["map", []], "error": ["set", []], "type": "dummy", "ofport": 3,'
        b' "external_ids": ["map", [["iface-id", "a-port-with-a-long-name"], ["k", "v"]]],'
        b' "ports": ["set", [["uuid", "0b1c5a4e-7f51-4a3c-9b7e-6d2c1e0f9a88"], ["uuid", "x"]]],'
        b' "qos": ["uuid", "5f1c5a4e-7f51-4a3c-9b7e-6d2c1e0f9a88"]}'
    )
    one, two = compact(orjson.loads(text)), compact(orjson.loads(text))
    assert one == orjson.loads(text), "a compact row equals the row parsed"
    assert one["bfd"] is two["bfd"], "one empty map for every row"
    assert one["error"] is two["error"], "one empty set for every row"
    assert one["type"] is two["type"], "a short string interned"
    ids, ids2 = one["external_ids"][1][0], two["external_ids"][1][0]
    assert ids[0] is ids2[0], "a map's short key interned"
    assert ids[1] is not ids2[1], "a long string left as it is"
    assert one["ports"][1][0][0] is two["qos"][0], "the uuid tag interned, in a set too"


def test_a_conditional_replica_follows_the_rows_its_condition_selects(
    config_db: OvsdbServer,
) -> None:
    """With `conditions` the replica monitors with `monitor_cond`: it holds the rows the
    condition selects, rebuilt from `update2`'s diffs (a set's elements, a map's pairs) as
    the `monitor` method gives them, and a changed condition brings the rows entering it
    and removes those leaving it."""
    columns = ["name", "tags", "external_ids", "revision"]
    for name in ("a", "b"):
        insert_zone(config_db.remote, name)
    replica = Replica(config_db.unix_remote, "Loom_Config", {"Transport_Zone": columns},
                      conditions={"Transport_Zone": [["name", "==", "a"]]},
                      monitor_id="test")  # fmt: skip

    def selected(name: str) -> dict[str, object]:
        where = [["name", "==", name]]
        select: dict[str, object] = {"op": "select", "table": "Transport_Zone", "where": where,
                                     "columns": columns}  # fmt: skip
        (result,) = transact(config_db.remote, select)
        rows = result["rows"]
        assert isinstance(rows, list)
        return dict(rows[0])

    try:
        assert [row and row["name"] for _, _, row in replica.start()] == ["a"]
        for tags, ids in (
            (["set", ["x", "y"]], ["map", [["k", "1"], ["l", "2"]]]),
            ("y", ["map", [["k", "3"]]]),  # one element left: the atom; a pair changed
            (["set", []], ["map", []]),
        ):
            transact(config_db.remote,
                     {"op": "update", "table": "Transport_Zone", "where": [["name", "==", "a"]],
                      "row": {"tags": tags, "external_ids": ids}})  # fmt: skip
            wait_for(replica.poll, 10, "the modification")
            assert list(replica.rows["Transport_Zone"].values()) == [selected("a")]
        replica.change_conditions([{"Transport_Zone": [["name", "==", "b"]]}])
        changes: list[tuple[str, str, dict[str, Any] | None]] = []

        def both() -> bool:
            changes.extend(replica.poll())
            return len(changes) >= 2

        wait_for(both, 10, "a leaving the condition and b entering it")
        assert sorted(str(row and row["name"]) for _, _, row in changes) == ["None", "b"]
        assert list(replica.rows["Transport_Zone"].values()) == [selected("b")]
        replica.close()
        assert replica.start() == []  # read again with the condition changed to: b, as held
    finally:
        replica.close()
