"""The physical controller's universal replica on a real ovsdb-server: rows rebuilt from
`update2` diffs equal what a `select` reads, and a transaction arrives whole."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loom_common.ovsdb import OvsdbServer, RawConnection
from loom_common.testing import wait_for
from loom_physical import universal
from loom_physical.universal import (
    DB,
    DEFLATED_FROM,
    TABLES,
    UniversalReplica,
    pack,
    unpack,
)

WAIT = 10.0


def _normal(value: Any) -> Any:
    """A column value with its set's or map's elements in one order."""
    if isinstance(value, list) and value and value[0] in ("set", "map"):
        items = [_normal(v) for v in value[1]]
        if value[0] == "set" and len(items) == 1:
            return items[0]  # a one-element set is its atom
        return [value[0], sorted(items, key=repr)]
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _selected(conn: RawConnection, table: str) -> dict[str, dict[str, Any]]:
    columns = TABLES[table]
    op = {"op": "select", "table": table, "where": [], "columns": ["_uuid", *columns]}
    rows = conn.transact(DB, [op])[0]["rows"]
    return {r["_uuid"][1]: {c: _normal(r[c]) for c in columns} for r in rows}


def _replica(replica: UniversalReplica, table: str) -> dict[str, dict[str, Any]]:
    return {
        uuid: {c: _normal(v) for c, v in row.items()} for uuid, row in replica.rows[table].items()
    }


def _agree(replica: UniversalReplica, conn: RawConnection) -> None:
    def same() -> bool:
        replica.poll()
        return all(_replica(replica, t) == _selected(conn, t) for t in TABLES)

    wait_for(same, WAIT, "the replica's rows equal a select's")


def _binding(port: str, dp: int, **columns: Any) -> dict[str, Any]:
    return {"op": "insert", "table": "Port_Binding", "uuid-name": "b",
            "row": {"logical_port": port, "datapath": dp, "port_key": 1, "type": "vif",
                    "name": port, **columns}}  # fmt: skip


def _update(table: str, where: list[Any], row: dict[str, Any]) -> dict[str, Any]:
    return {"op": "update", "table": table, "where": where, "row": row}


@pytest.mark.ovs
def test_rows_from_update2_diffs_equal_a_select(universal_db: OvsdbServer) -> None:
    conn = RawConnection(universal_db.unix_remote, db=DB)
    replica = UniversalReplica(universal_db.unix_remote)
    try:
        conn.transact(DB, [_binding("p1", 5, chassis="hv1", qos=["map", [["max_rate", 1000]]])])
        started = replica.start([5])  # the rows there come as the start's changes
        assert [(t, row["logical_port"]) for t, _, row in started if t == "Port_Binding"] == [
            ("Port_Binding", "p1")
        ]
        _agree(replica, conn)
        p1 = [["logical_port", "==", "p1"]]
        steps = [
            # optional column set, changed, cleared; map pair added, changed, removed
            _update("Port_Binding", p1, {"chassis": "hv2", "up": True}),
            _update("Port_Binding", p1, {"qos": ["map", [["max_rate", 2000], ["dscp", 10]]]}),
            _update("Port_Binding", p1, {"qos": ["map", [["dscp", 10]]], "vlan": 7}),
            _update("Port_Binding", p1, {"chassis": ["set", []], "vlan": ["set", []]}),
            {"op": "insert", "table": "Gateway_Assignment",
             "row": {"service": "g", "kind": "l3", "nodes": ["map", [[1, "gw1"], [2, "gw2"]]]}},
            _update("Gateway_Assignment", [["service", "==", "g"]],
                    {"nodes": ["map", [[2, "gw3"]]], "uplink_mac": "0a:00:00:00:00:01"}),
            {"op": "delete", "table": "Port_Binding", "where": p1},
        ]  # fmt: skip
        for op in steps:
            conn.transact(DB, [op])
            _agree(replica, conn)
    finally:
        replica.close()
        conn.close()


@pytest.mark.ovs
def test_a_transaction_of_flows_and_a_binding_is_polled_whole(universal_db: OvsdbServer) -> None:
    """A binding and its datapath's flows written together are seen together, however
    eagerly the replica polls: one monitor, so never the flows in one poll and the binding
    in the next (with a monitor for each, 500 transactions showed the split in 2 runs of
    5, 100 in 1 of 3)."""
    conn = RawConnection(universal_db.unix_remote, db=DB)
    replica = UniversalReplica(universal_db.unix_remote)
    try:
        replica.start([9])
        for i in range(500):
            flow = {
                "op": "insert",
                "table": "Universal_Flow",
                "row": {"datapath": 9, "source": f"p{i}", "flows": f"f{i}", "cookie": i},
            }
            sent = conn.send_transact(DB, [flow, _binding(f"p{i}", 9)])  # fmt: skip
            deadline = time.monotonic() + WAIT
            while not (seen := replica.poll()) and time.monotonic() < deadline:
                pass  # poll as often as possible: any gap between two messages shows
            assert sorted(table for table, _, _ in seen) == ["Flow", "Port_Binding"], (i, seen)
            conn.finish_transact(sent)
    finally:
        replica.close()
        conn.close()


@given(st.sets(st.text(alphabet="ab\t\n=,", max_size=6), max_size=6))
def test_packed_texts_unpack_to_the_same_set(texts: set[str]) -> None:
    """`pack` keeps a row's flow texts as one object; any set comes back whole (texts with
    newlines of their own, an empty text), and equal sets pack equal."""
    packed = pack(texts)
    assert sorted(unpack(packed)) == sorted(texts)
    assert packed == pack(sorted(texts, reverse=True))
    if texts and not any("\n" in t for t in texts):
        assert isinstance(packed, str)  # (the one-object form whenever it can be)


@given(st.sets(st.text(alphabet="ab\t\n=,${}", max_size=80), max_size=40))
def test_deflated_texts_unpack_to_the_same_set(texts: set[str]) -> None:
    """`pack(deflate=True)` (a port's local flows): a long text naming no identifier is kept
    compressed, smaller; any set comes back whole."""
    packed = pack(texts, deflate=True)
    assert sorted(unpack(packed)) == sorted(texts)
    joined = "\n".join(sorted(texts))
    one_text = bool(texts) and not any("\n" in t for t in texts)
    deflated = one_text and len(joined) >= DEFLATED_FROM and "${" not in joined
    assert isinstance(packed, bytes) == deflated
    if deflated:
        assert packed != joined.encode()
    flows = "\n".join(
        f"table=40,priority=90,reg14={key:#x},metadata=0x1 actions=resubmit(,41)"
        for key in range(40)
    )
    assert len(pack(flows.split("\n"), deflate=True)) < len(flows) / 4


@pytest.mark.ovs
def test_flow_rows_are_kept_packed_through_their_diffs(universal_db: OvsdbServer) -> None:
    """A `Universal_Flow` row's sets rebuilt from `update2` diffs (texts added, removed,
    a text with a newline of its own) are, unpacked, what a `select` reads."""
    conn = RawConnection(universal_db.unix_remote, db=DB)
    replica = UniversalReplica(universal_db.unix_remote)

    def same(flows: set[str], local: set[str]) -> bool:
        replica.poll()
        rows = list(replica.rows["Flow"].values())
        return len(rows) == 1 and (
            set(unpack(rows[0]["flows"])),
            set(unpack(rows[0]["local_flows"])),
        ) == (flows, local)

    try:
        replica.start([4])
        flow = {"op": "insert", "table": "Universal_Flow",
                "row": {"datapath": 4, "source": "p", "cookie": 1,
                        "flows": ["set", ["f1", "f2", "f3"]], "local_flows": "l1"}}  # fmt: skip

        def update(**row: Any) -> dict[str, Any]:
            return _update("Universal_Flow", [["source", "==", "p"]], row)

        steps: list[tuple[dict[str, Any], set[str], set[str]]] = [
            (flow, {"f1", "f2", "f3"}, {"l1"}),
            (update(flows=["set", ["f2", "f4"]]), {"f2", "f4"}, {"l1"}),
            (update(flows=["set", ["f2", "a\nb"]], local_flows=["set", []]), {"f2", "a\nb"}, set()),
            (update(flows=["set", ["a\nb", "c"]]), {"a\nb", "c"}, set()),
        ]
        for op, flows, local in steps:
            conn.transact(DB, [op])
            wait_for(lambda f=flows, lf=local: same(f, lf), WAIT, f"the row to hold {flows}")
    finally:
        replica.close()
        conn.close()


@given(st.sets(st.integers(0, 60)), st.sets(st.integers(0, 60)), st.integers(1, 7))
def test_condition_steps_reach_the_wanted_datapaths(
    before: set[int], wanted: set[int], step: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(universal, "CONDITION_STEP", step)
        steps = universal.condition_steps(frozenset(before), frozenset(wanted))
    assert steps[-1] == wanted
    held = before
    for condition in steps:
        assert condition <= wanted, "a datapath no longer wanted is dropped at once"
        assert held & wanted <= condition, "nothing kept is dropped on the way"
        assert len(condition - held) <= step, "at most a step's datapaths added at once"
        held = condition


@pytest.mark.ovs
def test_a_condition_widened_in_steps_reads_every_datapath(
    universal_db: OvsdbServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six datapaths asked for at once, two per `monitor_cond_change`: every row of the
    six is read, none of the others; then dropping four leaves the two kept."""
    monkeypatch.setattr(universal, "CONDITION_STEP", 2)
    conn = RawConnection(universal_db.unix_remote, db=DB)
    replica = UniversalReplica(universal_db.unix_remote)

    def flow(dp: int) -> dict[str, Any]:
        row = {"datapath": dp, "source": f"s{dp}", "cookie": dp, "flows": f"f{dp}"}
        return {"op": "insert", "table": "Universal_Flow", "row": row}

    def read() -> set[int]:
        replica.poll()
        return {int(row["datapath"]) for row in replica.rows["Flow"].values()}

    try:
        conn.transact(DB, [flow(dp) for dp in range(10, 18)])
        replica.start([])
        replica.set_datapaths(range(10, 16))
        wait_for(lambda: read() == set(range(10, 16)), WAIT, "the six datapaths' rows")
        replica.set_datapaths([10, 15])
        wait_for(lambda: read() == {10, 15}, WAIT, "the two kept datapaths' rows")
    finally:
        replica.close()
        conn.close()
