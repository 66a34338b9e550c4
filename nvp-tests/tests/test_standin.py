"""Stand-in transport nodes, without a controller: their OVSDB's transactions and monitors
(against a real ovsdb-server where they must agree), vswitchd's ofports (against a real
ovs-vswitchd), their OpenFlow (handshake, roles, bundles, flow mods, statistics, TLV map),
and the real clients (`NodeSession`, `Switch`, `ovs-ofctl`) against a fleet process."""

from __future__ import annotations

import json
import math
import socket
import struct
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_common.ovsdb import OvsdbServer, RawConnection, TransactError, tool
from loom_common.testing import wait_for
from loom_lab.standin import (
    Fleet,
    NodeSpec,
    StandinError,
    VifSpec,
    expected_digest,
    table_digest,
)
from loom_lab.standin.db import Database, Monitor
from loom_lab.standin.fleet import FleetServer
from loom_lab.standin.flows import split
from loom_lab.standin.schema import Schema
from loom_lab.standin.switch import Bridge, Connection
from loom_lab.standin.vswitch import Vswitchd, add_vif_ops, node_ops, remove_vif_ops
from loom_ovs import ofp
from loom_ovs.channel import Deposed
from loom_ovs.manager import Fenced, Manager, NodeSession, TunnelSpec
from loom_ovs.openflow import Flow, Mod, OpenFlowError, Switch, cookie, encode
from loom_ovs.sandbox import VSWITCH_SCHEMA, Sandbox

SCHEMA = Schema.load(VSWITCH_SCHEMA)
DB = "Open_vSwitch"
CORPUS = Path(__file__).parents[2] / "ovs-integration" / "tests" / "corpus.flows"
"""The OpenFlow encoder's corpus of flows (ovs-integration's test data)."""


def _db() -> Database:
    return Database(SCHEMA)


def _ok(db: Database, ops: list[Any]) -> list[Any]:
    results, _ = db.transact(ops)
    assert not [r for r in results if isinstance(r, dict) and "error" in r], results
    return results


def _error(db: Database, ops: list[Any]) -> str:
    """The error tag a transaction fails with (it must fail)."""
    results, changes = db.transact(ops)
    errors = [r["error"] for r in results if isinstance(r, dict) and "error" in r]
    assert errors, results
    assert changes == []
    return str(errors[0])


def _names(db: Database, table: str) -> set[str]:
    return {row.get("name", "") for row in db.rows[table].values()}


def _by_name(table: str, name: str) -> list[Any]:
    return [["name", "==", name]]


# ---- OVSDB: transactions ----


def test_a_failed_operation_undoes_the_whole_transaction() -> None:
    db = _db()
    _ok(db, node_ops("hv1", "172.31.0.2", "unix:/x.mgmt", []))
    before = json.dumps(db.rows, sort_keys=True)
    ops = [
        *add_vif_ops(db, "vm1", "vif-1", "50:54:00:00:00:01"),
        {"op": "update", "table": "Bridge", "where": [], "row": {"fail_mode": "bogus"}},
        {"op": "comment", "comment": "never run"},
    ]
    results, changes = db.transact(ops)
    # the earlier operations' results, the error, then null for the rest (ovsdb-server's form)
    assert [r if r is None or "error" not in r else r["error"] for r in results][-2:] == [
        "constraint violation", None]  # fmt: skip
    assert all("uuid" in r or "count" in r for r in results[:-2])
    assert changes == []
    assert json.dumps(db.rows, sort_keys=True) == before
    assert _error(db, [{"op": "abort"}]) == "aborted"


def test_a_wait_fences_writes() -> None:
    """Loom's fencing: a compare-and-set of the token, and writes behind a `wait` that
    fails the whole transaction once the node records another token."""
    db = _db()
    _ok(db, node_ops("hv1", "172.31.0.2", "unix:/x.mgmt", []))

    def fenced(token: int, name: str) -> list[Any]:
        holds = ["external_ids", "includes", ["map", [["loom-fence", str(token)]]]]
        return [{"op": "wait", "table": "Open_vSwitch", "timeout": 0, "where": [holds],
                 "columns": ["_uuid"], "until": "!=", "rows": []},
                *add_vif_ops(db, name, f"vif-{name}", "50:54:00:00:00:09")]  # fmt: skip

    def claim(token: int) -> list[Any]:
        current = next(iter(db.rows["Open_vSwitch"].values()))["external_ids"]
        return [{"op": "wait", "table": "Open_vSwitch", "timeout": 0, "where": [],
                 "columns": ["external_ids"], "until": "==", "rows": [{"external_ids": current}]},
                {"op": "mutate", "table": "Open_vSwitch", "where": [], "mutations": [
                    ["external_ids", "delete", ["set", ["loom-fence"]]],
                    ["external_ids", "insert", ["map", [["loom-fence", str(token)]]]],
                ]}]  # fmt: skip

    assert _error(db, fenced(5, "a")) == "timed out"  # no token recorded yet
    _ok(db, claim(5))
    _ok(db, fenced(5, "a"))
    stale = claim(6)
    _ok(db, claim(7))  # the newer master
    assert _error(db, stale) == "timed out"  # compared with what changed meanwhile
    assert _error(db, fenced(5, "b")) == "timed out"
    assert _names(db, "Port") == {"br-int", "a"}
    _ok(db, fenced(7, "b"))
    # a wait that would block is not faked
    wait = {"op": "wait", "table": "Bridge", "where": [], "columns": ["name"], "until": "==",
            "rows": []}  # fmt: skip
    assert _error(db, [wait]) == "not supported"
    _ok(db, [{**wait, "until": "==", "rows": [{"name": "br-int"}], "timeout": 0}])


def test_references_are_counted_and_garbage_collected() -> None:
    db = _db()
    _ok(db, node_ops("hv1", "172.31.0.2", "unix:/x.mgmt", []))
    _ok(db, add_vif_ops(db, "vm1", "vif-1", "50:54:00:00:00:01"))
    assert _names(db, "Interface") == {"br-int", "vm1"}
    nowhere = "5f4a6f9a-0000-4000-8000-000000000001"
    bad = {"op": "insert", "table": "Port", "row": {"name": "p", "interfaces": ["uuid", nowhere]}}
    assert _error(db, [bad]) == "referential integrity violation"
    vm1 = db.find("Interface", "name", "vm1")
    in_use = {"op": "delete", "table": "Interface", "where": [["_uuid", "==", ["uuid", vm1]]]}
    assert _error(db, [in_use]) == "referential integrity violation"
    # a non-root row nothing references is dropped at once (here: a Port not on a bridge)
    _ok(db, [{"op": "insert", "table": "Interface", "uuid-name": "i", "row": {"name": "lost"}},
             {"op": "insert", "table": "Port",
              "row": {"name": "lost", "interfaces": ["named-uuid", "i"]}}])  # fmt: skip
    assert "lost" not in _names(db, "Port") | _names(db, "Interface")
    # taking a port off the bridge deletes it and its interfaces
    _ok(db, remove_vif_ops(db, "vm1"))
    assert _names(db, "Port") == {"br-int"}
    assert _names(db, "Interface") == {"br-int"}
    assert vm1 not in db.refs
    # a named row may be referred to before its insert
    _ok(db, [{"op": "mutate", "table": "Open_vSwitch", "where": [],
              "mutations": [["manager_options", "insert", ["set", [["named-uuid", "m"]]]]]},
             {"op": "insert", "table": "Manager", "uuid-name": "m",
              "row": {"target": "tcp:x:1"}}])  # fmt: skip
    assert {r["target"] for r in db.rows["Manager"].values()} == {"tcp:x:1"}


def test_maps_indexes_and_constraints() -> None:
    db = _db()
    _ok(db, node_ops("hv1", "172.31.0.2", "unix:/x.mgmt", []))
    _ok(db, add_vif_ops(db, "vm1", "vif-1", "50:54:00:00:00:01"))

    def ids(*mutations: Any) -> dict[str, str]:
        _ok(db, [{"op": "mutate", "table": "Bridge", "where": [], "mutations": list(mutations)}])
        bridge = next(iter(db.rows["Bridge"].values()))
        return dict(map(tuple, bridge.get("external_ids", ["map", []])[1]))

    assert ids(["external_ids", "insert", ["map", [["a", "1"]]]]) == {"a": "1"}
    # a map insert keeps a key already there (hence Loom's delete-then-insert)
    assert ids(["external_ids", "insert", ["map", [["a", "2"], ["b", "3"]]]]) == {
        "a": "1",
        "b": "3",
    }
    assert ids(["external_ids", "delete", ["map", [["a", "9"]]]]) == {"a": "1", "b": "3"}
    assert ids(["external_ids", "delete", ["set", ["a"]]]) == {"b": "3"}
    assert ids(["external_ids", "delete", "b"], ["external_ids", "insert", ["map", [["c", "4"]]]]
               ) == {"c": "4"}  # fmt: skip
    second = [{"op": "insert", "table": "Bridge", "uuid-name": "b", "row": {"name": "br-int"}},
              {"op": "mutate", "table": "Open_vSwitch", "where": [],
               "mutations": [["bridges", "insert", ["set", [["named-uuid", "b"]]]]]}]  # fmt: skip
    assert _error(db, second) == "constraint violation"  # the index on Bridge.name
    rename = {"op": "update", "table": "Interface", "where": _by_name("Interface", "vm1"),
              "row": {"name": "vm2"}}  # fmt: skip
    assert _error(db, [rename]) == "constraint violation"  # immutable
    too_high = {"op": "update", "table": "Interface", "where": _by_name("Interface", "vm1"),
                "row": {"ofport_request": 70000}}  # fmt: skip
    assert _error(db, [too_high]) == "constraint violation"
    two = {"op": "update", "table": "Interface", "where": _by_name("Interface", "vm1"),
           "row": {"ofport_request": ["set", [1, 2]]}}  # fmt: skip
    assert _error(db, [two]) == "syntax error"
    add = {"op": "mutate", "table": "Interface", "where": _by_name("Interface", "vm1"),
           "mutations": [["ingress_policing_rate", "+=", 5]]}  # fmt: skip
    _ok(db, [add, add])
    assert (
        db.get("Interface", db.find("Interface", "name", "vm1") or "", "ingress_policing_rate")
        == 10
    )
    divide = {"op": "mutate", "table": "Interface", "where": [],
              "mutations": [["ingress_policing_rate", "/=", 0]]}  # fmt: skip
    assert _error(db, [divide]) == "domain error"


def test_monitors_send_what_changed() -> None:
    db = _db()
    _ok(db, node_ops("hv1", "172.31.0.2", "unix:/x.mgmt", []))
    monitor = Monitor(SCHEMA, {
        "Interface": {"columns": ["name", "ofport"]},
        "Port": [{"columns": ["name"], "select": {"insert": False}}]})  # fmt: skip
    assert monitor.initial(db) == {}
    _, changes = db.transact(add_vif_ops(db, "vm1", "vif-1", "50:54:00:00:00:01"))
    update = monitor.update(changes)
    assert update is not None
    assert set(update) == {"Interface"}  # (Port inserts not selected)
    assert sorted(u["new"]["name"] for u in update["Interface"].values()) == ["br-int", "vm1"]
    assert all(u["new"]["ofport"] == ["set", []] for u in update["Interface"].values())
    vm1 = db.find("Interface", "name", "vm1")
    assert vm1 is not None
    # a change to a column not monitored: no update
    _, changes = db.transact([{"op": "update", "table": "Interface", "where": _by_name("I", "vm1"),
                               "row": {"mtu_request": 1400}}])  # fmt: skip
    assert changes
    assert monitor.update(changes) is None
    _, changes = db.transact(Vswitchd().writes(db, now=0.0))
    update = monitor.update(changes)
    assert update is not None
    # a modification: `old` has the changed columns only, `new` all monitored ones
    assert update["Interface"][vm1] == {"old": {"ofport": ["set", []]},
                                        "new": {"name": "vm1", "ofport": 1}}  # fmt: skip
    _, changes = db.transact(remove_vif_ops(db, "vm1"))
    update = monitor.update(changes)
    assert update is not None
    assert update["Interface"] == {vm1: {"old": {"name": "vm1", "ofport": 1}}}
    assert list(update["Port"].values()) == [{"old": {"name": "vm1"}}]


# The same transactions on a real ovsdb-server and on a stand-in's database must have the
# same outcome, operation by operation, and leave the same rows (uuids named by the rows
# they point to).
SCENARIO: list[Callable[[Callable[[str, str], str]], list[Any]]] = [
    lambda _: [{"op": "insert", "table": "Open_vSwitch",
                "row": {"external_ids": ["map", [["loom-fence", "5"], ["system-id", "hv1"]]]}}],
    lambda _: [  # br-int: referred to before it is inserted
        {"op": "mutate", "table": "Open_vSwitch", "where": [],
         "mutations": [["bridges", "insert", ["set", [["named-uuid", "br"]]]]]},
        {"op": "insert", "table": "Interface", "uuid-name": "bi",
         "row": {"name": "br-int", "type": "internal"}},
        {"op": "insert", "table": "Port", "uuid-name": "bp",
         "row": {"name": "br-int", "interfaces": ["named-uuid", "bi"]}},
        {"op": "insert", "table": "Bridge", "uuid-name": "br",
         "row": {"name": "br-int", "ports": ["named-uuid", "bp"], "fail_mode": "secure"}}],
    lambda _: [{"op": "insert", "table": "Bridge", "uuid-name": "b", "row": {"name": "br-int"}},
               {"op": "mutate", "table": "Open_vSwitch", "where": [],
                "mutations": [["bridges", "insert", ["set", [["named-uuid", "b"]]]]]}],
    lambda _: [{"op": "insert", "table": "Port", "row": {
        "name": "x", "interfaces": ["uuid", "5f4a6f9a-0000-4000-8000-000000000001"]}}],
    lambda uuid: [  # a tunnel port behind the fence (token 5: holds)
        {"op": "wait", "table": "Open_vSwitch", "timeout": 0,
         "where": [["external_ids", "includes", ["map", [["loom-fence", "5"]]]]],
         "columns": ["_uuid"], "until": "!=", "rows": []},
        {"op": "insert", "table": "Interface", "uuid-name": "ti",
         "row": {"name": "lt1", "type": "geneve", "bfd": ["map", [["enable", "true"]]],
                 "options": ["map", [["key", "flow"], ["remote_ip", "172.31.0.9"]]]}},
        {"op": "insert", "table": "Port", "uuid-name": "tp",
         "row": {"name": "lt1", "interfaces": ["named-uuid", "ti"]}},
        {"op": "mutate", "table": "Bridge",
         "where": [["_uuid", "==", ["uuid", uuid("Bridge", "br-int")]]],
         "mutations": [["ports", "insert", ["set", [["named-uuid", "tp"]]]]]}],
    lambda _: [  # the compare-and-set of a newer token
        {"op": "wait", "table": "Open_vSwitch", "timeout": 0, "where": [],
         "columns": ["external_ids"], "until": "==",
         "rows": [{"external_ids": ["map", [["loom-fence", "5"], ["system-id", "hv1"]]]}]},
        {"op": "mutate", "table": "Open_vSwitch", "where": [],
         "mutations": [["external_ids", "delete", ["set", ["loom-fence"]]],
                       ["external_ids", "insert", ["map", [["loom-fence", "7"]]]]]}],
    lambda _: [  # the old master's write: refused whole
        {"op": "mutate", "table": "Bridge", "where": [],
         "mutations": [["external_ids", "insert", ["map", [["loom-zone-a", "1"]]]]]},
        {"op": "wait", "table": "Open_vSwitch", "timeout": 0,
         "where": [["external_ids", "includes", ["map", [["loom-fence", "5"]]]]],
         "columns": ["_uuid"], "until": "!=", "rows": []}],
    lambda _: [{"op": "mutate", "table": "Bridge", "where": [], "mutations": [
        ["external_ids", "insert", ["map", [["a", "1"], ["b", "2"]]]],
        ["external_ids", "insert", ["map", [["a", "3"], ["c", "4"]]]],
        ["external_ids", "delete", ["map", [["b", "9"]]]],
        ["external_ids", "delete", ["set", ["c"]]]]}],
    lambda uuid: [{"op": "delete", "table": "Interface",
                   "where": [["_uuid", "==", ["uuid", uuid("Interface", "lt1")]]]}],
    lambda _: [  # QoS and a queue, a map of integers to references
        {"op": "insert", "table": "Queue", "uuid-name": "q",
         "row": {"other_config": ["map", [["max-rate", "1000"]]]}},
        {"op": "insert", "table": "QoS", "uuid-name": "qos",
         "row": {"type": "linux-htb", "queues": ["map", [[0, ["named-uuid", "q"]]]]}},
        {"op": "update", "table": "Port", "where": [["name", "==", "lt1"]],
         "row": {"qos": ["named-uuid", "qos"]}}],
    lambda _: [{"op": "delete", "table": "QoS", "where": []}],
    lambda _: [{"op": "update", "table": "Port", "where": [["name", "==", "lt1"]],
                "row": {"qos": ["set", []]}},
               {"op": "delete", "table": "QoS", "where": []},
               {"op": "delete", "table": "Queue", "where": []}],
    lambda _: [{"op": "update", "table": "Interface", "where": [["name", "==", "lt1"]],
                "row": {"name": "lt2"}}],
    lambda _: [{"op": "update", "table": "Bridge", "where": [], "row": {"fail_mode": "bogus"}}],
    lambda _: [{"op": "update", "table": "Interface", "where": [["name", "==", "lt1"]],
                "row": {"ofport_request": 70000}}],
    lambda _: [{"op": "update", "table": "Interface", "where": [["name", "==", "lt1"]],
                "row": {"ofport_request": ["set", [1, 2]]}}],
    lambda _: [{"op": "mutate", "table": "Interface", "where": [["name", "==", "lt1"]],
                "mutations": [["ingress_policing_rate", "+=", 7]]},
               {"op": "select", "table": "Interface", "where": [["ingress_policing_rate", ">", 5]],
                "columns": ["name", "ingress_policing_rate"]}],
    lambda _: [{"op": "insert", "table": "Interface", "uuid-name": "i", "row": {"name": "lost"}},
               {"op": "insert", "table": "Port", "row": {"name": "lost",
                                                        "interfaces": ["named-uuid", "i"]}}],
    lambda _: [{"op": "wait", "table": "Bridge", "where": [], "columns": ["name"], "until": "==",
                "rows": [{"name": "br-int"}], "timeout": 0},
               {"op": "wait", "table": "Port", "where": [["name", "!=", "br-int"]],
                "columns": ["name"], "until": "==", "rows": [{"name": "br-int"}], "timeout": 0}],
    lambda uuid: [{"op": "mutate", "table": "Bridge", "where": [], "mutations": [
        ["ports", "delete", ["set", [["uuid", uuid("Port", "lt1")]]]]]}],
    lambda _: [{"op": "insert", "table": "Open_vSwitch", "row": {}}],
    lambda _: [{"op": "comment", "comment": "x"}, {"op": "abort"},
               {"op": "delete", "table": "Bridge", "where": []}],
]  # fmt: skip


def _outcome(results: list[Any]) -> list[Any]:
    """A transaction's results as comparable: each op ok (with what it selected) or its
    error's tag."""
    shown: list[Any] = []
    for result in results:
        if result is None or "error" in result:
            shown.append(result and result["error"])
        elif "rows" in result:
            shown.append(sorted(json.dumps(r, sort_keys=True) for r in result["rows"]))
        else:
            shown.append("count" in result and result["count"])
    return shown


def _dump(transact: Callable[[list[Any]], list[Any]]) -> dict[str, list[str]]:
    """Every row of the tables the scenario uses, uuids replaced by the names of the rows."""
    tables = ["Open_vSwitch", "Bridge", "Port", "Interface", "QoS", "Queue", "Manager"]
    selects = [{"op": "select", "table": t, "where": [],
                "columns": ["_uuid", *SCHEMA.tables[t].columns]} for t in tables]  # fmt: skip
    rows = dict(zip(tables, (r["rows"] for r in transact(selects)), strict=True))
    names = {row["_uuid"][1]: f"{t}:{row.get('name', '')}" for t in tables for row in rows[t]}

    def named(value: Any) -> Any:
        if isinstance(value, list) and len(value) == 2 and value[0] == "uuid":
            return names.get(value[1], "?")
        if isinstance(value, list) and len(value) == 2 and value[0] == "set":
            return ["set", sorted(named(v) for v in value[1])]  # (sorted by uuid: by name)
        if isinstance(value, list):
            return [named(v) for v in value]
        return value

    return {t: sorted(json.dumps({c: named(v) for c, v in row.items() if c != "_uuid"},
                                 sort_keys=True) for row in rows[t]) for t in tables}  # fmt: skip


@pytest.mark.ovs
def test_transactions_end_as_on_ovsdb_server(tmp_path: Path) -> None:
    server = OvsdbServer(tmp_path, VSWITCH_SCHEMA, name="conf").start()
    conn = RawConnection(server.unix_remote)
    try:
        db = _db()

        def real(ops: list[Any]) -> list[Any]:
            results: list[Any] = conn.call("transact", [DB, *ops])
            return results

        def standin(ops: list[Any]) -> list[Any]:
            return db.transact(ops)[0]

        def uuid_in(transact: Callable[[list[Any]], list[Any]]) -> Callable[[str, str], str]:
            def find(table: str, name: str) -> str:
                select = {"op": "select", "table": table, "where": [["name", "==", name]],
                          "columns": ["_uuid"]}  # fmt: skip
                found: str = transact([select])[0]["rows"][0]["_uuid"][1]
                return found

            return find

        for step, make in enumerate(SCENARIO):
            want = _outcome(real(make(uuid_in(real))))
            got = _outcome(standin(make(uuid_in(standin))))
            assert got == want, f"step {step}"
            assert _dump(standin) == _dump(real), f"step {step}"
        assert len(_dump(real)["Port"]) == 1  # (the scenario ends with br-int alone)
    finally:
        conn.close()
        server.stop()


# ---- vswitchd ----


def _ofports(vifs: dict[str, int | None]) -> dict[str, int | None]:
    return dict(sorted(vifs.items()))


def test_ofports_are_given_as_ovs_gives_them() -> None:
    db, vswitchd = _db(), Vswitchd()
    _ok(db, node_ops("hv1", "172.31.0.2", "unix:/x.mgmt", []))

    def plug(name: str, request: int | None = None) -> None:
        _ok(db, add_vif_ops(db, name, f"vif-{name}", "50:54:00:00:00:01", request))
        _ok(db, vswitchd.writes(db, now=0.0))

    def ofports() -> dict[str, Any]:
        return {row["name"]: row.get("ofport") for row in db.rows["Interface"].values()}

    for name in ("a", "b", "c"):
        plug(name)
    assert ofports() == {"br-int": 65534, "a": 1, "b": 2, "c": 3}
    _ok(db, remove_vif_ops(db, "b"))
    _ok(db, vswitchd.writes(db, now=1.0))
    plug("d")  # not 2: OVS passes over a number freed in the last hour
    plug("e", request=2)  # asked for: given
    plug("f", request=3)  # in use: the next free one
    assert ofports() == {"br-int": 65534, "a": 1, "c": 3, "d": 4, "e": 2, "f": 5}
    assert vswitchd.writes(db, now=2.0) == []


@pytest.mark.ovs
def test_ofports_as_on_a_real_vswitchd(tmp_path: Path) -> None:
    db, vswitchd = _db(), Vswitchd()
    _ok(db, node_ops("hv1", "172.31.0.2", "unix:/x.mgmt", []))
    steps = [("add", "a"), ("add", "b"), ("add", "c"), ("del", "b"), ("add", "d"), ("del", "a"),
             ("add", "a"), ("add", "b")]  # fmt: skip
    with Sandbox(tmp_path) as sandbox:
        node = sandbox.add_node("hv1")
        for op, name in steps:
            if op == "add":
                node.add_vif(name, f"vif-{name}", "50:54:00:00:00:01")
                _ok(db, add_vif_ops(db, name, f"vif-{name}", "50:54:00:00:00:01"))
            else:
                node.remove_vif(name)
                _ok(db, remove_vif_ops(db, name))
            _ok(db, vswitchd.writes(db, now=0.0))
        real = {name: int(node.vsctl("get", "Interface", name, "ofport")) for name in "abcd"}
    ours = {row["name"]: row["ofport"] for row in db.rows["Interface"].values()}
    assert ours == {**real, "br-int": 65534}


# ---- OpenFlow ----


class _Peer:
    """A controller's end of a stand-in's OpenFlow connection: what it was sent."""

    def __init__(self, bridge: Bridge) -> None:
        self.out = b""
        self.closed = False
        self.conn = Connection(bridge, self._take, self._close)
        self.conn.start()
        self.messages()  # (its HELLO)

    def _take(self, data: bytes) -> None:
        self.out += data

    def _close(self) -> None:
        self.closed = True

    def messages(self) -> list[tuple[int, int, bytes]]:
        """(type, xid, body) of each message received since the last call."""
        found, at = [], 0
        while at < len(self.out):
            _, kind, length, xid = struct.unpack_from("!BBHI", self.out, at)
            found.append((kind, xid, self.out[at + 8 : at + length]))
            at += length
        self.out = b""
        return found

    def ask(self, *messages: bytes) -> list[tuple[int, int, bytes]]:
        self.conn.receive(b"".join(messages))
        return self.messages()


def _errors(answers: list[tuple[int, int, bytes]]) -> list[tuple[int, int, int]]:
    """(xid, type, code) of each error (an experimenter error's code is its exp_type)."""
    return [(xid, *struct.unpack_from("!HH", body)) for kind, xid, body in answers
            if kind == ofp.OFPT_ERROR]  # fmt: skip


def _peer(bridge: Bridge | None = None) -> _Peer:
    peer = _Peer(bridge or Bridge(1))
    assert peer.ask(ofp.hello()) == []
    return peer


FLOW = Flow(0, 100, "in_port=1,reg0=5", "resubmit(,8)", cookie(1))
OTHER = Flow(8, 10, "metadata=0x1", "drop", cookie(2))


def _bundle(bundle_id: int, mods: list[Mod], xid: int = 100,
            commit: bool = True) -> list[bytes]:  # fmt: skip
    out = [ofp.bundle_control(bundle_id, ofp.OFPBCT_OPEN_REQUEST, xid)]
    for i, mod in enumerate(mods, start=1):
        inner = encode(mod)
        inner = inner[:4] + struct.pack("!I", xid + i) + inner[8:]
        out.append(ofp.bundle_add(bundle_id, inner, xid + i))
    ctl = ofp.OFPBCT_COMMIT_REQUEST if commit else ofp.OFPBCT_DISCARD_REQUEST
    out.append(ofp.bundle_control(bundle_id, ctl, xid + 99))
    return out


def test_the_handshake_takes_openflow_15_only() -> None:
    peer = _Peer(Bridge(1))
    old = ofp.header(ofp.OFPT_HELLO, 16, 0)[:0] + struct.pack("!BBHI", 4, 0, 16, 0) + struct.pack(
        "!HHI", 1, 8, 1 << 4)  # OpenFlow 1.3 only  # fmt: skip
    answers = peer.ask(old)
    assert [(kind, *struct.unpack_from("!HH", body)) for kind, _, body in answers] == [
        (ofp.OFPT_ERROR, ofp.OFPET_HELLO_FAILED, ofp.OFPHFC_INCOMPATIBLE)]  # fmt: skip
    assert peer.closed
    peer = _peer()
    assert peer.ask(ofp.header(ofp.OFPT_ECHO_REQUEST, 12, 7) + b"ping") == [
        (ofp.OFPT_ECHO_REPLY, 7, b"ping")]  # fmt: skip
    assert peer.ask(ofp.header(ofp.OFPT_BARRIER_REQUEST, 8, 8)) == [
        (ofp.OFPT_BARRIER_REPLY, 8, b"")
    ]
    (kind, _, body), = peer.ask(ofp.header(ofp.OFPT_FEATURES_REQUEST, 8, 9))  # fmt: skip
    assert kind == ofp.OFPT_FEATURES_REPLY
    assert struct.unpack_from("!Q", body)[0] == 1
    # what it does not know is refused, not ignored (a gap shows instead of a hang)
    assert _errors(peer.ask(ofp.header(ofp.OFPT_PACKET_OUT + 100, 8, 10))) == [
        (10, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE)]  # fmt: skip
    assert _errors(peer.ask(ofp.multipart_request(13, b"", 11))) == [
        (11, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_MULTIPART)]  # fmt: skip
    assert _errors(peer.ask(ofp.nx_message(12, b"", 12))) == [
        (12, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_EXP_TYPE)]  # fmt: skip


def test_bundles_apply_at_commit_all_or_nothing() -> None:
    bridge = Bridge(1)
    peer = _peer(bridge)
    answers = peer.ask(*_bundle(1, [("add", FLOW), ("add", OTHER)], commit=False))
    assert [kind for kind, _, _ in answers] == [ofp.OFPT_BUNDLE_CONTROL] * 2
    assert bridge.flows == {}  # discarded
    assert bridge.counters.discarded == 1
    # a flow_mod the stand-in refuses when it is added: the controller discards
    bad = encode(("add", FLOW))
    bad = bad[:24] + bytes([ofp.OFPTT_ALL]) + bad[25:]  # an add to "all tables"
    messages = _bundle(2, [("add", OTHER)], commit=False)
    messages.insert(2, ofp.bundle_add(2, bad[:4] + struct.pack("!I", 50) + bad[8:], 50))
    assert _errors(peer.ask(*messages)) == [(50, ofp.OFPET_FLOW_MOD_FAILED,
                                             ofp.OFPFMFC_BAD_TABLE_ID)]  # fmt: skip
    assert bridge.flows == {}
    answers = peer.ask(*_bundle(3, [("add", FLOW), ("add", OTHER)]))
    assert struct.unpack_from("!IH", answers[-1][2]) == (3, ofp.OFPBCT_COMMIT_REPLY)
    assert table_digest(bridge.flows.items()) == expected_digest([FLOW, OTHER])
    assert bridge.counters.bundles == 1
    # bundle errors as OVS's: opened twice (and dropped), unknown, closed, other flags
    peer.ask(ofp.bundle_control(4, ofp.OFPBCT_OPEN_REQUEST, 60))
    assert _errors(peer.ask(ofp.bundle_control(4, ofp.OFPBCT_OPEN_REQUEST, 61))) == [
        (61, ofp.OFPET_BUNDLE_FAILED, ofp.OFPBFC_BAD_ID)]  # fmt: skip
    assert _errors(peer.ask(ofp.bundle_control(4, ofp.OFPBCT_COMMIT_REQUEST, 62))) == [
        (62, ofp.OFPET_BUNDLE_FAILED, ofp.OFPBFC_BAD_ID)]  # fmt: skip
    peer.ask(ofp.bundle_control(5, ofp.OFPBCT_OPEN_REQUEST, 63),
             ofp.bundle_control(5, ofp.OFPBCT_CLOSE_REQUEST, 64))  # fmt: skip
    add = encode(("delete", FLOW))
    assert _errors(peer.ask(ofp.bundle_add(5, add[:4] + struct.pack("!I", 65) + add[8:], 65))) == [
        (65, ofp.OFPET_BUNDLE_FAILED, ofp.OFPBFC_BUNDLE_CLOSED)]  # fmt: skip
    wrong_xid = ofp.bundle_add(6, add, 66)  # (the inner xid is 0)
    assert _errors(peer.ask(wrong_xid)) == [(66, ofp.OFPET_BUNDLE_FAILED, ofp.OFPBFC_MSG_BAD_XID)]
    assert table_digest(bridge.flows.items()) == expected_digest([FLOW, OTHER])


BUNDLED_KINDS = st.sampled_from(["add", "delete_strict", "wrong_xid", "other_bundle"])
BUNDLED = st.lists(st.tuples(BUNDLED_KINDS, st.integers(0, 3), st.integers(0, 2)), max_size=25)


@settings(max_examples=60, deadline=None)
@given(BUNDLED, st.lists(st.integers(1, 400), max_size=30))
def test_bundled_flow_mods_read_in_any_pieces_keep_what_each_says(
    mods: list[tuple[str, int, int]], cuts: list[int]
) -> None:
    """A bundle of flow adds and deletes, some refused when added (a wrong inner xid, a
    bundle not opened), read in pieces cut anywhere: at commit the table is each accepted
    add cut as `flows.split` cuts it (the last of a key wins), less what was deleted -- the
    native run of adds (`standin_bundle_adds`, `standin_apply_adds`) and the general path
    agree."""
    bridge = Bridge(1)
    peer = _peer(bridge)
    stream = [ofp.bundle_control(1, ofp.OFPBCT_OPEN_REQUEST, 1)]
    want: dict[bytes, bytes] = {}
    refused = []
    for i, (kind, key, actions) in enumerate(mods, start=2):
        action = ["drop", "resubmit(,8)", "output:3"][actions]
        flow = Flow(key % 2, 100 + key, f"in_port={key}", action, cookie(actions))
        inner = encode(("delete" if kind == "delete_strict" else "add", flow))
        inner = inner[:4] + struct.pack("!I", i) + inner[8:]
        if kind == "wrong_xid":
            stream.append(ofp.bundle_add(1, inner, i + 1000))
            refused.append(i + 1000)
        elif kind == "other_bundle":  # (not opened: OVS opens it, so it is accepted there)
            stream.append(ofp.bundle_add(2, inner, i))
        else:
            stream.append(ofp.bundle_add(1, inner, i))
            if kind == "add":
                k, v = split(inner)
                want[k] = v
            else:
                want.pop(split(inner)[0], None)
    stream.append(ofp.bundle_control(1, ofp.OFPBCT_COMMIT_REQUEST, 999))
    data, answers, at = b"".join(stream), [], 0
    for cut in [*cuts, len(stream) * 1000]:
        answers += peer.ask(data[at : at + cut])
        at += cut
    assert [xid for xid, _, _ in _errors(answers)] == refused
    assert answers[-1][:2] == (ofp.OFPT_BUNDLE_CONTROL, 999)
    assert bridge.flows == want


def test_flow_mods_as_openflow_15_on_ovs() -> None:
    bridge = Bridge(1)
    peer = _peer(bridge)
    changed = Flow(FLOW.table, FLOW.priority, FLOW.match, "drop", cookie(9))
    missing = Flow(9, 1, "metadata=0x9", "drop", cookie(3))
    peer.ask(*_bundle(1, [("add", FLOW), ("add", OTHER), ("modify", changed),
                          ("modify", missing), ("delete", missing)]))  # fmt: skip
    # a modify keeps the cookie and takes the actions; of a missing flow: nothing (no add)
    assert table_digest(bridge.flows.items()) == expected_digest(
        [Flow(FLOW.table, FLOW.priority, FLOW.match, "drop", FLOW.cookie), OTHER]
    )
    peer.ask(encode(("delete", OTHER)))  # alone, not in a bundle
    assert len(bridge.flows) == 1
    # a strict delete with a cookie mask that does not match leaves the flow
    masked = bytearray(encode(("delete", FLOW)))
    masked[8:24] = struct.pack("!QQ", cookie(5), (1 << 64) - 1)
    peer.ask(bytes(masked))
    assert len(bridge.flows) == 1
    # a loose delete of everything (ovs-ofctl del-flows): the stand-in takes it
    everything = bytearray(encode(("delete", FLOW)))
    everything[24:26] = bytes([ofp.OFPTT_ALL, ofp.OFPFC_DELETE])
    everything = everything[:48] + b"\x00\x01\x00\x04\x00\x00\x00\x00"
    everything[2:4] = struct.pack("!H", len(everything))
    peer.ask(bytes(everything))
    assert bridge.flows == {}
    # a loose one with a match: the stand-in does not parse matches; refused, not faked
    loose = bytearray(encode(("delete", FLOW)))
    loose[25] = ofp.OFPFC_DELETE
    assert _errors(peer.ask(bytes(loose))) == [(0, ofp.OFPET_FLOW_MOD_FAILED,
                                                ofp.OFPFMFC_BAD_COMMAND)]  # fmt: skip
    assert bridge.counters.flow_mods == 8


def test_roles_fence_a_deposed_master() -> None:
    bridge = Bridge(1)
    old, new = _peer(bridge), _peer(bridge)
    (kind, _, body), = old.ask(ofp.role_request(ofp.OFPCR_ROLE_MASTER, 5, 1))  # fmt: skip
    assert (kind, *struct.unpack_from("!I4xQ", body)) == (ofp.OFPT_ROLE_REPLY, 2, 5)
    new.ask(ofp.role_request(ofp.OFPCR_ROLE_MASTER, 6, 1))
    # the old master was told it is a slave now, and its writes are refused
    (kind, xid, body), = old.messages()  # fmt: skip
    assert (kind, xid, struct.unpack_from("!I", body)[0]) == (ofp.OFPT_ROLE_STATUS, 0, 3)
    assert _errors(old.ask(*_bundle(1, [("add", FLOW)]))) == [
        (xid, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE) for xid in (100, 101, 199)
    ]
    assert _errors(old.ask(ofp.tlv_table_mod(ofp.NXTTMC_ADD, [(0x102, 0x80, 4, 0)], 2))) == [
        (2, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE)]  # fmt: skip
    # and its claim with its old generation is stale
    assert _errors(old.ask(ofp.role_request(ofp.OFPCR_ROLE_MASTER, 5, 3))) == [
        (3, ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE)]  # fmt: skip
    assert bridge.flows == {}
    # reading is allowed
    (kind, _, body), = old.ask(ofp.flow_stats_request(ofp.OFPMP_AGGREGATE_STATS, 4))  # fmt: skip
    assert ofp.parse_oxs_flow_count(body[8:]) == 0


def test_the_tlv_table_as_ovs_keeps_it() -> None:
    bridge = Bridge(1)
    peer = _peer(bridge)
    geneve = (0x102, 0x80, 4, 0)
    assert peer.ask(ofp.tlv_table_mod(ofp.NXTTMC_ADD, [geneve], 1)) == []
    for xid, entry, code in ((2, geneve, ofp.NXTTMFC_ALREADY_MAPPED),
                             (3, (0x102, 0x81, 4, 0), ofp.NXTTMFC_ALREADY_MAPPED),
                             (4, (0x102, 0x80, 4, 1), ofp.NXTTMFC_DUP_ENTRY)):  # fmt: skip
        assert _errors(peer.ask(ofp.tlv_table_mod(ofp.NXTTMC_ADD, [entry], xid))) == [
            (xid, ofp.OFPET_EXPERIMENTER, code)]  # fmt: skip
    (kind, _, body), = peer.ask(ofp.tlv_table_request(5))  # fmt: skip
    assert kind == ofp.OFPT_EXPERIMENTER
    assert ofp.parse_tlv_maps(body, 24) == [geneve]


def test_flow_statistics_give_back_the_flows_kept() -> None:
    bridge = Bridge(1)
    peer = _peer(bridge)
    many = [Flow(5, 10, f"metadata={i:#x},ip", "resubmit(,6)", cookie(i)) for i in range(800)]
    peer.ask(*_bundle(1, [("add", flow) for flow in many]))
    ((_, _, body),) = peer.ask(ofp.flow_stats_request(ofp.OFPMP_AGGREGATE_STATS, 2, table=5))
    assert ofp.parse_oxs_flow_count(body[8:]) == 800
    parts = peer.ask(ofp.flow_stats_request(ofp.OFPMP_FLOW_DESC, 3))
    assert len(parts) > 1  # (more than one message's worth)
    assert all(struct.unpack_from("!H", b, 2)[0] == ofp.OFPMPF_REPLY_MORE for _, _, b in parts[:-1])
    entries = []
    for _, _, body in parts:
        at = 8
        while at < len(body):
            length, table = struct.unpack_from("!H2xB", body, at)
            priority, cookie_value = struct.unpack_from("!H8xQ", body, at + 6)
            match_length = struct.unpack_from("!H", body, at + 26)[0]
            match_end = at + 24 + (match_length + 7) // 8 * 8
            stats_length = (struct.unpack_from("!H", body, match_end + 2)[0] + 7) // 8 * 8
            key = bytes([table]) + struct.pack("!H", priority) + body[at + 24 : match_end]
            value = struct.pack("!Q", cookie_value) + body[match_end + stats_length : at + length]
            entries.append((key, value))
            at += length
    assert table_digest(entries) == expected_digest(many)


# ---- a fleet process, with the real clients ----


@pytest.fixture
def manager() -> Iterator[Manager]:
    listener = Manager("ptcp:0:127.0.0.1", lambda: None).start()
    yield listener
    listener.close()


def _sessions(manager: Manager, count: int) -> list[NodeSession]:
    sessions: list[NodeSession] = []

    def accepted() -> bool:
        sessions.extend(manager.accept())
        return len(sessions) >= count

    wait_for(accepted, 10, f"{count} node connections")
    for session in sessions:
        session.start()
    return sessions


def _polled(session: NodeSession, predicate: Callable[[], Any]) -> Callable[[], Any]:
    return lambda: session.poll() is not None and predicate()


@pytest.mark.ovs
def test_a_node_session_configures_a_standin(tmp_path: Path, manager: Manager) -> None:
    """What test_manager checks on a real node, on a stand-in: it dials in, says who it is
    and where its OpenFlow is, takes br-int and a tunnel port with BFD (ofports and a BFD
    verdict come back), its VIFs come and go, and it dials again when dropped."""
    vif = VifSpec("vm1", "vif-1", "50:54:00:00:00:01")
    nodes = [NodeSpec("hv1", "172.31.0.2", (vif,)), NodeSpec("hv2", "172.31.0.3")]
    with Fleet(tmp_path / "fleet", nodes, [manager.target]) as fleet:
        sessions = {s.system_id: s for s in _sessions(manager, 2)}
        session = sessions["hv1"]
        assert session.openflow_remote == fleet.openflow("hv1")
        assert session.bridge_created()  # the hypervisor made br-int for its VIF
        assert session.vifs()["vif-1"].ofport == 1
        assert sessions["hv2"].bridge() is None  # no VIF: br-int is the controller's to make
        spec = TunnelSpec("hv2", "geneve", "172.31.0.3", bfd=True)
        assert session.configure([spec])
        wait_for(_polled(session, lambda: session.tunnels().get(spec.port_name, ("", None))[1]),
                 10, "the tunnel's ofport")  # fmt: skip
        assert session.tunnels()[spec.port_name] == ("hv2", 2, "")
        assert session.bfd() == {"hv2": True}
        assert not session.configure([spec])  # nothing to change
        bridge = session.bridge()
        assert bridge is not None
        assert sorted(bridge[1]["protocols"][1]) == ["OpenFlow13", "OpenFlow15"]
        assert fleet.add_vif("hv1", "vm2", "vif-2", "50:54:00:00:00:02") == 3
        wait_for(_polled(session, lambda: "vif-2" in session.vifs()), 10, "the new VIF")
        assert fleet.remove_vif("hv1", "vm2")
        assert not fleet.remove_vif("hv1", "vm2")
        wait_for(_polled(session, lambda: "vif-2" not in session.vifs()), 10, "the VIF gone")
        assert session.configure([])
        wait_for(_polled(session, lambda: not session.tunnels()), 10, "the tunnel port gone")
        rows = fleet.rows("hv1", "Port")
        assert sorted(row["name"] for row in rows.values()) == ["br-int", "vm1"]
        # dropped: the node dials again, a new session reads the same database
        session.close()
        again = _sessions(manager, 1)[0]
        assert again.system_id == "hv1"
        assert again.vifs()["vif-1"].ofport == 1
        stats = fleet.stats("hv1")
        assert stats["connects"] == 2
        assert stats["transactions"] == 2
        assert stats["failed"] == 0
        for other in (again, sessions["hv2"]):
            other.close()


@pytest.mark.ovs
def test_fencing_on_a_standin(tmp_path: Path, manager: Manager) -> None:
    """test_manager's fencing and test_openflow's, on a stand-in: a newer master's claim
    fences the old one's OVSDB writes and its OpenFlow."""
    second = Manager("ptcp:0:127.0.0.1", lambda: None).start()
    try:
        with Fleet(tmp_path / "fleet", [NodeSpec("hv1", "172.31.0.2")],
                   [manager.target, second.target]) as fleet:  # fmt: skip
            a, b = _sessions(manager, 1)[0], _sessions(second, 1)[0]
            a.claim(5)
            assert a.configure([])
            wait_for(_polled(b, lambda: b.bridge() is not None), 10, "br-int")
            wait_for(_polled(a, lambda: a.bridge_created()), 10, "br-int")
            b.claim(7)
            wait_for(_polled(a, lambda: a.external_ids.get("loom-fence") == "7"), 10,
                     "the new token seen by the old master")  # fmt: skip
            spec = TunnelSpec("hv2", "geneve", "172.31.0.9")
            with pytest.raises(TransactError):
                a.configure([spec])
            with pytest.raises(TransactError):
                a.save_zones({"lp1": 3}, [])()
            with pytest.raises(Fenced):
                a.claim(5)
            assert b.configure([spec])
            b.save_zones({"lp1": 3}, [])()
            old, new = Switch(fleet.openflow("hv1")), Switch(fleet.openflow("hv1"))
            try:
                old.channel.claim(5)
                new.channel.claim(7)
                new.ensure_tlv_map()
                new.apply([("add", FLOW)])
                with pytest.raises(OpenFlowError, match="bad request"):
                    old.apply([("add", OTHER)])
                with pytest.raises(Deposed):
                    old.channel.claim(5)
                with pytest.raises(OpenFlowError, match="bad request"):
                    old.replace([OTHER])  # (it would find a flow, and push a difference)
            finally:
                old.close()
                new.close()
            assert fleet.digest("hv1") == expected_digest([FLOW])
            assert fleet.stats("hv1")["failed"] == 2
            a.close()
            b.close()
    finally:
        second.close()


def _flows_dumped(node_ofctl: Callable[..., str]) -> list[str]:
    return sorted(line.strip() for line in node_ofctl("dump-flows", "--no-stats").splitlines()
                  if "actions=" in line)  # fmt: skip


@pytest.mark.ovs
def test_pushes_and_ovs_ofctl_as_on_a_real_switch(tmp_path: Path) -> None:
    """The same pushes to a real vswitchd and to a stand-in: `ovs-ofctl dump-flows` prints
    the same table from both, and `Switch.replace` (a diff by `ovs-ofctl` on a non-empty
    table) finds the same difference."""
    corpus = CORPUS.read_text().splitlines()
    flows = []
    for line in corpus:
        head, _, actions = line.partition(" actions=")
        fields = head.split(",")
        values = dict(f.split("=", 1) for f in fields[:3])
        flows.append(Flow(int(values["table"]), int(values["priority"]), ",".join(fields[3:]),
                          actions, int(values["cookie"], 0)))  # fmt: skip
    nodes = [NodeSpec("hv1", "172.31.0.2", (VifSpec("vm", "v", "50:54:00:00:00:01"),))]
    with Sandbox(tmp_path / "real") as sandbox, Fleet(tmp_path / "fleet", nodes) as fleet:
        node = sandbox.add_node("hv1")
        node.add_vif("vm", "v", "50:54:00:00:00:01")
        real, standin = Switch(node.openflow), Switch(fleet.openflow("hv1"))
        try:
            for switch in (real, standin):
                switch.ensure_tlv_map()
                assert switch.replace(flows[:-3]) == [("add", f) for f in flows[:-3]]
                assert switch.flow_count() == len(flows) - 3
            assert fleet.digest("hv1") == expected_digest(flows[:-3])

            def standin_ofctl(*args: str) -> str:
                command, *rest = args
                return subprocess.run([tool("ovs-ofctl"), "-O", "OpenFlow15", command,
                                       fleet.openflow("hv1"), *rest], capture_output=True,
                                      text=True, check=True).stdout  # fmt: skip

            assert _flows_dumped(standin_ofctl) == _flows_dumped(node.ofctl)
            # another table: one flow gone, one with other actions, three new
            changed = Flow(flows[5].table, flows[5].priority, flows[5].match, "drop",
                           flows[5].cookie)  # fmt: skip
            new = [Flow(7, 5, f"reg0={i}", "drop", cookie(i)) for i in range(3)]
            wanted = [*flows[1:5], changed, *flows[6:-3], *new]
            diffs = [sorted(switch.replace(wanted)) for switch in (real, standin)]
            assert diffs[0] == diffs[1]
            assert [(op, f.table, f.priority) for op, f in diffs[0]] == sorted(
                [("add", 7, 5)] * 3 + [("delete", flows[0].table, flows[0].priority),
                                       ("modify", changed.table, changed.priority)])  # fmt: skip
            assert standin.fallbacks == 0
            assert _flows_dumped(standin_ofctl) == _flows_dumped(node.ofctl)
            # (the difference, printed by OVS and encoded again, is the same bytes)
            assert fleet.digest("hv1") == expected_digest(wanted)
            assert standin.replace(wanted) == []
        finally:
            real.close()
            standin.close()
        stats = fleet.stats("hv1")
        assert stats["unknown"] == 0
        assert stats["bundles"] == 2
        # each commit is logged with its time and size: what times a change from outside
        commits = fleet.commits(0.0)["hv1"]
        assert [n for _, n in commits] == [len(flows) - 3, 5]
        assert commits[0][0] <= commits[1][0]
        assert fleet.commits(commits[1][0] + 1) == {}
        # or only those of the nodes named (a benchmark waiting on one node)
        assert fleet.commits(0.0, ["hv1"]) == {"hv1": commits}
        assert fleet.commits(0.0, []) == {}
        with pytest.raises(StandinError, match="no node"):
            fleet.commits(0.0, ["hv-none"])


def test_a_flow_is_kept_as_the_bytes_of_its_flow_mod() -> None:
    key, value = split(encode(("add", FLOW)))
    assert key[:3] == bytes([0]) + struct.pack("!H", 100)
    assert value[:8] == struct.pack("!Q", FLOW.cookie)
    with pytest.raises(ValueError, match="56 bytes"):
        split(b"\x06" * 20)


def test_a_silent_manager_connection_is_probed_and_dialled_again(tmp_path: Path) -> None:
    """As ovsdb-server with `inactivity_probe`: an echo after a silence, the connection
    dropped after another, and the manager dialled anew (a connection a full accept queue
    dropped while the node took it as established would otherwise stay dead)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(10)
    target = f"tcp:127.0.0.1:{listener.getsockname()[1]}"
    try:
        with Fleet(tmp_path / "fleet", [NodeSpec("hv1", "172.31.0.2")], [target], probe=0.3):
            first, _ = listener.accept()
            with first:
                first.settimeout(10)
                probe = json.loads(first.recv(4096))
                assert probe == {"id": "echo", "method": "echo", "params": []}
                assert first.recv(4096) == b""  # no answer: it hung up
            second, _ = listener.accept()  # and dialled again
            second.close()
    finally:
        listener.close()


def test_nodes_can_be_brought_up_at_a_rate(tmp_path: Path) -> None:
    at_once = FleetServer(tmp_path, SCHEMA, [])
    paced = FleetServer(tmp_path, SCHEMA, [], dial_rate=4.0)
    assert [at_once._dial_delay(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert [paced._dial_delay(i) for i in range(3)] == [0.0, 0.25, 0.5]


def test_json_rpc_messages_are_cut_out_of_the_stream() -> None:
    from loom_lab.standin.fleet import _JsonFramer

    framer = _JsonFramer()
    one = json.dumps({"id": 1, "method": "transact", "params": ["x", {"a": "{{{"}]}).encode()
    two = json.dumps({"id": 2, "method": "echo", "params": []}).encode()
    stream = one + two + one
    got: list[Any] = []
    for at in range(0, len(stream), 7):  # in small pieces, cut anywhere
        got += framer.feed(stream[at : at + 7])
    assert [m["id"] for m in got] == [1, 2, 1]
    assert got[0]["params"][1] == {"a": "{{{"}  # (braces inside a string)
    assert framer.feed(two + two) == [json.loads(two)] * 2


def test_await_commit_answers_when_the_node_commits(tmp_path: Path) -> None:
    """`await_commit` answers a commit already made at once, a later one when the node
    makes it (not before), none after its timeout; an unknown node is an error."""
    from loom_common.ovsdb import readable

    nodes = [NodeSpec("hv1", "172.31.0.2", ())]
    with Fleet(tmp_path / "fleet", nodes) as fleet:
        switch = Switch(fleet.openflow("hv1"))
        try:
            switch.ensure_tlv_map()
            switch.apply([("add", FLOW)])
            ((first, mods),) = fleet.commits(0.0)["hv1"]
            with fleet.await_commit("hv1", 0.0, 60.0) as past:
                assert past.result() == [(first, mods)]
            # (the next instant after the first commit: the second can come within a
            # millisecond of it, sooner than any fixed margin)
            with fleet.await_commit("hv1", math.nextafter(first, math.inf), 60.0) as later:
                # not answered while the node commits nothing (the fleet answers pings)
                assert fleet.request({"ping": True})["ok"]
                assert readable([later.fileno()], 0.0) == set()
                switch.apply([("add", OTHER)])
                got = later.result()
            assert [n for _, n in got] == [1]
            assert got[0][0] > first
            with fleet.await_commit("hv1", got[0][0] + 1.0, 0.05) as none:
                assert none.result() == []
        finally:
            switch.close()
        with pytest.raises(StandinError, match="no node"), fleet.await_commit("hv-x", 0, 1) as bad:
            bad.result()
