"""What a physical controller reads of the universal-flow database, on one connection.

The small tables (`Datapath`, `Port_Binding`, `Tunnel`, `Universal_Global`) by `monitor`;
`Universal_Flow` by `monitor_cond` on the datapaths this controller's nodes need (not the
whole table: at the NVP workload's full scale it is 226,000 rows of 3.2M flows, and a
hypervisor needs the few datapaths its VIFs are on). The condition follows the needed
datapaths (`set_datapaths`, `monitor_cond_change`).

One connection keeps updates in the order the database committed them: when
`Universal_Global.generation` says G, every row written for G has been seen, so what the
controller pushed after reading it realizes G.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from loom_common.ovsdb import KEEPALIVE_IDLE, RawConnection

DB = "Loom_Universal"
TABLES: dict[str, list[str]] = {
    "Datapath": ["key", "kind", "config_id"],
    "Port_Binding": ["logical_port", "datapath", "port_key", "type", "vif_id", "peer",
                     "chassis", "up", "gateway_service", "vlan", "qos"],
    "Tunnel": ["from_node", "to_node", "encap", "remote_ip", "bfd"],
    "Gateway_Assignment": ["service", "kind", "nodes", "uplink_next_hop", "uplink_mac"],
    "Replication_Set": ["datapath", "mode", "service_nodes"],
    "Universal_Global": ["generation", "realized_generation"],
}  # fmt: skip
FLOW_COLUMNS = ["datapath", "source", "flows", "cookie"]
MONITOR_ID = "loom-physical"
FLOWS_ID = "loom-physical-flows"

Change = tuple[str, str, "dict[str, Any] | None"]
"""(table, row uuid, the row's columns after the change, None if deleted)."""


def _where(datapaths: Iterable[int]) -> list[Any]:
    """A monitor condition (clauses are OR'ed) for rows of `datapaths`."""
    clauses: list[Any] = [["datapath", "==", dp] for dp in sorted(datapaths)]
    return clauses or [False]


FLOW_DEFAULTS: dict[str, Any] = {"datapath": 0, "source": "", "cookie": 0}
"""`update2` leaves out the columns of a new row that have their default value."""


def _flow_row(columns: dict[str, Any]) -> dict[str, Any]:
    row = {**FLOW_DEFAULTS, **columns}
    row["flows"] = _flows(columns.get("flows"))
    return row


def _flows(value: Any) -> set[str]:
    if isinstance(value, list) and value and value[0] == "set":
        return set(value[1])
    return {value} if isinstance(value, str) else set()


class UniversalReplica:
    """The universal DB as a physical controller needs it (see the module docstring)."""

    def __init__(self, remote: str, wake: Callable[[], None] | None = None) -> None:
        self.remote = remote
        self.wake = wake
        self.rows: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in [*TABLES, "Flow"]}
        """Table -> uuid -> columns; "Flow" holds Universal_Flow rows, `flows` as a set."""
        self.datapaths: frozenset[int] = frozenset()
        self.conn: RawConnection | None = None

    def start(self, datapaths: Iterable[int]) -> list[Change]:
        """(Re)connect and read; return every difference from what was held."""
        if self.conn is not None:
            self.conn.close()
        self.conn = RawConnection(self.remote, db=DB)
        if self.wake is not None:
            self.conn.keep_alive(KEEPALIVE_IDLE, self.wake)
        self.datapaths = frozenset(datapaths)
        requests = {t: {"columns": cols} for t, cols in TABLES.items()}
        initial = self.conn.call("monitor", [DB, MONITOR_ID, requests])
        flow_request = {"Universal_Flow": [{"columns": FLOW_COLUMNS,
                                            "where": _where(self.datapaths)}]}  # fmt: skip
        initial_flows = self.conn.call("monitor_cond", [DB, FLOWS_ID, flow_request])
        old = self.rows
        self.rows = {t: {} for t in old}
        for table, updates in initial.items():
            for uuid, update in updates.items():
                self.rows[table][uuid] = update["new"]
        for uuid, update in initial_flows.get("Universal_Flow", {}).items():
            self.rows["Flow"][uuid] = _flow_row(update["initial"])
        changes: list[Change] = []
        for table in self.rows:
            for uuid in old[table].keys() - self.rows[table].keys():
                changes.append((table, uuid, None))
            for uuid, row in self.rows[table].items():
                if old[table].get(uuid) != row:
                    changes.append((table, uuid, row))
        return changes

    def set_datapaths(self, datapaths: Iterable[int]) -> None:
        """Follow the rows of `datapaths` from now on (rows that enter or leave the
        condition arrive as updates, for `poll`)."""
        wanted = frozenset(datapaths)
        if wanted == self.datapaths:
            return
        assert self.conn is not None, "start() first"
        change = {"Universal_Flow": [{"where": _where(wanted)}]}
        self.conn.call("monitor_cond_change", [FLOWS_ID, FLOWS_ID, change])
        self.datapaths = wanted

    def poll(self) -> list[Change]:
        """Apply the updates received so far; return the changes, in commit order."""
        assert self.conn is not None, "start() first"
        changes: list[Change] = []
        for message in self.conn.poll():
            method = message.get("method")
            if method == "update":
                for table, updates in message["params"][1].items():
                    for uuid, update in updates.items():
                        new = update.get("new")
                        if new is None:
                            self.rows[table].pop(uuid, None)
                        else:
                            self.rows[table][uuid] = new
                        changes.append((table, uuid, new))
            elif method == "update2":
                for uuid, update in message["params"][1].get("Universal_Flow", {}).items():
                    changes.append(("Flow", uuid, self._update2(uuid, update)))
        return changes

    def _update2(self, uuid: str, update: dict[str, Any]) -> dict[str, Any] | None:
        rows = self.rows["Flow"]
        if "delete" in update:
            rows.pop(uuid, None)
            return None
        if "modify" not in update:  # initial or insert: the whole row
            row = _flow_row(update.get("insert") or update.get("initial") or {})
            rows[uuid] = row
            return row
        row = dict(rows.get(uuid, {}))
        for column, value in update["modify"].items():
            if column == "flows":  # a set's diff: the elements added or removed
                row["flows"] = set(row.get("flows", set())) ^ _flows(value)
            else:
                row[column] = value
        rows[uuid] = row
        return row

    def fileno(self) -> int:
        """The connection's descriptor."""
        assert self.conn is not None
        return self.conn.fileno()

    def has_pending(self) -> bool:
        """True if updates already received wait for `poll()`."""
        return self.conn is not None and self.conn.has_pending()

    def transact(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Write to the universal DB (the replica's connection)."""
        assert self.conn is not None
        return self.conn.transact(DB, ops)

    def close(self) -> None:
        """Close the connection."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
