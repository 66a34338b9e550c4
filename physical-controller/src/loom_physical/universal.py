"""What a physical controller reads of the universal-flow database, on one connection.

One `monitor_cond`: the small tables (`Datapath`, `Port_Binding`, `Tunnel`, ...) whole,
`Universal_Flow` only for the datapaths this controller's nodes need (not the whole table:
at the NVP workload's full scale it is 226,000 rows of 3.2M flows, and a hypervisor needs
the few datapaths its VIFs are on). The condition follows the needed datapaths
(`set_datapaths`, `monitor_cond_change`).

One monitor, not one per kind of table: ovsdb-server sends one notification per monitor
for a transaction, so with two a pass could read the flows of a port's deletion and not
yet its binding's (seen: a port deletion now and then took two passes to reach its node).
With one, a pass sees each transaction whole. And updates keep the order the database
committed them in: when `Universal_Global.generation` says G, every row written for G has
been seen, so what the controller pushed after reading it realizes G.

The replica is the common `loom_common.ovsdb.Replica` with that condition
(`monitor_cond`: rows kept as the `monitor` method gives them, rebuilt from `update2`'s
diffs); `Universal_Flow` rows are kept as "Flow", their `flows` and `local_flows` packed
(`pack`: one string a row, not a set of strings; `local_flows` deflated).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import Any

from loom_common.ovsdb import ops
from loom_common.ovsdb.client import RawConnection
from loom_common.ovsdb.codec import elements
from loom_common.ovsdb.replica import Change, Replica
from loom_physical.flowtexts import DEFLATED_FROM, DEFLATER, Deflater, FlowTexts, pack, unpack

__all__ = [
    "CONDITION_STEP", "DB", "DEFLATED_FROM", "DEFLATER", "FLOWS", "FLOW_COLUMNS", "FLOW_SETS",
    "MONITOR_ID", "TABLES", "Deflater", "FlowTexts", "UniversalReplica", "condition_steps",
    "pack", "read_flows", "unpack",
]  # fmt: skip
"""(`pack`, `unpack`, `FlowTexts`, `Deflater`: `loom_physical.flowtexts`')"""

DB = "Loom_Universal"
TABLES: dict[str, list[str]] = {
    "Datapath": ["key", "kind", "config_id", "encap"],
    "Port_Binding": ["logical_port", "datapath", "port_key", "type", "vif_id", "peer",
                     "chassis", "up", "gateway_service", "vlan", "qos"],
    "Tunnel": ["from_node", "to_node", "encap", "remote_ip", "bfd"],
    "Gateway_Assignment": ["service", "kind", "nodes", "uplink_next_hop", "uplink_mac",
                           "uplink_ip"],
    "Replication_Set": ["datapath", "mode", "service_nodes"],
    "Universal_Global": ["generation", "realized_generation"],
    "Node_Endpoint": ["node", "encap", "ip"],
}  # fmt: skip
FLOW_COLUMNS = ["datapath", "source", "flows", "local_flows", "cookie"]
FLOW_SETS = ("flows", "local_flows")
"""The set columns of `Universal_Flow` rows, kept packed (`pack`)."""
MONITOR_ID = "loom-physical"
FLOWS = "Flow"
"""The name the replica keeps and reports `Universal_Flow` rows under."""


def _where(datapaths: Iterable[int]) -> list[Any]:
    """A monitor condition (clauses are OR'ed) for rows of `datapaths`."""
    clauses: list[Any] = [["datapath", "==", dp] for dp in sorted(datapaths)]
    return clauses or [False]


CONDITION_STEP = 500
"""Datapaths added to the monitor's condition per `monitor_cond_change`. ovsdb-server makes
a change's update whole before sending it (its JSON tree, then its text): a cold start's
one change to all 7,000 datapaths was 1.8M flows at once for each controller, the
universal DB's peak memory. At most two steps are in flight (`RawConnection.call_each`): the
server makes one while this side reads the other."""


def condition_steps(before: AbstractSet[int], wanted: AbstractSet[int]) -> list[frozenset[int]]:
    """The conditions that take a monitor from datapaths `before` to `wanted`: the ones left
    dropped at the first, at most `CONDITION_STEP` new ones added at each."""
    kept, adding = before & wanted, sorted(wanted - before)
    return [
        frozenset(kept | set(adding[:end]))
        for end in range(CONDITION_STEP, len(adding), CONDITION_STEP)
    ] + [frozenset(wanted)]


FLOW_DEFAULTS: dict[str, Any] = {"datapath": 0, "source": "", "cookie": 0}
"""`update2` leaves out the columns of a new row that have their default value."""


def _flow_row(columns: dict[str, Any]) -> dict[str, Any]:
    row = {**FLOW_DEFAULTS, **columns}
    for column in FLOW_SETS:
        row[column] = _pack_column(column, _flows(columns.get(column)))
    return row


def _pack_column(column: str, texts: Iterable[str]) -> FlowTexts:
    """`pack` for `Universal_Flow` column `column`: a port's own flows deflated."""
    return pack(texts, deflate=column == "local_flows")


def _flows(value: Any) -> set[str]:
    """A `flows` column's texts (none: the column left out)."""
    return set(elements(value)) if value is not None else set()


def read_flows(remote: str, datapaths: Iterable[int],
               timeout: float = 30.0) -> dict[str, dict[str, Any]]:  # fmt: skip
    """The `Universal_Flow` rows of `datapaths` as `UniversalReplica` keeps them (uuid ->
    row), read once, in one transaction, on a connection of their own: what a trace needs
    of datapaths the replica does not follow (no node here has them).

    Raises:
        OSError, OvsdbError: the database could not be read.
    """
    selects = [
        ops.select("Universal_Flow", ops.where_eq("datapath", dp), ["_uuid", *FLOW_COLUMNS])
        for dp in sorted(set(datapaths))
    ]
    if not selects:
        return {}
    conn = RawConnection(remote, timeout=timeout, db=DB)
    try:
        results = conn.transact(DB, selects)
    finally:
        conn.close()
    rows: dict[str, dict[str, Any]] = {}
    for result in results:
        for row in result["rows"]:
            uuid = row.pop("_uuid")[1]
            rows[uuid] = _flow_row(row)
    return rows


class UniversalReplica(Replica):
    """The universal DB as a physical controller needs it (see the module docstring):
    `datapaths` are those whose `Universal_Flow` rows it follows."""

    def __init__(self, remote: str, wake: Callable[[], None] | None = None) -> None:
        super().__init__(
            remote,
            DB,
            {**TABLES, "Universal_Flow": FLOW_COLUMNS},
            wake=wake,
            conditions={"Universal_Flow": _where(())},
            monitor_id=MONITOR_ID,
            names={"Universal_Flow": FLOWS},
        )
        self.datapaths: frozenset[int] = frozenset()

    def start(self, datapaths: Iterable[int] | None = None) -> list[Change]:
        """(Re)connect and read the flows of `datapaths` (default: those followed now);
        return every difference from what was held.

        On an error (raised) the replica is left closed (`conn` None) with the rows it
        held, so a later `start()` reports what changed meanwhile.
        """
        if datapaths is not None:
            self.datapaths = frozenset(datapaths)
        assert self.conditions is not None
        self.conditions["Universal_Flow"] = _where(self.datapaths)
        return super().start()

    def set_datapaths(self, datapaths: Iterable[int]) -> None:
        """Follow the rows of `datapaths` from now on (rows that enter or leave the
        condition arrive as updates, for `poll`), in steps (`condition_steps`).

        Raises:
            OSError, OvsdbError: the connection failed (`start()` reconnects and asks for
                `datapaths`).
        """
        wanted = frozenset(datapaths)
        if wanted == self.datapaths:
            return
        before, self.datapaths = self.datapaths, wanted  # (closed or failing: `start()` asks)
        self.change_conditions(
            {"Universal_Flow": _where(condition)} for condition in condition_steps(before, wanted)
        )

    def _update2(self, table: str, uuid: str, update: dict[str, Any]) -> dict[str, Any] | None:
        """`Replica._update2`, a `Universal_Flow` row kept with `flows` packed."""
        if table != "Universal_Flow":
            return super()._update2(table, uuid, update)
        rows = self.rows[FLOWS]
        if "delete" in update:
            rows.pop(uuid, None)
            return None
        if "modify" not in update:  # initial or insert: the whole row
            row = _flow_row(update.get("insert") or update.get("initial") or {})
            rows[uuid] = row
            return row
        row = dict(rows.get(uuid, {}))
        for column, value in update["modify"].items():
            if column in FLOW_SETS:  # a set's diff: the elements added or removed
                row[column] = _pack_column(column, set(unpack(row.get(column, ()))) ^ _flows(value))
            else:
                row[column] = value
        rows[uuid] = row
        return row
